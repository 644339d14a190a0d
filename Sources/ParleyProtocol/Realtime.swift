/// Who is typing: the payload of `conversation.participantTyping` and `conversation.participantTypingOff`.
public struct TypingIndicator: Codable, Sendable, Hashable {
    /// The participant who is (or stopped) typing.
    public var uid: String
    /// Creates an indicator.
    public init(uid: String) { self.uid = uid }
}

/// A participant's delivery or read position: the payload of `conversationMessage.delivered` and
/// `conversationMessage.read`. Every message up to `seq` counts as delivered (or read) by `uid`.
public struct Receipt: Codable, Sendable, Hashable {
    /// The participant whose position moved.
    public var uid: String
    /// Every message up to this sequence number is delivered (or read).
    public var seq: Int64
    /// The newest message at or before `seq` (nil when there is none).
    public var messageId: String?
    /// When that message was sent (epoch ms).
    public var timestamp: Int64?
    /// Creates a receipt.
    public init(uid: String, seq: Int64, messageId: String? = nil, timestamp: Int64? = nil) {
        self.uid = uid
        self.seq = seq
        self.messageId = messageId
        self.timestamp = timestamp
    }
}

/// Whether a user has a live connection: the payload of `presence.update` and `GET /v1/users/{uid}/presence`.
public struct Presence: Codable, Sendable, Hashable {
    /// The user.
    public var uid: String
    /// Whether the user has a live connection (or is within the presence grace).
    public var online: Bool
    /// When the user's last connection closed (epoch ms); nil while online or when never seen.
    public var lastSeenAt: Int64?
    /// Creates a presence.
    public init(uid: String, online: Bool, lastSeenAt: Int64? = nil) {
        self.uid = uid
        self.online = online
        self.lastSeenAt = lastSeenAt
    }
}

/// Unread messages of one conversation for the logged-in user.
public struct ConversationUnread: Codable, Sendable, Hashable {
    /// The conversation.
    public var conversationId: String
    /// Messages from others after ``readSeq``.
    public var unread: Int
    /// The highest sequence number the user marked read.
    public var readSeq: Int64
    /// The conversation's latest sequence number.
    public var lastSeq: Int64
    /// Creates the unread count of a conversation.
    public init(conversationId: String, unread: Int, readSeq: Int64, lastSeq: Int64) {
        self.conversationId = conversationId
        self.unread = unread
        self.readSeq = readSeq
        self.lastSeq = lastSeq
    }
}

/// Unread counts: `GET /v1/me/unread`, and the payload of `unread.update` (then `conversations` lists only those
/// that changed).
public struct UnreadSummary: Codable, Sendable, Hashable {
    /// Unread messages in all the user's conversations.
    public var total: Int
    /// Per conversation (with `unread.update`: only those that changed).
    public var conversations: [ConversationUnread]
    /// Creates a summary.
    public init(total: Int, conversations: [ConversationUnread]) {
        self.total = total
        self.conversations = conversations
    }
}
