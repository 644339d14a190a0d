import ParleyProtocol

/// A change to conversations that produces durable events.
///
/// Commands go through ``ParleyStore/apply(_:)`` in batches: each is checked against the rules and applied in
/// one transaction, and each durable event it makes takes the conversation's next sequence number. The server
/// sends every command through one ordered writer, so events are published in sequence order.
public enum Command: Sendable {
    case createConversation(CreateConversation)
    case updateConversation(UpdateConversation)
    /// Soft delete (the owner of a group).
    case deleteConversation(ConversationAction)
    /// Restore a deleted conversation (its owner).
    case undeleteConversation(ConversationAction)
    /// Join a public group.
    case join(ConversationAction)
    case addParticipants(AddParticipants)
    case updateParticipant(UpdateParticipant)
    /// Remove a participant, or leave (when the actor removes themself).
    case removeParticipant(RemoveParticipant)
    case sendMessage(SendMessage)
    /// Move a participant's delivered and/or read position forward.
    case markReceipt(MarkReceipt)
    /// Replace a message's content (its sender, or a role allowed to edit others' messages).
    case editMessage(EditMessage)
    /// Delete a message (its sender, or a role allowed to delete others' messages).
    case deleteMessage(MessageAction)
    /// Add or remove a reaction (any participant).
    case react(React)
    /// Pin or unpin a message (where the conversation's roles allow, or the app's server).
    case pin(Pin)
    /// A user being deleted leaves a conversation (the app's server: a group they owned passes to another member).
    case removeDeletedUser(RemoveDeletedUser)
    /// Mute or unmute a participant (who may remove them, or the app's server).
    case muteParticipant(MuteParticipant)
    /// Ban or unban a user from a group (who may remove them, or the app's server).
    case banParticipant(BanParticipant)

    /// The conversation a command changes (nil when it creates one).
    public var conversationId: String? {
        switch self {
        case .createConversation: return nil
        case .updateConversation(let command): return command.conversationId
        case .deleteConversation(let command), .undeleteConversation(let command), .join(let command):
            return command.conversationId
        case .addParticipants(let command): return command.conversationId
        case .updateParticipant(let command): return command.conversationId
        case .removeParticipant(let command): return command.conversationId
        case .sendMessage(let command): return command.conversationId
        case .markReceipt(let command): return command.conversationId
        case .editMessage(let command): return command.conversationId
        case .deleteMessage(let command): return command.conversationId
        case .react(let command): return command.conversationId
        case .pin(let command): return command.conversationId
        case .removeDeletedUser(let command): return command.conversationId
        case .muteParticipant(let command): return command.conversationId
        case .banParticipant(let command): return command.conversationId
        }
    }

    /// Ban `uid` from a group (until `until`, or until lifted; a participant is removed) or, with `banned` false, lift
    /// the ban. `actor` nil: the app's server.
    public struct BanParticipant: Sendable {
        public var appId: String
        public var conversationId: String
        public var actor: String?
        public var uid: String
        public var banned: Bool
        public var until: Int64?
        public var reason: String?
        public var now: Int64
        public init(
            appId: String, conversationId: String, actor: String?, uid: String, banned: Bool, until: Int64? = nil,
            reason: String? = nil, now: Int64
        ) {
            self.appId = appId
            self.conversationId = conversationId
            self.actor = actor
            self.uid = uid
            self.banned = banned
            self.until = until
            self.reason = reason
            self.now = now
        }
    }

    /// Mute `uid` (until `until`, or until lifted) or, with `muted` false, lift the mute. `actor` nil: the app's
    /// server.
    public struct MuteParticipant: Sendable {
        public var appId: String
        public var conversationId: String
        public var actor: String?
        public var uid: String
        public var muted: Bool
        public var until: Int64?
        public var now: Int64
        public init(
            appId: String, conversationId: String, actor: String?, uid: String, muted: Bool, until: Int64? = nil,
            now: Int64
        ) {
            self.appId = appId
            self.conversationId = conversationId
            self.actor = actor
            self.uid = uid
            self.muted = muted
            self.until = until
            self.now = now
        }
    }

    /// Change a message: `parts` replaces its parts, `metadata` and `mentions` replace its own when present.
    public struct EditMessage: Sendable {
        public var appId: String
        public var conversationId: String
        public var actor: String
        public var messageId: String
        public var parts: [MessagePart]
        public var metadata: JSONValue?
        public var mentions: [String]?
        /// The limits the edited message (new parts, with the metadata and alert it keeps) must stay within.
        public var limits: MessageLimits
        public var now: Int64
        public init(
            appId: String, conversationId: String, actor: String, messageId: String, parts: [MessagePart],
            metadata: JSONValue? = nil, mentions: [String]? = nil, limits: MessageLimits = .default, now: Int64
        ) {
            self.limits = limits
            self.appId = appId
            self.conversationId = conversationId
            self.actor = actor
            self.messageId = messageId
            self.parts = parts
            self.metadata = metadata
            self.mentions = mentions
            self.now = now
        }
    }

