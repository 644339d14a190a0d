/// One part of a message: text, or custom structured data.
public struct MessagePart: Codable, Sendable, Hashable {
    /// What the part holds.
    public enum Kind: String, Codable, Sendable, Hashable {
        /// `text` holds the content.
        case text
        /// `data` holds custom JSON; `name` says what it is (for example `location`).
        case data
    }

    public var type: Kind
    public var text: String?
    public var data: JSONValue?
    /// An app-defined label for the part.
    public var name: String?

    public init(type: Kind, text: String? = nil, data: JSONValue? = nil, name: String? = nil) {
        self.type = type
        self.text = text
        self.data = data
        self.name = name
    }

    /// A text part.
    public static func text(_ text: String) -> MessagePart { MessagePart(type: .text, text: text) }
    /// A custom data part.
    public static func data(_ data: JSONValue, name: String? = nil) -> MessagePart {
        MessagePart(type: .data, data: data, name: name)
    }
}

/// A message in a conversation.
public struct Message: Codable, Sendable, Hashable {
    /// Server-assigned, globally unique.
    public var id: String
    public var conversationId: String
    /// The conversation sequence number of this message.
    public var seq: Int64
    /// uid of the sender.
    public var sender: String
    /// The sender's own id for this message; the server keeps one message per sender and client id.
    public var clientMessageId: String?
    public var parts: [MessagePart]
    public var metadata: JSONValue?
    /// Text for a push notification; defaults to the text of the message.
    public var alert: String?
    /// When the server stored the message (epoch ms).
    public var sentAt: Int64

    public init(
        id: String, conversationId: String, seq: Int64, sender: String, clientMessageId: String? = nil,
        parts: [MessagePart], metadata: JSONValue? = nil, alert: String? = nil, sentAt: Int64
    ) {
        self.id = id
        self.conversationId = conversationId
        self.seq = seq
        self.sender = sender
        self.clientMessageId = clientMessageId
        self.parts = parts
        self.metadata = metadata
        self.alert = alert
        self.sentAt = sentAt
    }

    /// The text parts joined by newlines.
    public var text: String {
        parts.compactMap { $0.type == .text ? $0.text : nil }.joined(separator: "\n")
    }
}
