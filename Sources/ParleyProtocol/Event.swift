/// The name of a real-time event, `<type>.<subtype>` as in the event catalog (docs/PROTOCOL.md).
///
/// Names are strings so that a newer server can add events: an SDK passes unknown ones through as
/// ``EventPayload/unknown(_:)``.
public struct EventName: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    /// The name, for example `conversationMessage.sent`.
    public let rawValue: String
    /// Creates a name from its string.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Creates a name from a string literal.
    public init(stringLiteral value: String) { self.rawValue = value }
    /// The name itself.
    public var description: String { rawValue }

    /// Decodes a name from a JSON string.
    public init(from decoder: any Decoder) throws {
        self.rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    /// Encodes the name as a JSON string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    /// A user's profile changed (name, avatar, custom data).
    public static let profileUpdate: EventName = "profile.update"
    /// A conversation was created.
    public static let conversationCreate: EventName = "conversation.create"
    /// A conversation's details changed.
    public static let conversationUpdate: EventName = "conversation.update"
    /// A conversation was deleted (it can be restored).
    public static let conversationDelete: EventName = "conversation.delete"
    /// A deleted conversation was restored.
    public static let conversationUndelete: EventName = "conversation.undelete"
    /// A user joined or was added; also fires for the owner when a conversation is created.
    public static let participantAdded: EventName = "conversation.participantAdded"
    /// A participant's role changed.
    public static let participantUpdated: EventName = "conversation.participantUpdated"
    /// A participant was removed or left.
    public static let participantRemoved: EventName = "conversation.participantRemoved"
    /// A user was banned from a group (after their `participantRemoved` when they were in it), or their ban changed.
    public static let participantBanned: EventName = "conversation.participantBanned"
    /// A user's ban from a group was lifted.
    public static let participantUnbanned: EventName = "conversation.participantUnbanned"
    /// A participant started typing.
    public static let participantTyping: EventName = "conversation.participantTyping"
    /// A participant stopped typing (or went silent, or disconnected).
    public static let participantTypingOff: EventName = "conversation.participantTypingOff"
    /// A participant marked messages delivered up to a sequence number.
    public static let messageDelivered: EventName = "conversationMessage.delivered"
    /// A participant marked messages read up to a sequence number.
    public static let messageRead: EventName = "conversationMessage.read"
    /// A new message in a conversation; also delivered to the sender's own connections.
    public static let messageSent: EventName = "conversationMessage.sent"
    /// A message was edited: the payload is the message after the edit.
    public static let messageUpdate: EventName = "conversationMessage.update"
    /// A message was deleted: the payload is what remains of it (no content, `deletedAt` and `deletedBy` set).
    public static let messageDelete: EventName = "conversationMessage.delete"
    /// A participant added a reaction to a message.
    public static let reactionAdded: EventName = "conversationMessage.reactionAdded"
    /// A participant removed their reaction from a message.
    public static let reactionRemoved: EventName = "conversationMessage.reactionRemoved"
    /// A message was pinned to its conversation.
    public static let messagePinned: EventName = "conversationMessage.pinned"
    /// A message was unpinned (deleting a pinned message unpins it without this event).
    public static let messageUnpinned: EventName = "conversationMessage.unpinned"
    /// A user went online or offline.
    public static let presenceUpdate: EventName = "presence.update"
    /// The logged-in user's unread counts changed.
    public static let unreadUpdate: EventName = "unread.update"
}

/// Who caused an event.
public struct EventContext: Codable, Sendable, Hashable {
    /// uid of the user whose action produced the event (nil for server-made events).
    public var createdBy: String?

    /// Creates a context; nil for an event the server made.
    public init(createdBy: String? = nil) {
        self.createdBy = createdBy
    }
}