    /// An action of `actor` on one message.
    public struct MessageAction: Sendable {
        public var appId: String
        public var conversationId: String
        /// The user who acts; nil for the app's own server (REST API key), which may delete any message of any of
        /// the app's conversations.
        public var actor: String?
        public var messageId: String
        public var now: Int64
        /// A deletion that also takes the sender's name off the tombstone and its events (the app's server deleting
        /// a user with `deletedUserMessages = erase`).
        public var erasesSender: Bool
        /// The app's server deleting a deleted user's message: also in a deleted conversation.
        public var ofDeletedUser: Bool
        public init(
            appId: String, conversationId: String, actor: String?, messageId: String, now: Int64,
            erasesSender: Bool = false, ofDeletedUser: Bool = false
        ) {
            self.ofDeletedUser = ofDeletedUser
            self.appId = appId
            self.conversationId = conversationId
            self.actor = actor
            self.messageId = messageId
            self.now = now
            self.erasesSender = erasesSender
        }
    }

    /// Add (`add` true) or remove `actor`'s reaction `key` on a message.
    public struct React: Sendable {
        public var appId: String
        public var conversationId: String
        public var actor: String
        public var messageId: String
        public var key: String
        public var add: Bool
        public var now: Int64
        public init(
            appId: String, conversationId: String, actor: String, messageId: String, key: String, add: Bool, now: Int64
        ) {
            self.appId = appId
            self.conversationId = conversationId
            self.actor = actor
            self.messageId = messageId
            self.key = key
            self.add = add
            self.now = now
        }
    }

    /// Takes `uid`, a user being deleted, out of a conversation (``CommandDecisions/removeDeletedUser(_:_:participants:)``).
    public struct RemoveDeletedUser: Sendable {
        public var appId: String
        public var conversationId: String
        public var uid: String
        public var now: Int64
        public init(appId: String, conversationId: String, uid: String, now: Int64) {
            self.appId = appId
            self.conversationId = conversationId
            self.uid = uid
            self.now = now
        }
    }

    /// Pin (`pinned` true) or unpin a message. `actor` nil: the app's server.
    public struct Pin: Sendable {
        public var appId: String
        public var conversationId: String
        public var actor: String?
        public var messageId: String
        public var pinned: Bool
        public var now: Int64
        public init(
            appId: String, conversationId: String, actor: String?, messageId: String, pinned: Bool, now: Int64
        ) {
            self.appId = appId
            self.conversationId = conversationId
            self.actor = actor
            self.messageId = messageId
            self.pinned = pinned
            self.now = now
        }
    }

    /// An action of `actor` on one conversation, with nothing else to say.
    public struct ConversationAction: Sendable {
        public var appId: String
        public var conversationId: String
        public var actor: String
        public var now: Int64
        public init(appId: String, conversationId: String, actor: String, now: Int64) {
            self.appId = appId
            self.conversationId = conversationId
            self.actor = actor
            self.now = now
        }
    }

    /// Change a group's details (owner or admin).
    public struct UpdateConversation: Sendable {
        public var appId: String
        public var conversationId: String
        public var actor: String
        public var update: UpdateConversationRequest
        public var now: Int64
        public init(appId: String, conversationId: String, actor: String, update: UpdateConversationRequest, now: Int64)
        {
            self.appId = appId
            self.conversationId = conversationId
            self.actor = actor
            self.update = update
            self.now = now
        }
    }

    /// Change a participant's role (the owner).
    public struct UpdateParticipant: Sendable {
        public var appId: String
        public var conversationId: String
        public var actor: String
        public var uid: String
        public var role: ParticipantRole
        public var now: Int64
        public init(
            appId: String, conversationId: String, actor: String, uid: String, role: ParticipantRole, now: Int64
        ) {
            self.appId = appId
            self.conversationId = conversationId
            self.actor = actor
            self.uid = uid
            self.role = role
            self.now = now
        }
    }

    /// Remove `uid` from a conversation; `uid == actor` is leaving.
    public struct RemoveParticipant: Sendable {
        public var appId: String
        public var conversationId: String
        public var actor: String
        public var uid: String
        public var now: Int64
        public init(appId: String, conversationId: String, actor: String, uid: String, now: Int64) {
            self.appId = appId
            self.conversationId = conversationId
            self.actor = actor
            self.uid = uid
            self.now = now
        }
    }

    /// Marks messages delivered and/or read by `uid` up to a sequence number.
    public struct MarkReceipt: Sendable {
        public var appId: String
        public var conversationId: String
        public var uid: String
        public var deliveredSeq: Int64?
        public var readSeq: Int64?
        public var now: Int64
        public init(
            appId: String, conversationId: String, uid: String, deliveredSeq: Int64?, readSeq: Int64?, now: Int64
        ) {
            self.appId = appId
            self.conversationId = conversationId
            self.uid = uid
            self.deliveredSeq = deliveredSeq
            self.readSeq = readSeq
            self.now = now
        }
    }

