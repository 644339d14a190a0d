/// A frame the client sends over the WebSocket (protocol version 1): a JSON object with a `type`.
public enum ClientFrame: Sendable, Hashable, Codable {
    /// `{"type":"connect","protocolVersion":1}`: the first frame of every connection. The server sends nothing
    /// before it, then answers with ``ServerFrame/hello(_:)`` (or an error and a close).
    case connect(ConnectFrame)
    /// `{"type":"ping","id":"..."}`: the server answers with a ``ServerFrame/pong(_:)`` carrying the same id.
    case ping(PingFrame)
    /// `{"type":"send",...}`: send a message; answered by an ``ServerFrame/ack(_:)`` or an error with the same `ref`.
    case send(SendFrame)
    /// `{"type":"typing","conversationId":"...","isTyping":true}`: the user is (or stopped) typing.
    case typing(TypingFrame)
    /// `{"type":"receipt","conversationId":"...","readSeq":12}`: marks messages delivered and/or read.
    case receipt(ReceiptFrame)
    /// `{"type":"edit",...}`: edit a message; answered like `send`.
    case edit(EditFrame)
    /// `{"type":"delete",...}`: delete a message; answered like `send`.
    case delete(DeleteFrame)
    /// `{"type":"reaction",...}`: add or remove a reaction; answered by an ack carrying the message's reactions.
    case reaction(ReactionFrame)

    /// Decodes a frame by its `type`; throws ``UnknownFrameType`` for a type this version does not know.
    public init(from decoder: any Decoder) throws {
        switch try decoder.frameType() {
        case "connect": self = .connect(try ConnectFrame(from: decoder))
        case "ping": self = .ping(try PingFrame(from: decoder))
        case "send": self = .send(try SendFrame(from: decoder))
        case "typing": self = .typing(try TypingFrame(from: decoder))
        case "receipt": self = .receipt(try ReceiptFrame(from: decoder))
        case "edit": self = .edit(try EditFrame(from: decoder))
        case "delete": self = .delete(try DeleteFrame(from: decoder))
        case "reaction": self = .reaction(try ReactionFrame(from: decoder))
        case let other:
            throw UnknownFrameType(type: other)
        }
    }

    /// Encodes the frame as one JSON object with its `type`.
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .connect(let frame): try encoder.encodeTagged("connect", frame)
        case .ping(let frame): try encoder.encodeTagged("ping", frame)
        case .send(let frame): try encoder.encodeTagged("send", frame)
        case .typing(let frame): try encoder.encodeTagged("typing", frame)
        case .receipt(let frame): try encoder.encodeTagged("receipt", frame)
        case .edit(let frame): try encoder.encodeTagged("edit", frame)
        case .delete(let frame): try encoder.encodeTagged("delete", frame)
        case .reaction(let frame): try encoder.encodeTagged("reaction", frame)
        }
    }
}

/// Thrown when decoding a frame whose `type` is not known to this version.
public struct UnknownFrameType: Error, Sendable {
    /// The `type` the frame had.
    public var type: String
}

/// Opens the conversation on a new WebSocket.
///
/// The client speaks first so that nothing the server sends can race the client's switch from HTTP to WebSocket.
public struct ConnectFrame: Codable, Sendable, Hashable {
    /// The protocol version the client speaks (`ParleyProtocolVersion.current`).
    public var protocolVersion: Int
    /// Receive `presence.update` for every user of the app, not only for users who share a conversation.
    public var subscribePresenceForAllUsers: Bool?
    /// What a reconnecting client already has; the server replays what it missed, then sends `caughtUp`.
    /// Without it, nothing is replayed and `caughtUp` gives the current positions.
    public var resume: ResumeRequest?
    /// The auth token, for clients that cannot set an `Authorization` header on the upgrade request (a browser's
    /// `WebSocket`). A connection authenticates with the header or with this, not both.
    public var token: String?

    /// Creates a `connect` frame; the protocol version defaults to this module's.
    public init(
        protocolVersion: Int = ParleyProtocolVersion.current, subscribePresenceForAllUsers: Bool? = nil,
        resume: ResumeRequest? = nil, token: String? = nil
    ) {
        self.protocolVersion = protocolVersion
        self.subscribePresenceForAllUsers = subscribePresenceForAllUsers
        self.resume = resume
        self.token = token
    }
}

/// An application-level ping: lets the client measure liveness independently of WebSocket control frames.
public struct PingFrame: Codable, Sendable, Hashable {
    /// An id the server's pong echoes, to match the answer to the ping.
    public var id: String?
    /// Creates a ping, with an optional id to match its pong.
    public init(id: String? = nil) { self.id = id }
}

