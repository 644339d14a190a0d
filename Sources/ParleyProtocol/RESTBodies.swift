// Request and response bodies of the REST API (`/v1`). The OpenAPI document
// (Sources/ParleyAPI/openapi.yaml) describes each one under `components/schemas` with the same name.

/// The body of every REST error response.
public struct ErrorResponse: Codable, Sendable, Hashable {
    /// What went wrong.
    public struct Detail: Codable, Sendable, Hashable {
        /// The stable code (docs/PROTOCOL.md lists them).
        public var code: ErrorCode
        /// A description for developers; may change between versions.
        public var message: String
        /// With `ERR_RATE_LIMITED`: milliseconds until the request may succeed (also in `Retry-After`, in seconds).
        public var retryAfterMs: Int64?
        /// Creates the detail of an error.
        public init(code: ErrorCode, message: String, retryAfterMs: Int64? = nil) {
            self.code = code
            self.message = message
            self.retryAfterMs = retryAfterMs
        }
    }

    /// What went wrong.
    public var error: Detail
    /// Creates an error body.
    public init(code: ErrorCode, message: String, retryAfterMs: Int64? = nil) {
        self.error = Detail(code: code, message: message, retryAfterMs: retryAfterMs)
    }
}

/// `GET /health`
public struct HealthStatus: Codable, Sendable, Hashable {
    /// `ok` when the server answers.
    public var status: String
    /// Creates a health status.
    public init(status: String) { self.status = status }
}

/// Public facts about an app: `GET /v1/apps/{appId}`.
public struct AppInfo: Codable, Sendable, Hashable {
    /// The App ID.
    public var id: String
    /// The app's name.
    public var name: String
    /// Creates an app's public facts.
    public init(id: String, name: String) {
        self.id = id
        self.name = name
    }
}

/// `POST /v1/login`: log in with the app's development Auth Key.
public struct LoginRequest: Codable, Sendable, Hashable {
    /// The app to log in to.
    public var appId: String
    /// Who logs in; a new uid creates the user.
    public var uid: String
    /// The app's development Auth Key.
    public var authKey: String
    /// Creates a login request.
    public init(appId: String, uid: String, authKey: String) {
        self.appId = appId
        self.uid = uid
        self.authKey = authKey
    }
}

/// A logged-in session: the user and a new auth token.
public struct LoginResponse: Codable, Sendable, Hashable {
    /// The logged-in user.
    public var user: User
    /// The new auth token: the `Authorization: Bearer` of REST calls and of the WebSocket.
    public var authToken: String
    /// Creates a login response.
    public init(user: User, authToken: String) {
        self.user = user
        self.authToken = authToken
    }
}

/// `POST /v1/users`
public struct CreateUserRequest: Codable, Sendable, Hashable {
    /// The new user's uid (``User/isValidUID(_:)``).
    public var uid: String
    /// Display name; defaults to the uid.
    public var name: String?
    /// URL of the user's avatar image.
    public var avatarURL: String?
    /// Custom data the app attaches to the user.
    public var metadata: JSONValue?
    /// Creates a request.
    public init(uid: String, name: String? = nil, avatarURL: String? = nil, metadata: JSONValue? = nil) {
        self.uid = uid
        self.name = name
        self.avatarURL = avatarURL
        self.metadata = metadata
    }
}

/// `PATCH /v1/users/{uid}`: fields that are present replace the stored ones.
public struct UpdateUserRequest: Codable, Sendable, Hashable {
    /// The new display name.
    public var name: String?
    /// The new avatar URL.
    public var avatarURL: String?
    /// The new custom data.
    public var metadata: JSONValue?
    /// Creates a request; what is left nil stays.
    public init(name: String? = nil, avatarURL: String? = nil, metadata: JSONValue? = nil) {
        self.name = name
        self.avatarURL = avatarURL
        self.metadata = metadata
    }
}

/// `POST /v1/users/{uid}/auth-tokens`
public struct IssueAuthTokenRequest: Codable, Sendable, Hashable {
    /// Lifetime in seconds; nil for a token that lives until revoked.
    public var ttlSeconds: Int64?
    /// Creates a request; nil for a token that lives until revoked.
    public init(ttlSeconds: Int64? = nil) { self.ttlSeconds = ttlSeconds }
}

