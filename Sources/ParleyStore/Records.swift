import ParleyProtocol

/// An app: a tenant of the server with its own users, conversations and keys.
public struct AppRecord: Sendable, Hashable {
    /// The public App ID.
    public var id: String
    public var name: String
    /// SHA-256 of the development Auth Key.
    public var authKeyHash: [UInt8]
    /// SHA-256 of the secret REST API key.
    public var restAPIKeyHash: [UInt8]
    public var createdAt: Int64
    /// Web origins (`https://chat.example.com`) whose pages may call the REST API (CORS); `*` for any.
    public var allowedOrigins: [String]
    /// The app's own upload limit in bytes (below the server's); nil: the server's.
    public var maxFileBytes: Int64?
    /// Whom the app's users find when they search for users.
    public var userDirectory: UserDirectoryVisibility
    /// What becomes of a deleted user's messages.
    public var deletedUserMessages: DeletedUserMessages

    public init(
        id: String, name: String, authKeyHash: [UInt8], restAPIKeyHash: [UInt8], createdAt: Int64,
        allowedOrigins: [String] = [], maxFileBytes: Int64? = nil, userDirectory: UserDirectoryVisibility = .everyone,
        deletedUserMessages: DeletedUserMessages = .tombstone
    ) {
        self.deletedUserMessages = deletedUserMessages
        self.userDirectory = userDirectory
        self.maxFileBytes = maxFileBytes
        self.id = id
        self.name = name
        self.authKeyHash = authKeyHash
        self.restAPIKeyHash = restAPIKeyHash
        self.createdAt = createdAt
        self.allowedOrigins = allowedOrigins
    }

    /// The origins as stored: one per line (an origin holds no line break).
    public static func storedOrigins(_ origins: [String]) -> String { origins.joined(separator: "\n") }

    public static func origins(stored: String) -> [String] {
        stored.split(separator: "\n").map(String.init)
    }
}

/// How much an app holds, for its operator.
public struct AppCounts: Sendable, Hashable {
    public var users: Int
    public var conversations: Int

    public init(users: Int, conversations: Int) {
        self.users = users
        self.conversations = conversations
    }
}

/// An auth token as stored: only the hash of the secret is kept.
public struct TokenRecord: Sendable, Hashable {
    public var id: String
    /// SHA-256 of the token string.
    public var hash: [UInt8]
    public var appId: String
    public var uid: String
    public var createdAt: Int64
    public var expiresAt: Int64?
    public var revokedAt: Int64?

    public init(
        id: String, hash: [UInt8], appId: String, uid: String, createdAt: Int64, expiresAt: Int64? = nil,
        revokedAt: Int64? = nil
    ) {
        self.id = id
        self.hash = hash
        self.appId = appId
        self.uid = uid
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.revokedAt = revokedAt
    }

    /// Whether the token authenticates at `now` (epoch ms).
    public func isValid(at now: Int64) -> Bool {
        revokedAt == nil && (expiresAt.map { now < $0 } ?? true)
    }

    public var info: AuthTokenInfo { AuthTokenInfo(id: id, uid: uid, createdAt: createdAt, expiresAt: expiresAt) }
}

/// A durable conversation event as stored and published: the event and its JSON encoding, made once.
public struct StoredEvent: Sendable {
    public var event: Event
    /// The JSON encoding of `event`, as sent inside an event frame.
    public var json: [UInt8]

    public init(event: Event, json: [UInt8]) {
        self.event = event
        self.json = json
    }
}

/// A page request over a conversation's history, or over one thread of it.
public struct HistoryQuery: Sendable, Hashable {
    /// Only messages with a lower sequence number; nil for the newest.
    public var beforeSeq: Int64?
    /// Only messages with a higher sequence number, oldest first (``beforeSeq`` is then ignored).
    public var afterSeq: Int64?
    public var limit: Int
    /// Whose reactions count as `reacted` (nil: nobody's).
    public var viewer: String?
    /// Only the replies to this message (a thread); nil for the whole history.
    public var thread: String?