/// Send a message over the socket.
public struct SendFrame: Codable, Sendable, Hashable {
    /// Client-chosen correlation id, echoed in the ack or error.
    public var ref: String
    /// The conversation to send to.
    public var conversationId: String
    /// The sender's id for this message: a retry with the same id never creates a second message.
    public var clientMessageId: String?
    /// The content.
    public var parts: [MessagePart]
    /// Custom data the app attaches to the message.
    public var metadata: JSONValue?
    /// Text for the push notification; defaults to the message's text.
    public var alert: String?
    /// The id of the message this one replies to.
    public var replyTo: String?
    /// uids to mention.
    public var mentions: [String]?
    /// True sends a silent message: no unread count, unread mention or push.
    public var silent: Bool?

    /// Creates a `send` frame.
    public init(
        ref: String, conversationId: String, clientMessageId: String? = nil, parts: [MessagePart],
        metadata: JSONValue? = nil, alert: String? = nil, replyTo: String? = nil, mentions: [String]? = nil,
        silent: Bool? = nil
    ) {
        self.silent = silent
        self.replyTo = replyTo
        self.mentions = mentions
        self.ref = ref
        self.conversationId = conversationId
        self.clientMessageId = clientMessageId
        self.parts = parts
        self.metadata = metadata
        self.alert = alert
    }
}

/// The user started (`isTyping` true, repeated while typing) or stopped typing.
public struct TypingFrame: Codable, Sendable, Hashable {
    /// The conversation typed in.
    public var conversationId: String
    /// True while typing (repeated), false when the user stopped.
    public var isTyping: Bool
    /// Creates a `typing` frame.
    public init(conversationId: String, isTyping: Bool) {
        self.conversationId = conversationId
        self.isTyping = isTyping
    }
}

/// Marks messages delivered and/or read up to a sequence number; answered by an error with `ref` on refusal.
public struct ReceiptFrame: Codable, Sendable, Hashable {
    /// Client-chosen correlation id, echoed by an error that refuses the receipt.
    public var ref: String?
    /// The conversation whose messages are marked.
    public var conversationId: String
    /// Marks every message up to this sequence number delivered.
    public var deliveredSeq: Int64?
    /// Marks every message up to this sequence number read.
    public var readSeq: Int64?
    /// Creates a `receipt` frame.
    public init(ref: String? = nil, conversationId: String, deliveredSeq: Int64? = nil, readSeq: Int64? = nil) {
        self.ref = ref
        self.conversationId = conversationId
        self.deliveredSeq = deliveredSeq
        self.readSeq = readSeq
    }
}

/// Edit a message: the fields mean what they mean in `PATCH /v1/conversations/{id}/messages/{messageId}`.
public struct EditFrame: Codable, Sendable, Hashable {
    /// Client-chosen correlation id, echoed in the ack or error.
    public var ref: String
    /// The message's conversation.
    public var conversationId: String
    /// The message to edit.
    public var messageId: String
    /// The new content: replaces the old parts.
    public var parts: [MessagePart]
    /// The new custom data; absent keeps the old.
    public var metadata: JSONValue?
    /// The new mentions; absent keeps the old.
    public var mentions: [String]?

    /// Creates an `edit` frame.
    public init(
        ref: String, conversationId: String, messageId: String, parts: [MessagePart], metadata: JSONValue? = nil,
        mentions: [String]? = nil
    ) {
        self.ref = ref
        self.conversationId = conversationId
        self.messageId = messageId
        self.parts = parts
        self.metadata = metadata
        self.mentions = mentions
    }
}

/// Delete a message.
public struct DeleteFrame: Codable, Sendable, Hashable {
    /// Client-chosen correlation id, echoed in the ack or error.
    public var ref: String
    /// The message's conversation.
    public var conversationId: String
    /// The message to delete.
    public var messageId: String

    /// Creates a `delete` frame.
    public init(ref: String, conversationId: String, messageId: String) {
        self.ref = ref
        self.conversationId = conversationId
        self.messageId = messageId
    }
}

/// Add (`remove` absent or false) or remove a reaction.
public struct ReactionFrame: Codable, Sendable, Hashable {
    /// Client-chosen correlation id, echoed in the ack or error.
    public var ref: String
    /// The message's conversation.
    public var conversationId: String
    /// The message reacted to.
    public var messageId: String
    /// The reaction: an emoji or a short key (1-64 bytes, no whitespace or control characters).
    public var key: String
    /// True removes the caller's reaction; absent or false adds it.
    public var remove: Bool?

    /// Creates a `reaction` frame.
    public init(ref: String, conversationId: String, messageId: String, key: String, remove: Bool? = nil) {
        self.ref = ref
        self.conversationId = conversationId
        self.messageId = messageId
        self.key = key
        self.remove = remove
    }
}