/// What the server keeps about an auth token (never the token itself).
public struct AuthTokenInfo: Codable, Sendable, Hashable {
    /// The token's id, to revoke it.
    public var id: String
    /// The user the token logs in.
    public var uid: String
    /// When the token was issued (epoch ms).
    public var createdAt: Int64
    /// When the token expires (epoch ms); nil when it lives until revoked.
    public var expiresAt: Int64?
    /// Creates a token's record.
    public init(id: String, uid: String, createdAt: Int64, expiresAt: Int64? = nil) {
        self.id = id
        self.uid = uid
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// A newly issued auth token. `authToken` is shown once; the server stores only its hash.
public struct IssuedAuthToken: Codable, Sendable, Hashable {
    /// The token itself: give it to the user's client (`ParleyClient.login(authToken:)`).
    public var authToken: String
    /// What the server keeps about it.
    public var token: AuthTokenInfo
    /// Creates an issued token.
    public init(authToken: String, token: AuthTokenInfo) {
        self.authToken = authToken
        self.token = token
    }
}

/// `GET /v1/users/{uid}/auth-tokens`
public struct AuthTokenList: Codable, Sendable, Hashable {
    /// The user's tokens.
    public var tokens: [AuthTokenInfo]
    /// Creates a list of tokens.
    public init(tokens: [AuthTokenInfo]) { self.tokens = tokens }
}

/// `POST /v1/conversations`
public struct CreateConversationRequest: Codable, Sendable, Hashable {
    /// Direct or group.
    public var type: ConversationType
    /// The other participants (the caller is added as owner). Exactly one for `direct`.
    public var participants: [String]
    /// Group name.
    public var name: String?
    /// Group description.
    public var description: String?
    /// Whether anyone in the app may join (groups only); default false.
    public var isPublic: Bool?
    /// Custom data the app attaches to the conversation.
    public var metadata: JSONValue?
    /// Permissions that differ from ``ConversationRoles/defaults`` (groups only).
    public var roles: ConversationRolesChange?

    /// Creates a request.
    public init(
        type: ConversationType, participants: [String], name: String? = nil, description: String? = nil,
        isPublic: Bool? = nil, metadata: JSONValue? = nil, roles: ConversationRolesChange? = nil
    ) {
        self.roles = roles
        self.type = type
        self.participants = participants
        self.name = name
        self.description = description
        self.isPublic = isPublic
        self.metadata = metadata
    }
}

/// A page of the caller's conversations, most recently active first.
public struct ConversationList: Codable, Sendable, Hashable {
    /// The conversations of the page.
    public var conversations: [Conversation]
    /// Pass as `cursor` to get the next page; nil on the last page.
    public var nextCursor: String?
    /// Creates a page of conversations.
    public init(conversations: [Conversation], nextCursor: String? = nil) {
        self.conversations = conversations
        self.nextCursor = nextCursor
    }
}

/// `POST /v1/conversations/{conversationId}/participants`
public struct AddParticipantsRequest: Codable, Sendable, Hashable {
    /// One user to add.
    public struct Entry: Codable, Sendable, Hashable {
        /// The user.
        public var uid: String
        /// Defaults to `member`.
        public var role: ParticipantRole?
        /// Creates an entry; nil role for `member`.
        public init(uid: String, role: ParticipantRole? = nil) {
            self.uid = uid
            self.role = role
        }
    }

    /// The users to add.
    public var participants: [Entry]
    /// Creates a request.
    public init(participants: [Entry]) { self.participants = participants }
}

/// `GET /v1/conversations/{conversationId}/participants`
public struct ParticipantList: Codable, Sendable, Hashable {
    /// The conversation's participants.
    public var participants: [Participant]
    /// Creates a list of participants.
    public init(participants: [Participant]) { self.participants = participants }
}

/// `POST /v1/conversations/{conversationId}/messages`
public struct SendMessageRequest: Codable, Sendable, Hashable {
    /// The sender's id for this message: a retry with the same id never creates a second message.
    public var clientMessageId: String?
    /// The content.
    public var parts: [MessagePart]
    /// Custom data the app attaches to the message.
    public var metadata: JSONValue?
    /// Text for the push notification; defaults to the message's text.
    public var alert: String?
    /// The id of the message this one replies to: a message of the same conversation that is not itself a reply.
    public var replyTo: String?
    /// uids to mention (at most 50); those who are not participants are left out.
    public var mentions: [String]?
    /// True sends a silent message: no unread count, unread mention or push for anyone (docs/PROTOCOL.md, "Silent
    /// and system messages").
    public var silent: Bool?
    /// Creates a request.
    public init(
        clientMessageId: String? = nil, parts: [MessagePart], metadata: JSONValue? = nil, alert: String? = nil,
        replyTo: String? = nil, mentions: [String]? = nil, silent: Bool? = nil
    ) {
        self.silent = silent
        self.clientMessageId = clientMessageId
        self.parts = parts
        self.metadata = metadata
        self.alert = alert
        self.replyTo = replyTo
        self.mentions = mentions
    }
}

/// `PATCH /v1/conversations/{conversationId}/messages/{messageId}`: the new content. `parts` replaces the old parts;
/// `metadata` and `mentions` replace the old ones when present and stay as they were when absent.
public struct EditMessageRequest: Codable, Sendable, Hashable {
    /// The new parts.
    public var parts: [MessagePart]
    /// The new custom data; nil keeps the old.
    public var metadata: JSONValue?
    /// The new mentions; nil keeps the old.
    public var mentions: [String]?
    /// Creates a request.
    public init(parts: [MessagePart], metadata: JSONValue? = nil, mentions: [String]? = nil) {
        self.parts = parts
        self.metadata = metadata
        self.mentions = mentions
    }
}

/// The reactions on one message as the caller sees them: the answer of adding or removing a reaction.
public struct ReactionList: Codable, Sendable, Hashable {
    /// The message.
    public var messageId: String
    /// By key, in the order each key was first given.
    public var reactions: [ReactionSummary]
    /// Creates a list of reactions.
    public init(messageId: String, reactions: [ReactionSummary]) {
        self.messageId = messageId
        self.reactions = reactions
    }
}

/// A page of history (or of a thread), in ascending sequence order; a page of the caller's unread mentions, newest
/// first; or a conversation's pinned messages, the most recently pinned first.
public struct MessagePage: Codable, Sendable, Hashable {
    /// The messages of the page.
    public var messages: [Message]
    /// Pass as `cursor` to get the next older page; nil when there is nothing older.
    public var nextCursor: String?
    /// History opened `around` or `after` a position: pass as `after` to get the next newer page; nil when there is
    /// nothing newer (and on other pages).
    public var newerCursor: String?
    /// The conversation's `lastSeq` when the page was read: the page includes every change up to it (history and
    /// threads only). A client that applies live events to the page applies those with a higher `seq`.
    public var lastSeq: Int64?
    /// The thread's first message (threads only).
    public var parent: Message?
    /// Creates a page.
    public init(
        messages: [Message], nextCursor: String? = nil, newerCursor: String? = nil, lastSeq: Int64? = nil,
        parent: Message? = nil
    ) {
        self.messages = messages
        self.nextCursor = nextCursor
        self.newerCursor = newerCursor
        self.lastSeq = lastSeq
        self.parent = parent
    }
}

/// `PATCH /v1/conversations/{conversationId}`: fields that are present replace the stored ones.
public struct UpdateConversationRequest: Codable, Sendable, Hashable {
    /// The new group name.
    public var name: String?
    /// The new group description.
    public var description: String?
    /// Whether anyone in the app may join (groups only).
    public var isPublic: Bool?
    /// The new custom data.
    public var metadata: JSONValue?
    /// Changes of what each role may do (the owner only).
    public var roles: ConversationRolesChange?
    /// Creates a request; what is left nil stays.
    public init(
        name: String? = nil, description: String? = nil, isPublic: Bool? = nil, metadata: JSONValue? = nil,
        roles: ConversationRolesChange? = nil
    ) {
        self.roles = roles
        self.name = name
        self.description = description
        self.isPublic = isPublic
        self.metadata = metadata
    }
}

/// `PATCH /v1/conversations/{conversationId}/participants/{uid}`
public struct UpdateParticipantRequest: Codable, Sendable, Hashable {
    /// The participant's new role.
    public var role: ParticipantRole
    /// Creates a request.
    public init(role: ParticipantRole) { self.role = role }
}

/// `POST /v1/conversations/{conversationId}/receipts`: marks messages delivered and/or read up to a sequence
/// number. Positions only move forward; a smaller value changes nothing.
public struct ReceiptRequest: Codable, Sendable, Hashable {
    /// Marks every message up to this sequence number delivered.
    public var deliveredSeq: Int64?
    /// Marks every message up to this sequence number read.
    public var readSeq: Int64?
    /// Creates a request.
    public init(deliveredSeq: Int64? = nil, readSeq: Int64? = nil) {
        self.deliveredSeq = deliveredSeq
        self.readSeq = readSeq
    }
}
