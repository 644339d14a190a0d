/// Who is typing: the payload of `conversation.participantTyping` and `conversation.participantTypingOff`.
public struct TypingIndicator: Codable, Sendable, Hashable {
    public var uid: String
    public init(uid: String) { self.uid = uid }
}

/// A participant's delivery or read position: the payload of `conversationMessage.delivered` and
/// `conversationMessage.read`. Every message up to `seq` counts as delivered (or read) by `uid`.
public struct Receipt: Codable, Sendable, Hashable {
    public var uid: String
    public var seq: Int64
    /// The newest message at or before `seq` (nil when there is none).
    public var messageId: String?
    /// When that message was sent (epoch ms).
    public var timestamp: Int64?
    public init(uid: String, seq: Int64, messageId: String? = nil, timestamp: Int64? = nil) {
        self.uid = uid
        self.seq = seq
        self.messageId = messageId
        self.timestamp = timestamp
    }
}

/// Whether a user has a live connection: the payload of `presence.update` and `GET /v1/users/{uid}/presence`.
public struct Presence: Codable, Sendable, Hashable {
    public var uid: String
    public var online: Bool
    /// When the user's last connection closed (epoch ms); nil while online or when never seen.
    public var lastSeenAt: Int64?
    public init(uid: String, online: Bool, lastSeenAt: Int64? = nil) {
        self.uid = uid
        self.online = online
        self.lastSeenAt = lastSeenAt
    }
}

/// Unread messages of one conversation for the logged-in user.
public struct ConversationUnread: Codable, Sendable, Hashable {
    public var conversationId: String
    /// Messages from others after ``readSeq``.
    public var unread: Int
    public var readSeq: Int64
    public var lastSeq: Int64
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
    public var conversations: [ConversationUnread]
    public init(total: Int, conversations: [ConversationUnread]) {
        self.total = total
        self.conversations = conversations
    }
}
