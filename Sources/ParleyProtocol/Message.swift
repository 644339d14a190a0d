/// One part of a message: text, custom structured data, or an uploaded file.
public struct MessagePart: Codable, Sendable, Hashable {
    /// What the part holds.
    public enum Kind: String, Codable, Sendable, Hashable {
        /// `text` holds the content.
        case text
        /// `data` holds custom JSON; `name` says what it is (for example `location`).
        case data
        /// `file` names an upload of the sender (``FileInfo``); the server fills in what it knows of the file.
        case file
    }

    /// What the part holds: says which of `text`, `data` and `file` is set.
    public var type: Kind
    /// The text of a `text` part.
    public var text: String?
    /// The custom JSON of a `data` part.
    public var data: JSONValue?
    /// An app-defined label for the part.
    public var name: String?
    /// The file of a `file` part.
    public var file: FileInfo?

    /// Creates a part; ``text(_:)``, ``data(_:name:)`` and ``file(_:preview:)`` are shorter.
    public init(type: Kind, text: String? = nil, data: JSONValue? = nil, name: String? = nil, file: FileInfo? = nil) {
        self.type = type
        self.text = text
        self.data = data
        self.name = name
        self.file = file
    }

    /// A file part for an upload (``Attachment``), with an optional small preview (``FileInfo/preview``).
    public static func file(_ attachment: Attachment, preview: String? = nil) -> MessagePart {
        MessagePart(type: .file, file: FileInfo(attachment, preview: preview))
    }

    /// A text part.
    public static func text(_ text: String) -> MessagePart { MessagePart(type: .text, text: text) }
    /// A custom data part.
    public static func data(_ data: JSONValue, name: String? = nil) -> MessagePart {
        MessagePart(type: .data, data: data, name: name)
    }
}

/// A message in a conversation.
///
/// A message changes after it is sent: its sender (or, where the conversation's roles allow, an owner or admin) edits
/// or deletes it, and participants react to it. Events carry the message as it is after the change
/// (`conversationMessage.update`, `conversationMessage.delete`); history reads return its latest state, with the
/// reactions and the thread's summary as the reader sees them.
public struct Message: Codable, Sendable, Hashable {
    /// Server-assigned, globally unique.
    public var id: String
    /// The conversation the message belongs to.
    public var conversationId: String
    /// The conversation sequence number of this message.
    public var seq: Int64
    /// uid of the sender; empty for a system message (``system``).
    public var sender: String
    /// The sender's own id for this message; the server keeps one message per sender and client id.
    public var clientMessageId: String?
    /// The content; empty once the message is deleted.
    public var parts: [MessagePart]
    /// Custom data the app attaches to the message.
    public var metadata: JSONValue?
    /// Text for a push notification; defaults to the text of the message.
    public var alert: String?
    /// When the server stored the message (epoch ms).
    public var sentAt: Int64
    /// The id of the message this one replies to (the first message of its thread); nil for a message that is not a
    /// reply.
    public var replyTo: String?
    /// The uids the message mentions (participants when it was stored or last edited); nil when none.
    public var mentions: [String]?
    /// When the message was last edited (epoch ms); nil when never.
    public var editedAt: Int64?
    /// When the message was deleted (epoch ms); nil while it is not. A deleted message keeps its place (id, `seq`,
    /// sender, `sentAt`, `replyTo`) and loses its content (`parts` empty, no metadata, alert or mentions).
    public var deletedAt: Int64?
    /// uid of who deleted it (the sender, or an owner or admin).
    public var deletedBy: String?
    /// Replies to this message that are not deleted (history reads only; nil when there are none).
    public var replyCount: Int?
    /// When the latest reply to this message was sent, deleted ones included (history reads only).
    public var lastReplyAt: Int64?
    /// The reactions, by key, in the order each key was first given (history reads only; nil when there are none).
    public var reactions: [ReactionSummary]?
    /// Who pinned the message to its conversation, and when (history reads only; nil when it is not pinned).
    public var pin: MessagePin?
    /// True for a silent message: it raised no unread count, unread mention or push (nil otherwise).
    public var silent: Bool?
    /// True for a system message: the app's server sent it (REST API key); its `sender` is empty (nil otherwise).
    public var system: Bool?

