import ParleyProtocol

/// A change to conversations that produces durable events.
///
/// Commands go through ``ParleyStore/apply(_:)`` in batches: each is checked against the rules and applied in
/// one transaction, and each durable event it makes takes the conversation's next sequence number. The server
/// sends every command through one ordered writer, so events are published in sequence order.
public enum Command: Sendable {
    case createConversation(CreateConversation)
    case addParticipants(AddParticipants)
    case sendMessage(SendMessage)

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
        public var now: Int64

        public init(
            appId: String, newId: String, type: ConversationType, creator: String, participants: [String],
            name: String? = nil, description: String? = nil, isPublic: Bool = false, metadata: JSONValue? = nil,
            now: Int64
        ) {
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
        public var now: Int64

        public init(
            appId: String, conversationId: String, sender: String, messageId: String, clientMessageId: String?,
            parts: [MessagePart], metadata: JSONValue?, alert: String?, now: Int64
        ) {
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
        /// `created` is false when a direct conversation already existed.
        case conversation(Conversation, created: Bool)
        case participants([Participant])
        /// `duplicate` is true when this sender had already sent this client message id.
        case message(Message, duplicate: Bool)
    }

    public var outcome: Outcome
    /// The durable events the command made, in sequence order (none for a duplicate).
    public var events: [StoredEvent]
    /// The users who receive these events: the conversation's participants after the change.
    public var recipients: [String]

    public init(outcome: Outcome, events: [StoredEvent], recipients: [String]) {
        self.outcome = outcome
        self.events = events
        self.recipients = recipients
    }
}