/// The kind-specific content of an event.
public enum EventPayload: Sendable, Hashable {
    /// `profile.update`: the user after the change.
    case profileUpdated(User)
    /// `conversation.create`
    case conversationCreated(Conversation)
    /// `conversation.update`: the conversation after the change.
    case conversationUpdated(Conversation)
    /// `conversation.delete`: the conversation, with `deletedAt` set.
    case conversationDeleted(Conversation)
    /// `conversation.undelete`
    case conversationUndeleted(Conversation)
    /// `conversation.participantAdded`
    case participantAdded(Participant)
    /// `conversation.participantUpdated`: the participant with the new role.
    case participantUpdated(Participant)
    /// `conversation.participantRemoved`: the participant as they were.
    case participantRemoved(Participant)
    /// `conversation.participantBanned`: the ban as it is now.
    case participantBanned(ConversationBan)
    /// `conversation.participantUnbanned`: the ban that was lifted.
    case participantUnbanned(ConversationBan)
    /// `conversation.participantTyping`
    case participantTyping(TypingIndicator)
    /// `conversation.participantTypingOff`
    case participantTypingOff(TypingIndicator)
    /// `conversationMessage.delivered`
    case messageDelivered(Receipt)
    /// `conversationMessage.read`
    case messageRead(Receipt)
    /// `conversationMessage.sent`
    case messageSent(Message)
    /// `conversationMessage.update`: the message after the edit.
    case messageUpdated(Message)
    /// `conversationMessage.delete`: the message as it remains (a tombstone).
    case messageDeleted(Message)
    /// `conversationMessage.reactionAdded`
    case reactionAdded(MessageReaction)
    /// `conversationMessage.reactionRemoved`
    case reactionRemoved(MessageReaction)
    /// `conversationMessage.pinned`: the pin.
    case messagePinned(MessagePin)
    /// `conversationMessage.unpinned`: the pin as it was.
    case messageUnpinned(MessagePin)
    /// `presence.update`
    case presenceUpdated(Presence)
    /// `unread.update`
    case unreadUpdated(UnreadSummary)
    /// `parley.caughtUp` (made by the SDK): the replay after a (re)connect is over; what follows is live.
    case caughtUp(CaughtUpFrame)
    /// `parley.resyncRequired` (made by the SDK): missed events of a conversation cannot be replayed; reload it.
    case resyncRequired(ResyncFrame)
    /// An event this version does not know, kept as raw JSON.
    case unknown(JSONValue)

    /// The name of events that carry this payload (nil for ``unknown(_:)``).
    public var eventName: EventName? {
        switch self {
        case .profileUpdated: return .profileUpdate
        case .conversationCreated: return .conversationCreate
        case .conversationUpdated: return .conversationUpdate
        case .conversationDeleted: return .conversationDelete
        case .conversationUndeleted: return .conversationUndelete
        case .participantAdded: return .participantAdded
        case .participantUpdated: return .participantUpdated
        case .participantRemoved: return .participantRemoved
        case .participantBanned: return .participantBanned
        case .participantUnbanned: return .participantUnbanned
        case .participantTyping: return .participantTyping
        case .participantTypingOff: return .participantTypingOff
        case .messageDelivered: return .messageDelivered
        case .messageRead: return .messageRead
        case .messageSent: return .messageSent
        case .messageUpdated: return .messageUpdate
        case .messageDeleted: return .messageDelete
        case .reactionAdded: return .reactionAdded
        case .reactionRemoved: return .reactionRemoved
        case .messagePinned: return .messagePinned
        case .messageUnpinned: return .messageUnpinned
        case .presenceUpdated: return .presenceUpdate
        case .unreadUpdated: return .unreadUpdate
        case .caughtUp: return .caughtUp
        case .resyncRequired: return .resyncRequired
        case .unknown: return nil
        }
    }

    /// Decodes the payload of an event named `name`.
    static func decode(_ name: EventName, from container: KeyedDecodingContainer<Event.CodingKeys>) throws
        -> EventPayload
    {
        func value<T: Decodable>(_ type: T.Type) throws -> T { try container.decode(type, forKey: .payload) }
        switch name {
        case .profileUpdate: return .profileUpdated(try value(User.self))
        case .conversationCreate: return .conversationCreated(try value(Conversation.self))
        case .conversationUpdate: return .conversationUpdated(try value(Conversation.self))
        case .conversationDelete: return .conversationDeleted(try value(Conversation.self))
        case .conversationUndelete: return .conversationUndeleted(try value(Conversation.self))
        case .participantAdded: return .participantAdded(try value(Participant.self))
        case .participantUpdated: return .participantUpdated(try value(Participant.self))
        case .participantRemoved: return .participantRemoved(try value(Participant.self))
        case .participantBanned: return .participantBanned(try value(ConversationBan.self))
        case .participantUnbanned: return .participantUnbanned(try value(ConversationBan.self))
        case .participantTyping: return .participantTyping(try value(TypingIndicator.self))
        case .participantTypingOff: return .participantTypingOff(try value(TypingIndicator.self))
        case .messageDelivered: return .messageDelivered(try value(Receipt.self))
        case .messageRead: return .messageRead(try value(Receipt.self))
        case .messageSent: return .messageSent(try value(Message.self))
        case .messageUpdate: return .messageUpdated(try value(Message.self))
        case .messageDelete: return .messageDeleted(try value(Message.self))
        case .reactionAdded: return .reactionAdded(try value(MessageReaction.self))
        case .reactionRemoved: return .reactionRemoved(try value(MessageReaction.self))
        case .messagePinned: return .messagePinned(try value(MessagePin.self))
        case .messageUnpinned: return .messageUnpinned(try value(MessagePin.self))
        case .presenceUpdate: return .presenceUpdated(try value(Presence.self))
        case .unreadUpdate: return .unreadUpdated(try value(UnreadSummary.self))
        case .caughtUp: return .caughtUp(try value(CaughtUpFrame.self))
        case .resyncRequired: return .resyncRequired(try value(ResyncFrame.self))
        default: return .unknown(try container.decodeIfPresent(JSONValue.self, forKey: .payload) ?? .null)
        }
    }

