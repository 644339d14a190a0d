/// `GET /v1/app` (REST API key): the app as its operator sees it.
public struct AppOverview: Codable, Sendable, Hashable {
    /// The App ID.
    public var appId: String
    /// The app's name.
    public var name: String
    /// Epoch milliseconds.
    public var createdAt: Int64
    /// Web origins whose pages may call the REST API (CORS), `https://chat.example.com` or `*`.
    public var allowedOrigins: [String]
    /// The largest upload the app's users may make, in bytes: the app's own limit when it has one below the server's,
    /// else the server's (`--max-file-bytes`).
    public var maxFileBytes: Int64
    /// Whether the app has a limit of its own (``UpdateAppSettingsRequest/maxFileBytes``).
    public var hasOwnFileLimit: Bool
    /// Whom the app's users find when they search for users.
    public var userDirectory: UserDirectoryVisibility
    /// What becomes of a deleted user's messages.
    public var deletedUserMessages: DeletedUserMessages
    /// Stored and live figures of the app.
    public var stats: AppStats

    /// Creates an overview.
    public init(
        appId: String, name: String, createdAt: Int64, allowedOrigins: [String], maxFileBytes: Int64,
        hasOwnFileLimit: Bool = false, userDirectory: UserDirectoryVisibility = .everyone,
        deletedUserMessages: DeletedUserMessages = .tombstone, stats: AppStats
    ) {
        self.userDirectory = userDirectory
        self.deletedUserMessages = deletedUserMessages
        self.appId = appId
        self.name = name
        self.createdAt = createdAt
        self.allowedOrigins = allowedOrigins
        self.maxFileBytes = maxFileBytes
        self.hasOwnFileLimit = hasOwnFileLimit
        self.stats = stats
    }
}

/// Figures of one app: stored ones for the whole deployment, live ones for the node that answers.
public struct AppStats: Codable, Sendable, Hashable {
    /// Users of the app.
    public var users: Int
    /// Conversations not deleted.
    public var conversations: Int
    /// Authenticated WebSocket connections of the app's users on this node.
    public var liveConnections: Int
    /// The app's users with a connection on this node.
    public var connectedUsers: Int
    /// The app's users online as this node sees them (their presence grace included).
    public var onlineUsers: Int

    /// Creates figures.
    public init(users: Int, conversations: Int, liveConnections: Int, connectedUsers: Int, onlineUsers: Int) {
        self.users = users
        self.conversations = conversations
        self.liveConnections = liveConnections
        self.connectedUsers = connectedUsers
        self.onlineUsers = onlineUsers
    }
}

/// `PATCH /v1/app`: what the operator may change; what is left out keeps its value.
public struct UpdateAppSettingsRequest: Codable, Sendable, Hashable {
    /// At most ``maxAllowedOrigins``, each `scheme://host[:port]` (http or https) or `*`; the list replaces the old.
    public var allowedOrigins: [String]?
    /// The app's own upload limit in bytes, at most the server's (`--max-file-bytes`); 0 removes it (the server's
    /// applies).
    public var maxFileBytes: Int64?
    /// Whom the app's users find when they search for users.
    public var userDirectory: UserDirectoryVisibility?
    /// What becomes of a deleted user's messages.
    public var deletedUserMessages: DeletedUserMessages?

    /// The most origins an app may allow.
    public static let maxAllowedOrigins = 20

    /// Creates a change; what is left nil keeps its value.
    public init(
        allowedOrigins: [String]? = nil, maxFileBytes: Int64? = nil, userDirectory: UserDirectoryVisibility? = nil,
        deletedUserMessages: DeletedUserMessages? = nil
    ) {
        self.userDirectory = userDirectory
        self.deletedUserMessages = deletedUserMessages
        self.allowedOrigins = allowedOrigins
        self.maxFileBytes = maxFileBytes
    }
}

/// `POST /v1/app/keys`: the app's new keys, shown once. The old ones stop working at once.
public struct AppKeys: Codable, Sendable, Hashable {
    /// The App ID (unchanged).
    public var appId: String
    /// The new Auth Key (development logins).
    public var authKey: String
    /// The new REST API key (the app's server).
    public var restAPIKey: String

    /// Creates a set of keys.
    public init(appId: String, authKey: String, restAPIKey: String) {
        self.appId = appId
        self.authKey = authKey
        self.restAPIKey = restAPIKey
    }
}

/// `GET /v1/users` (REST API key): a page of the app's users in uid order.
public struct UserList: Codable, Sendable, Hashable {
    /// The users of the page.
    public var users: [User]
    /// Pass as `cursor` to get the next page; nil on the last page.
    public var nextCursor: String?

    /// Creates a page of users.
    public init(users: [User], nextCursor: String? = nil) {
        self.users = users
        self.nextCursor = nextCursor
    }
}

/// What becomes of the messages of a user the app's server deletes (`DELETE /v1/users/{uid}`).
public enum DeletedUserMessages: String, Codable, Sendable, Hashable, CaseIterable {
    /// Each becomes a tombstone: no content, its place and sender kept (the default).
    case tombstone
    /// Each becomes a tombstone that no longer names its sender either (`sender` empty, no `clientMessageId`, no
    /// `createdBy` in its events).
    case erase
}

/// `DELETE /v1/users/{uid}`: what deleting the user did.
public struct UserDeletion: Codable, Sendable, Hashable {
    /// The user as they were.
    public var user: User
    /// What became of their messages.
    public var messages: DeletedUserMessages
    /// The conversations they were taken out of.
    public var conversationsLeft: Int
    /// Their messages deleted (or erased) by this request.
    public var messagesDeleted: Int

    /// Creates a summary.
    public init(user: User, messages: DeletedUserMessages, conversationsLeft: Int, messagesDeleted: Int) {
        self.user = user
        self.messages = messages
        self.conversationsLeft = conversationsLeft
        self.messagesDeleted = messagesDeleted
    }
}
