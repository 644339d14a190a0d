import ParleyProtocol

/// A conversation as a send sees it. Each store's send path keeps what it read in memory across the sends of a
/// batch (and SQLite's across batches), and numbers messages from there.
public struct SendTarget: Sendable {
    public var appId: String
    public var id: String
    public var isPublic: Bool
    /// Sends between a direct conversation's two participants stop while either blocks the other.
    public var isDirect: Bool
    public var isDeleted: Bool
    public var lastSeq: Int64
    public var roles: ConversationRoles
    /// Each participant's role.
    public var members: [String: ParticipantRole]
    /// The muted participants, with when their mute ends (nil: when lifted).
    public var mutes: [String: Int64?]

    public init(
        appId: String, id: String, isPublic: Bool, isDirect: Bool, isDeleted: Bool, lastSeq: Int64,
        roles: ConversationRoles, members: [String: ParticipantRole], mutes: [String: Int64?]
    ) {
        self.appId = appId
        self.id = id
        self.isPublic = isPublic
        self.isDirect = isDirect
        self.isDeleted = isDeleted
        self.lastSeq = lastSeq
        self.roles = roles
        self.members = members
        self.mutes = mutes
    }
}

/// What a send reads besides its conversation: only what the conversation and the message call for
/// (``CommandDecisions/sendNeeds(_:_:)``).
public struct SendReads: Sendable {
    /// Who of a direct conversation's pair blocked the other.
    public var blockers: [String]
    /// The message replied to, as stored (or sent earlier in the same batch).
    public var parent: Message?
    /// The uploads the message names, by id.
    public var attachments: [String: AttachmentRecord]
    /// Uploads messages earlier in the same batch took, when the store has not written them yet.
    public var taken: Set<String>

    public init(
        blockers: [String] = [], parent: Message? = nil, attachments: [String: AttachmentRecord] = [:],
        taken: Set<String> = []
    ) {
        self.blockers = blockers
        self.parent = parent
        self.attachments = attachments
        self.taken = taken
    }
}

extension CommandDecisions {
    // MARK: Sends

    /// What a send to `target` needs read.
    public struct SendNeeds: Sendable, Equatable {
        public var blockers: Bool
        /// The id of the message replied to.
        public var parent: String?
        /// The uploads named.
        public var attachments: [String]
    }

    public static func sendNeeds(_ send: Command.SendMessage, _ target: SendTarget) -> SendNeeds {
        SendNeeds(blockers: target.isDirect, parent: send.replyTo, attachments: Attachments.ids(in: send.parts))
    }

    /// Whether the sender may send to the conversation at all: `ERR_CONVERSATION_NOT_FOUND` for one that does not
    /// exist, is of another app, is deleted, or is private and not theirs; `ERR_NOT_A_PARTICIPANT` for a public one
    /// they have not joined. These refusals hold even for a repeat of a message stored before. The sender's role; nil
    /// for a system message (the app's server, in any conversation of the app that is not deleted).
    public static func sendAccess(_ send: Command.SendMessage, _ target: SendTarget?) throws -> (
        SendTarget, ParticipantRole?
    ) {
        guard let target, target.appId == send.appId, !target.isDeleted else {
            throw DomainError.conversationNotFound(send.conversationId)
        }
        if send.system { return (target, nil) }
        guard let role = target.members[send.sender] else {
            throw target.isPublic
                ? DomainError(.notAParticipant, "Join the conversation first.")
                : DomainError.conversationNotFound(send.conversationId)
        }
        return (target, role)
    }

    /// The message a send stores as the conversation's next event, or the refusal of the rules (what the sender's
    /// role may do, a mute, a block, the message replied to, the uploads named). A store answers a refusal of a
    /// repeat with the message stored the first time (a repeat of a message stored before its parent was deleted, or
    /// the sender's role changed, is still that message). A system message (`role` nil) follows no participant's
    /// rules, and carries no file (the app's server uploads none).
    public static func sentMessage(
        _ send: Command.SendMessage, to target: SendTarget, role: ParticipantRole?, _ reads: SendReads
    ) throws -> Message {
        if let role {
            try ConversationRules.requireSend(role, roles: target.roles)
            if let until = target.mutes[send.sender], until.map({ $0 > send.now }) ?? true {
                throw Safety.mutedRefusal(until: until)
            }
            if target.isDirect {
                // The other participant's account was deleted: nobody is left to read it.
                guard target.members.count == 2 else {
                    throw DomainError(.forbidden, "The other participant of this conversation was deleted.")
                }
                try Safety.requireNoBlock(actor: send.sender, blockers: reads.blockers)
            }
        } else if !Attachments.ids(in: send.parts).isEmpty {
            throw DomainError(.badRequest, "A system message carries no file.")
        }
        if let replyTo = send.replyTo { try MessageLifecycle.requireReplyTarget(reads.parent, id: replyTo) }
        var parts = send.parts
        if !Attachments.ids(in: parts).isEmpty {
            parts = try Attachments.resolve(
                parts, records: reads.attachments, appId: target.appId, conversationId: target.id, actor: send.sender,
                taken: reads.taken
            )
        }
        let members = target.members
        return Message(
            id: send.messageId, conversationId: target.id, seq: target.lastSeq + 1, sender: send.sender,
            clientMessageId: send.clientMessageId, parts: parts, metadata: send.metadata, alert: send.alert,
            sentAt: send.now, replyTo: send.replyTo,
            mentions: MessageLifecycle.keptMentions(send.mentions, sender: send.sender) { members[$0] != nil },
            silent: send.silent ? true : nil, system: send.system ? true : nil
        )
    }

    /// What storing a message does beside its event, the same in every store.
    public struct SentEffects: Sendable, Equatable {
        /// The message's `message_index`: the conversation's message count after it (1, 2, ...) for a message that
        /// counts as unread; `-seq` for a silent one, which counts for nobody (unread counts are message counts
        /// between read positions, and a negative index is below every read position).
        public var messageIndex: Int64
        /// The conversation's message count after it.
        public var messageCount: Int64
        /// Whether its mentions are recorded as unread mentions.
        public var recordsMentions: Bool
        /// Whether it goes to the push outbox.
        public var queuesPush: Bool
        /// Whether its sender has read the conversation up to it (a participant's message; not the app's server's).
        public var movesSenderRead: Bool
    }

    /// What storing `message` (of `send`) does, in a conversation with `messageCount` counted messages before it.
    public static func sentEffects(of message: Message, _ send: Command.SendMessage, messageCount: Int64)
        -> SentEffects
    {
        let counted = message.silent != true
        return SentEffects(
            messageIndex: counted ? messageCount + 1 : -message.seq,
            messageCount: counted ? messageCount + 1 : messageCount,
            recordsMentions: counted && message.mentions != nil,
            queuesPush: counted && send.queuesPush, movesSenderRead: message.system != true
        )
    }

    /// The `conversationMessage.sent` event of a message stored.
    public static func sentEvent(_ message: Message, appId: String) throws -> StoredEvent {
        let event = Event(
            id: Event.durableID(conversationId: message.conversationId, seq: message.seq), appId: appId,
            name: .messageSent, conversationId: message.conversationId, seq: message.seq, timestamp: message.sentAt,
            context: EventContext(createdBy: message.system == true ? nil : message.sender),
            payload: .messageSent(message)
        )
        return StoredEvent(event: event, json: try WireJSON.encode(event))
    }
}
