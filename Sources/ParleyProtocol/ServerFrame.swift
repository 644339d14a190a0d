/// A frame the server sends over the WebSocket (protocol version 1): a JSON object with a `type`.
public enum ServerFrame: Sendable, Hashable, Codable {
    /// First frame of every accepted connection.
    case hello(HelloFrame)
    /// A real-time event: `{"type":"event","event":{...}}`.
    case event(EventFrame)
    /// The result of a client request (`send`).
    case ack(AckFrame)
    /// An error, answering a client frame (`ref` set) or about the connection.
    case error(ErrorFrame)
    /// The answer to a client `ping`.
    case pong(PongFrame)
    /// The replay of missed events is over: what follows is live.
    case caughtUp(CaughtUpFrame)
    /// Missed events of a conversation cannot be replayed.
    case resync(ResyncFrame)

    /// Decodes a frame by its `type`; throws ``UnknownFrameType`` for a type this version does not know.
    public init(from decoder: any Decoder) throws {
        switch try decoder.frameType() {
        case "hello": self = .hello(try HelloFrame(from: decoder))
        case "event": self = .event(try EventFrame(from: decoder))
        case "ack": self = .ack(try AckFrame(from: decoder))
        case "error": self = .error(try ErrorFrame(from: decoder))
        case "pong": self = .pong(try PongFrame(from: decoder))
        case "caughtUp": self = .caughtUp(try CaughtUpFrame(from: decoder))
        case "resync": self = .resync(try ResyncFrame(from: decoder))
        case let other: throw UnknownFrameType(type: other)
        }
    }

    /// Encodes the frame as one JSON object with its `type`.
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .hello(let frame): try encoder.encodeTagged("hello", frame)
        case .event(let frame): try encoder.encodeTagged("event", frame)
        case .ack(let frame): try encoder.encodeTagged("ack", frame)
        case .error(let frame): try encoder.encodeTagged("error", frame)
        case .pong(let frame): try encoder.encodeTagged("pong", frame)
        case .caughtUp(let frame): try encoder.encodeTagged("caughtUp", frame)
        case .resync(let frame): try encoder.encodeTagged("resync", frame)
        }
    }
}

/// The WebSocket protocol version this module speaks.
public enum ParleyProtocolVersion {
    /// The version of the frames in this module (docs/PROTOCOL.md); ``ConnectFrame`` sends it.
    public static let current = 1
}

/// Sent once when a connection is accepted.
public struct HelloFrame: Codable, Sendable, Hashable {
    /// The protocol version of the frames that follow.
    public var protocolVersion: Int
    /// Identifies this connection in server logs.
    public var connectionId: String
    /// The app of the connection.
    public var appId: String
    /// The authenticated user.
    public var user: User
    /// How often the server pings (WebSocket ping frames), in milliseconds.
    public var heartbeatIntervalMs: Int64
    /// The server's clock (epoch ms).
    public var serverTime: Int64
    /// When the connection's auth token expires (epoch ms, on the server's clock: `tokenExpiresAt - serverTime` is
    /// the time left); absent for a token without a lifetime. The server closes the socket with 4001 at that time.
    public var tokenExpiresAt: Int64?

    /// Creates the frame.
    public init(
        protocolVersion: Int, connectionId: String, appId: String, user: User, heartbeatIntervalMs: Int64,
        serverTime: Int64, tokenExpiresAt: Int64? = nil
    ) {
        self.protocolVersion = protocolVersion
        self.connectionId = connectionId
        self.appId = appId
        self.user = user
        self.heartbeatIntervalMs = heartbeatIntervalMs
        self.serverTime = serverTime
        self.tokenExpiresAt = tokenExpiresAt
    }
}

/// Carries one event.
public struct EventFrame: Codable, Sendable, Hashable {
    /// The event.
    public var event: Event
    /// Creates the frame.
    public init(event: Event) { self.event = event }
}

/// The result of a client `send`.
public struct AckFrame: Codable, Sendable, Hashable {
    /// The `ref` of the client frame this answers.
    public var ref: String
    /// The stored message.
    public var message: Message?
    /// True when the message had been stored before (same sender and client message id), or when an edit, delete
    /// or reaction changed nothing (it had been made before).
    public var duplicate: Bool?
    /// The answer to a `reaction` frame: the message's reactions after the change.
    public var reactions: ReactionList?

    /// Creates an ack.
    public init(ref: String, message: Message? = nil, duplicate: Bool? = nil, reactions: ReactionList? = nil) {
        self.ref = ref
        self.message = message
        self.duplicate = duplicate
        self.reactions = reactions
    }
}

/// An error over the WebSocket.
public struct ErrorFrame: Codable, Sendable, Hashable {
    /// The `ref` of the client frame this answers, when there is one.
    public var ref: String?
    /// The stable code (docs/PROTOCOL.md lists them).
    public var code: ErrorCode
    /// A description for developers; may change between versions.
    public var message: String
    /// With `ERR_RATE_LIMITED`: milliseconds until the refused frame may be sent again.
    public var retryAfterMs: Int64?

    /// Creates an error frame.
    public init(ref: String? = nil, code: ErrorCode, message: String, retryAfterMs: Int64? = nil) {
        self.ref = ref
        self.code = code
        self.message = message
        self.retryAfterMs = retryAfterMs
    }
}

/// The answer to a client ping.
public struct PongFrame: Codable, Sendable, Hashable {
    /// The id of the ping this answers.
    public var id: String?
    /// The server's clock (epoch ms).
    public var serverTime: Int64
    /// Creates a pong.
    public init(id: String? = nil, serverTime: Int64) {
        self.id = id
        self.serverTime = serverTime
    }
}