    /// Create a group, or get-or-create the direct conversation of two users.
    public struct CreateConversation: Sendable {
        public var appId: String
        /// The id to use if a conversation is created.
        public var newId: String
        public var type: ConversationType
        public var creator: String
        /// Other participants (not including the creator).
        public var participants: [String]
        public var name: String?
        public var description: String?
        public var isPublic: Bool
        public var metadata: JSONValue?
        /// Changes of ``ConversationRoles/defaults`` (groups only).
        public var roles: ConversationRolesChange?
        public var now: Int64

        public init(
            appId: String, newId: String, type: ConversationType, creator: String, participants: [String],
            name: String? = nil, description: String? = nil, isPublic: Bool = false, metadata: JSONValue? = nil,
            roles: ConversationRolesChange? = nil, now: Int64
        ) {
            self.roles = roles
            self.appId = appId
            self.newId = newId
            self.type = type
            self.creator = creator
            self.participants = participants
            self.name = name
            self.description = description
            self.isPublic = isPublic
            self.metadata = metadata
            self.now = now
        }

        /// The key that makes a direct conversation unique for its pair of users.
        public var directKey: String? {
            guard type == .direct, let other = participants.first else { return nil }
            return [creator, other].sorted().joined(separator: "\n")
        }
    }

    /// Add users to a group.
    public struct AddParticipants: Sendable {
        public var appId: String
        public var conversationId: String
        public var actor: String
        public var entries: [AddParticipantsRequest.Entry]
        public var now: Int64

        public init(
            appId: String, conversationId: String, actor: String, entries: [AddParticipantsRequest.Entry], now: Int64
        ) {
            self.appId = appId
            self.conversationId = conversationId
            self.actor = actor
            self.entries = entries
            self.now = now
        }
    }

    /// Store a message.
    public struct SendMessage: Sendable {
        public var appId: String
        public var conversationId: String
        public var sender: String
        /// The id to give the message if it is new.
        public var messageId: String
        public var clientMessageId: String?
        public var parts: [MessagePart]
        public var metadata: JSONValue?
        public var alert: String?
        /// The id of the message this one replies to.
        public var replyTo: String?
        /// The uids to mention (those who are not participants are left out).
        public var mentions: [String]?
        public var now: Int64
        /// Records a new message in the push outbox, in the same transaction (set by the server when push is on).
        public var queuesPush: Bool = false
        /// A silent message: no unread count, unread mention or push (``CommandDecisions/sentEffects(of:_:messageCount:)``).
        public var silent: Bool = false
        /// A system message of the app's server: `sender` is empty, and no participant's rules apply.
        public var system: Bool = false

        public init(
            appId: String, conversationId: String, sender: String, messageId: String, clientMessageId: String?,
            parts: [MessagePart], metadata: JSONValue?, alert: String?, replyTo: String? = nil,
            mentions: [String]? = nil, now: Int64, queuesPush: Bool = false
        ) {
            self.queuesPush = queuesPush
            self.replyTo = replyTo
            self.mentions = mentions
            self.appId = appId
            self.conversationId = conversationId
            self.sender = sender
            self.messageId = messageId
            self.clientMessageId = clientMessageId
            self.parts = parts
            self.metadata = metadata
            self.alert = alert
            self.now = now
        }
    }
}

/// What an applied command did.
public struct CommandResult: Sendable {
    public enum Outcome: Sendable {
        /// The conversation after the command; `created` is false unless a conversation was created (a direct
        /// conversation that already existed is returned with false).
        case conversation(Conversation, created: Bool)
        case participants([Participant])
        /// One participant after the command (joined, role changed, receipt moved).
        case participant(Participant)
        /// A participant was removed (or left).
        case removed
        /// A ban as it is after a ban, or as it was before it was lifted.
        case ban(ConversationBan)
        /// `duplicate` is true when this sender had already sent this client message id, or when an edit or a
        /// delete changed nothing (made before).
        case message(Message, duplicate: Bool)
        /// The message's reactions after a reaction was added or removed; `duplicate` when it changed nothing.
        case reactions(ReactionList, duplicate: Bool)
        /// The message's pin after a pin (nil after an unpin); `duplicate` when it changed nothing.
        case pin(MessagePin?, message: Message, duplicate: Bool)
    }

    public var outcome: Outcome
    /// The events to publish, in order: durable ones carry the conversation's next sequence numbers (none for a
    /// duplicate); ephemeral ones (receipts) have no `seq` and are not stored.
    public var events: [StoredEvent]
    /// The users who receive these events: the participants after the change, plus a removed one.
    public var recipients: [String]
    /// The conversation's participants after the command, for caches of membership.
    public var participants: [String]

    public init(outcome: Outcome, events: [StoredEvent], recipients: [String], participants: [String]? = nil) {
        self.outcome = outcome
        self.events = events
        self.recipients = recipients
        self.participants = participants ?? recipients
    }
}