    /// Creates a message from its fields.
    public init(
        id: String, conversationId: String, seq: Int64, sender: String, clientMessageId: String? = nil,
        parts: [MessagePart], metadata: JSONValue? = nil, alert: String? = nil, sentAt: Int64, replyTo: String? = nil,
        mentions: [String]? = nil, editedAt: Int64? = nil, deletedAt: Int64? = nil, deletedBy: String? = nil,
        replyCount: Int? = nil, lastReplyAt: Int64? = nil, reactions: [ReactionSummary]? = nil, pin: MessagePin? = nil,
        silent: Bool? = nil, system: Bool? = nil
    ) {
        self.pin = pin
        self.silent = silent
        self.system = system
        self.id = id
        self.conversationId = conversationId
        self.seq = seq
        self.sender = sender
        self.clientMessageId = clientMessageId
        self.parts = parts
        self.metadata = metadata
        self.alert = alert
        self.sentAt = sentAt
        self.replyTo = replyTo
        self.mentions = mentions
        self.editedAt = editedAt
        self.deletedAt = deletedAt
        self.deletedBy = deletedBy
        self.replyCount = replyCount
        self.lastReplyAt = lastReplyAt
        self.reactions = reactions
    }

    /// The text parts joined by newlines.
    public var text: String {
        parts.compactMap { $0.type == .text ? $0.text : nil }.joined(separator: "\n")
    }

    /// The files of the `file` parts, in order.
    public var files: [FileInfo] { parts.compactMap { $0.type == .file ? $0.file : nil } }

    /// Whether the message was deleted (its content is gone).
    public var isDeleted: Bool { deletedAt != nil }

    /// The message without what history reads add for a reader (reply summary, reactions, pin): what events carry.
    public var stored: Message {
        var stored = self
        stored.replyCount = nil
        stored.lastReplyAt = nil
        stored.reactions = nil
        stored.pin = nil
        return stored
    }
}

/// One reaction key on a message, as a reader sees it.
public struct ReactionSummary: Codable, Sendable, Hashable {
    /// An emoji or a short key (1-64 bytes, no whitespace or control characters).
    public var key: String
    /// How many participants gave it.
    public var count: Int
    /// Whether the reader is one of them.
    public var reacted: Bool

    /// Creates a summary of one reaction key.
    public init(key: String, count: Int, reacted: Bool) {
        self.key = key
        self.count = count
        self.reacted = reacted
    }
}

/// The payload of `conversationMessage.reactionAdded` and `conversationMessage.reactionRemoved`: who added or removed
/// which key on which message, and how many participants have that key on it now.
public struct MessageReaction: Codable, Sendable, Hashable {
    /// The message reacted to.
    public var messageId: String
    /// The message's sequence number.
    public var messageSeq: Int64
    /// The reaction: an emoji or a short key.
    public var key: String
    /// Who added or removed it.
    public var uid: String
    /// How many participants have this key on the message after the change.
    public var count: Int

    /// Creates a reaction change.
    public init(messageId: String, messageSeq: Int64, key: String, uid: String, count: Int) {
        self.messageId = messageId
        self.messageSeq = messageSeq
        self.key = key
        self.uid = uid
        self.count = count
    }
}

/// A message pinned to its conversation: the payload of `conversationMessage.pinned` and
/// `conversationMessage.unpinned` (the pin as it was), and ``Message/pin`` in history reads.
///
/// It names the message rather than carrying it, so that an edit or a deletion never leaves the old content in a
/// pin's event.
public struct MessagePin: Codable, Sendable, Hashable {
    /// The message pinned.
    public var messageId: String
    /// The message's sequence number.
    public var messageSeq: Int64
    /// Who pinned it; nil for the app's server (REST API key).
    public var pinnedBy: String?
    /// When it was pinned (epoch ms).
    public var pinnedAt: Int64

    /// Creates a pin.
    public init(messageId: String, messageSeq: Int64, pinnedBy: String?, pinnedAt: Int64) {
        self.messageId = messageId
        self.messageSeq = messageSeq
        self.pinnedBy = pinnedBy
        self.pinnedAt = pinnedAt
    }
}