    func encode(into container: inout KeyedEncodingContainer<Event.CodingKeys>) throws {
        switch self {
        case .profileUpdated(let user): try container.encode(user, forKey: .payload)
        case .conversationCreated(let conversation), .conversationUpdated(let conversation),
            .conversationDeleted(let conversation), .conversationUndeleted(let conversation):
            try container.encode(conversation, forKey: .payload)
        case .participantAdded(let participant), .participantUpdated(let participant),
            .participantRemoved(let participant):
            try container.encode(participant, forKey: .payload)
        case .participantBanned(let ban), .participantUnbanned(let ban): try container.encode(ban, forKey: .payload)
        case .participantTyping(let typing), .participantTypingOff(let typing):
            try container.encode(typing, forKey: .payload)
        case .messageDelivered(let receipt), .messageRead(let receipt): try container.encode(receipt, forKey: .payload)
        case .messageSent(let message), .messageUpdated(let message), .messageDeleted(let message):
            try container.encode(message, forKey: .payload)
        case .reactionAdded(let reaction), .reactionRemoved(let reaction):
            try container.encode(reaction, forKey: .payload)
        case .messagePinned(let pin), .messageUnpinned(let pin): try container.encode(pin, forKey: .payload)
        case .presenceUpdated(let presence): try container.encode(presence, forKey: .payload)
        case .unreadUpdated(let unread): try container.encode(unread, forKey: .payload)
        case .caughtUp(let caughtUp): try container.encode(caughtUp, forKey: .payload)
        case .resyncRequired(let resync): try container.encode(resync, forKey: .payload)
        case .unknown(let value): try container.encode(value, forKey: .payload)
        }
    }
}

extension EventPayload {
    /// The message a message event is about (sent, edited or deleted).
    public var message: Message? {
        switch self {
        case .messageSent(let message), .messageUpdated(let message), .messageDeleted(let message): return message
        default: return nil
        }
    }
}

/// A real-time event delivered over the WebSocket.
///
/// Durable events (messages, membership and conversation changes) carry `conversationId` and `seq`:
/// the conversation's sequence number, strictly increasing by one. Ephemeral ones (typing, receipts, presence,
/// profile and unread updates) have no `seq`.
public struct Event: Sendable, Hashable, Codable {
    /// Unique: `<conversationId>:<seq>` for durable events.
    public var id: String
    /// The app the event belongs to.
    public var appId: String
    /// What happened; says which ``payload`` the event carries.
    public var name: EventName
    /// The conversation of a conversation event (always set on durable events).
    public var conversationId: String?
    /// The conversation's sequence number of a durable event; nil on ephemeral ones.
    public var seq: Int64?
    /// When the server produced the event (epoch ms).
    public var timestamp: Int64
    /// Who caused the event.
    public var context: EventContext
    /// The kind-specific content.
    public var payload: EventPayload

    /// Creates an event.
    public init(
        id: String, appId: String, name: EventName, conversationId: String? = nil, seq: Int64? = nil,
        timestamp: Int64, context: EventContext, payload: EventPayload
    ) {
        self.id = id
        self.appId = appId
        self.name = name
        self.conversationId = conversationId
        self.seq = seq
        self.timestamp = timestamp
        self.context = context
        self.payload = payload
    }

    /// The event id of a durable conversation event.
    public static func durableID(conversationId: String, seq: Int64) -> String { "\(conversationId):\(seq)" }

    enum CodingKeys: String, CodingKey {
        case id, appId, name, conversationId, seq, timestamp, context, payload
    }

    /// Decodes an event; its payload by its name, and an unknown name's as ``EventPayload/unknown(_:)``.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.id = try container.decode(String.self, forKey: .id)
        self.appId = try container.decode(String.self, forKey: .appId)
        self.name = try container.decode(EventName.self, forKey: .name)
        self.conversationId = try container.decodeIfPresent(String.self, forKey: .conversationId)
        self.seq = try container.decodeIfPresent(Int64.self, forKey: .seq)
        self.timestamp = try container.decode(Int64.self, forKey: .timestamp)
        self.context = try container.decodeIfPresent(EventContext.self, forKey: .context) ?? EventContext()
        self.payload = try EventPayload.decode(name, from: container)
    }

    /// Encodes the event as the server sends it.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(appId, forKey: .appId)
        try container.encode(name, forKey: .name)
        try container.encodeIfPresent(conversationId, forKey: .conversationId)
        try container.encodeIfPresent(seq, forKey: .seq)
        try container.encode(timestamp, forKey: .timestamp)
        try container.encode(context, forKey: .context)
        try payload.encode(into: &container)
    }
}
