import ParleyProtocol

/// A conversation as a command reads it in its transaction (in PostgreSQL under the conversation's row lock): the
/// row, its participants, and the acting user's participation. What each command reads besides is in
/// ``CommandReads``.
public struct ConversationSnapshot: Sendable {
    public var row: ConversationRow
    /// The participants' uids.
    public var members: [String]
    /// The acting user's participation; nil when they are not a participant or when no user acts (the app's
    /// server).
    public var actor: Participant?

    public init(row: ConversationRow, members: [String], actor: Participant?) {
        self.row = row
        self.members = members
        self.actor = actor
    }

    /// The other participant of a direct conversation (nil in a group, or when `uid` is alone).
    public func other(than uid: String) -> String? {
        guard row.conversation.type == .direct else { return nil }
        return members.first { $0 != uid }
    }
}

/// A message's `sent` event as stored: its index among the conversation's messages, and the message in its latest
/// state.
public struct StoredMessage: Sendable {
    public var messageIndex: Int64
    public var message: Message

    public init(messageIndex: Int64, message: Message) {
        self.messageIndex = messageIndex
        self.message = message
    }
}

/// The newest message at or before a sequence number: what a receipt names.
public struct MessagePlace: Sendable, Hashable {
    public var messageId: String
    public var sentAt: Int64

    public init(messageId: String, sentAt: Int64) {
        self.messageId = messageId
        self.sentAt = sentAt
    }
}

/// One reaction key on a message as a reaction command reads it: how many gave it, whether the actor did, and when
/// it was first given by anyone and by anyone but the actor (what its first time becomes when the actor takes theirs
/// back).
public struct ReactionTally: Sendable, Hashable {
    public var key: String
    public var count: Int
    public var byActor: Bool
    public var firstAt: Int64
    public var firstByOthersAt: Int64?

    public init(key: String, count: Int, byActor: Bool, firstAt: Int64, firstByOthersAt: Int64?) {
        self.key = key
        self.count = count
        self.byActor = byActor
        self.firstAt = firstAt
        self.firstByOthersAt = firstByOthersAt
    }
}

/// What commands read besides their ``ConversationSnapshot``; each store fills these in, the decisions use them.
public enum CommandReads {
    /// For ``CommandDecisions/createConversation(_:_:)``.
    public struct Create: Sendable {
        /// Which of the other participants named are users of the app.
        public var knownUsers: Set<String>
        /// The direct conversation of the pair, when it exists, with its participants in the order they joined.
        public var existing: (ConversationSnapshot, [Participant])?
        /// Who of the pair blocked the other (direct conversations).
        public var blockers: [String]

        public init(knownUsers: Set<String>, existing: (ConversationSnapshot, [Participant])?, blockers: [String]) {
            self.knownUsers = knownUsers
            self.existing = existing
            self.blockers = blockers
        }
    }

    /// For ``CommandDecisions/addParticipants(_:_:)``.
    public struct Add: Sendable {
        /// The participants in the order they joined.
        public var participants: [Participant]
        /// Which of the uids added are users of the app.
        public var knownUsers: Set<String>
        /// The bans in force of the uids added, by uid.
        public var bans: [String: ConversationBan]

        public init(participants: [Participant], knownUsers: Set<String>, bans: [String: ConversationBan]) {
            self.participants = participants
            self.knownUsers = knownUsers
            self.bans = bans
        }
    }

    /// For the commands on one message (edit, delete, react).
    public struct OnMessage: Sendable {
        public var stored: StoredMessage?
        /// Who of a direct conversation's pair blocked the other (empty in a group).
        public var blockers: [String]
        /// The uploads an edit names, by id.
        public var attachments: [String: AttachmentRecord]
        /// The message's reactions (a reaction command).
        public var reactions: [ReactionTally]
        /// The message's pin, and how many messages the conversation has pinned (a pin command).
        public var pin: MessagePin?
        public var pinCount: Int

        public init(
            stored: StoredMessage?, blockers: [String] = [], attachments: [String: AttachmentRecord] = [:],
            reactions: [ReactionTally] = [], pin: MessagePin? = nil, pinCount: Int = 0
        ) {
            self.pin = pin
            self.pinCount = pinCount
            self.stored = stored
            self.blockers = blockers
            self.attachments = attachments
            self.reactions = reactions
        }
    }

    /// For ``CommandDecisions/banParticipant(_:_:_:)``.
    public struct Ban: Sendable {
        /// The user banned, when a participant.
        public var participant: Participant?
        /// Whether the user banned is a user of the app.
        public var isUser: Bool
        /// The ban in force.
        public var current: ConversationBan?

        public init(participant: Participant?, isUser: Bool, current: ConversationBan?) {
            self.participant = participant
            self.isUser = isUser
            self.current = current
        }
    }
}
