/// The name of a real-time event, `<type>.<subtype>` as in the event catalog (docs/PROTOCOL.md).
///
/// Names are strings so that a newer server can add events: an SDK passes unknown ones through as
/// ``EventPayload/unknown(_:)``.
public struct EventName: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }
    public var description: String { rawValue }

    public init(from decoder: any Decoder) throws {
        self.rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    /// A new message in a conversation; also delivered to the sender's own connections.
    public static let messageSent: EventName = "conversationMessage.sent"
    /// A conversation was created.
    public static let conversationCreate: EventName = "conversation.create"
    /// A user joined or was added; also fires for the owner when a conversation is created.
    public static let participantAdded: EventName = "conversation.participantAdded"
}

/// Who caused an event.
public struct EventContext: Codable, Sendable, Hashable {
    /// uid of the user whose action produced the event (nil for server-made events).
    public var createdBy: String?

    public init(createdBy: String? = nil) {
        self.createdBy = createdBy
    }
}

/// The kind-specific content of an event.
public enum EventPayload: Sendable, Hashable {
    /// `conversationMessage.sent`
    case messageSent(Message)
    /// `conversation.create`
    case conversationCreated(Conversation)
    /// `conversation.participantAdded`
    case participantAdded(Participant)
    /// An event this version does not know, kept as raw JSON.
    case unknown(JSONValue)
}

/// A real-time event delivered over the WebSocket.
///
/// Durable events (messages, membership and conversation changes) carry `conversationId` and `seq`:
/// the conversation's sequence number, strictly increasing by one. Ephemeral ones (typing, presence) have
/// no `seq`.
public struct Event: Sendable, Hashable, Codable {
    /// Unique: `<conversationId>:<seq>` for durable events.
    public var id: String
    public var appId: String
    public var name: EventName
    public var conversationId: String?
    public var seq: Int64?
    /// When the server produced the event (epoch ms).
    public var timestamp: Int64
    public var context: EventContext
    public var payload: EventPayload

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

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.id = try container.decode(String.self, forKey: .id)
        self.appId = try container.decode(String.self, forKey: .appId)
        self.name = try container.decode(EventName.self, forKey: .name)
        self.conversationId = try container.decodeIfPresent(String.self, forKey: .conversationId)
        self.seq = try container.decodeIfPresent(Int64.self, forKey: .seq)
        self.timestamp = try container.decode(Int64.self, forKey: .timestamp)
        self.context = try container.decodeIfPresent(EventContext.self, forKey: .context) ?? EventContext()
        switch name {
        case .messageSent:
            self.payload = .messageSent(try container.decode(Message.self, forKey: .payload))
        case .conversationCreate:
            self.payload = .conversationCreated(try container.decode(Conversation.self, forKey: .payload))
        case .participantAdded:
            self.payload = .participantAdded(try container.decode(Participant.self, forKey: .payload))
        default:
            self.payload = .unknown(try container.decodeIfPresent(JSONValue.self, forKey: .payload) ?? .null)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(appId, forKey: .appId)
        try container.encode(name, forKey: .name)
        try container.encodeIfPresent(conversationId, forKey: .conversationId)
        try container.encodeIfPresent(seq, forKey: .seq)
        try container.encode(timestamp, forKey: .timestamp)
        try container.encode(context, forKey: .context)
        switch payload {
        case .messageSent(let message): try container.encode(message, forKey: .payload)
        case .conversationCreated(let conversation): try container.encode(conversation, forKey: .payload)
        case .participantAdded(let participant): try container.encode(participant, forKey: .payload)
        case .unknown(let value): try container.encode(value, forKey: .payload)
        }
    }
}