    public init(
        beforeSeq: Int64? = nil, afterSeq: Int64? = nil, limit: Int, viewer: String? = nil, thread: String? = nil
    ) {
        self.beforeSeq = beforeSeq
        self.afterSeq = afterSeq
        self.limit = limit
        self.viewer = viewer
        self.thread = thread
    }
}

/// A page of history as read in one transaction.
public struct MessageHistory: Sendable, Hashable {
    /// Newest first (oldest first for ``HistoryQuery/afterSeq``), each in its latest state, with its thread summary and reactions as the viewer sees them.
    public var messages: [Message]
    /// The conversation's last sequence number in the same read: the page includes every change up to it.
    public var lastSeq: Int64
    /// The thread's first message, for a thread query.
    public var parent: Message?

    public init(messages: [Message], lastSeq: Int64, parent: Message? = nil) {
        self.messages = messages
        self.lastSeq = lastSeq
        self.parent = parent
    }
}

/// Where a page of a user's unread mentions continues: after the last mention of the previous page (they are listed
/// newest first).
public struct MentionPosition: Sendable, Hashable {
    public var sentAt: Int64
    public var conversationPK: Int64
    public var seq: Int64

    public init(sentAt: Int64, conversationPK: Int64, seq: Int64) {
        self.sentAt = sentAt
        self.conversationPK = conversationPK
        self.seq = seq
    }
}

/// A message that mentions a user, with its position in the list of their mentions.
public struct MentionRow: Sendable, Hashable {
    public var message: Message
    public var position: MentionPosition

    public init(message: Message, position: MentionPosition) {
        self.message = message
        self.position = position
    }
}

/// A page request over a user's conversations, most recently active first.
public struct ConversationQuery: Sendable, Hashable {
    /// Position after which to continue: the last row of the previous page.
    public struct Position: Sendable, Hashable {
        public var lastActivityAt: Int64
        public var conversationPK: Int64
        public init(lastActivityAt: Int64, conversationPK: Int64) {
            self.lastActivityAt = lastActivityAt
            self.conversationPK = conversationPK
        }
    }

    public var after: Position?
    public var limit: Int

    public init(after: Position? = nil, limit: Int) {
        self.after = after
        self.limit = limit
    }
}

/// A conversation with what the store needs to page and authorize.
public struct ConversationRow: Sendable, Hashable {
    public var pk: Int64
    public var appId: String
    public var conversation: Conversation
    public var lastActivityAt: Int64
    public var deletedAt: Int64?

    public init(pk: Int64, appId: String, conversation: Conversation, lastActivityAt: Int64, deletedAt: Int64?) {
        self.pk = pk
        self.appId = appId
        self.conversation = conversation
        self.lastActivityAt = lastActivityAt
        self.deletedAt = deletedAt
    }

    public var position: ConversationQuery.Position {
        .init(lastActivityAt: lastActivityAt, conversationPK: pk)
    }
}

/// One change in a user's own stream: they joined or left a conversation. Numbered per user (`userSeq`, 1, 2, ...)
/// in commit order, so a reconnecting client learns of conversations it joined or left while away.
public struct MembershipChange: Sendable, Hashable {
    /// Position in the user's stream.
    public var userSeq: Int64
    public var conversationId: String
    /// True for a join (`conversation.participantAdded` of the user), false for a departure.
    public var joined: Bool
    /// The sequence number of the conversation event that made the change.
    public var seq: Int64

    public init(userSeq: Int64, conversationId: String, joined: Bool, seq: Int64) {
        self.userSeq = userSeq
        self.conversationId = conversationId
        self.joined = joined
        self.seq = seq
    }
}

/// Where a user's streams stand now: what a client without a saved position starts from.
public struct StreamPositions: Sendable, Hashable {
    /// The last position in the user's own stream (0 when it is empty).
    public var userSeq: Int64
    /// The last sequence number of each conversation the user is a participant of (deleted ones included).
    public var conversations: [String: Int64]

    public init(userSeq: Int64, conversations: [String: Int64]) {
        self.userSeq = userSeq
        self.conversations = conversations
    }
}
