// Request and response bodies of the REST API (`/v1`). The OpenAPI document
// (Sources/ParleyAPI/openapi.yaml) describes each one under `components/schemas` with the same name.

/// The body of every REST error response.
public struct ErrorResponse: Codable, Sendable, Hashable {
    public struct Detail: Codable, Sendable, Hashable {
        public var code: ErrorCode
        public var message: String
        /// With `ERR_RATE_LIMITED`: milliseconds until the request may succeed (also in `Retry-After`, in seconds).
        public var retryAfterMs: Int64?
        public init(code: ErrorCode, message: String, retryAfterMs: Int64? = nil) {
            self.code = code
            self.message = message
            self.retryAfterMs = retryAfterMs
        }
    }

    public var error: Detail
    public init(code: ErrorCode, message: String, retryAfterMs: Int64? = nil) {
        self.error = Detail(code: code, message: message, retryAfterMs: retryAfterMs)
    }
}

/// `GET /health`
public struct HealthStatus: Codable, Sendable, Hashable {
    public var status: String
    public init(status: String) { self.status = status }
}

/// Public facts about an app: `GET /v1/apps/{appId}`.
public struct AppInfo: Codable, Sendable, Hashable {
    public var id: String
    public var name: String
    public init(id: String, name: String) {
        self.id = id
        self.name = name
    }
}

/// `POST /v1/login`: log in with the app's development Auth Key.
public struct LoginRequest: Codable, Sendable, Hashable {
    public var appId: String
    public var uid: String
    public var authKey: String
    public init(appId: String, uid: String, authKey: String) {
        self.appId = appId
        self.uid = uid
        self.authKey = authKey
    }
}

/// A logged-in session: the user and a new auth token.
public struct LoginResponse: Codable, Sendable, Hashable {
    public var user: User
    public var authToken: String
    public init(user: User, authToken: String) {
        self.user = user
        self.authToken = authToken
    }
}

/// `POST /v1/users`
public struct CreateUserRequest: Codable, Sendable, Hashable {
    public var uid: String
    public var name: String?
    public var avatarURL: String?
    public var metadata: JSONValue?
    public init(uid: String, name: String? = nil, avatarURL: String? = nil, metadata: JSONValue? = nil) {
        self.uid = uid
        self.name = name
        self.avatarURL = avatarURL
        self.metadata = metadata
    }
}

/// `PATCH /v1/users/{uid}`: fields that are present replace the stored ones.
public struct UpdateUserRequest: Codable, Sendable, Hashable {
    public var name: String?
    public var avatarURL: String?
    public var metadata: JSONValue?
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
    public init(ttlSeconds: Int64? = nil) { self.ttlSeconds = ttlSeconds }
}

/// What the server keeps about an auth token (never the token itself).
public struct AuthTokenInfo: Codable, Sendable, Hashable {
    public var id: String
    public var uid: String
    public var createdAt: Int64
    public var expiresAt: Int64?
    public init(id: String, uid: String, createdAt: Int64, expiresAt: Int64? = nil) {
        self.id = id
        self.uid = uid
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// A newly issued auth token. `authToken` is shown once; the server stores only its hash.
public struct IssuedAuthToken: Codable, Sendable, Hashable {
    public var authToken: String
    public var token: AuthTokenInfo
    public init(authToken: String, token: AuthTokenInfo) {
        self.authToken = authToken
        self.token = token
    }
}

/// `GET /v1/users/{uid}/auth-tokens`
public struct AuthTokenList: Codable, Sendable, Hashable {
    public var tokens: [AuthTokenInfo]
    public init(tokens: [AuthTokenInfo]) { self.tokens = tokens }
}

/// `POST /v1/conversations`
public struct CreateConversationRequest: Codable, Sendable, Hashable {
    public var type: ConversationType
    /// The other participants (the caller is added as owner). Exactly one for `direct`.
    public var participants: [String]
    public var name: String?
    public var description: String?
    public var isPublic: Bool?
    public var metadata: JSONValue?
    /// Permissions that differ from ``ConversationRoles/defaults`` (groups only).
    public var roles: ConversationRolesChange?

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
    public var conversations: [Conversation]
    /// Pass as `cursor` to get the next page; nil on the last page.
    public var nextCursor: String?
    public init(conversations: [Conversation], nextCursor: String? = nil) {
        self.conversations = conversations
        self.nextCursor = nextCursor
    }
}

/// `POST /v1/conversations/{conversationId}/participants`
public struct AddParticipantsRequest: Codable, Sendable, Hashable {
    public struct Entry: Codable, Sendable, Hashable {
        public var uid: String
        /// Defaults to `member`.
        public var role: ParticipantRole?
        public init(uid: String, role: ParticipantRole? = nil) {
            self.uid = uid
            self.role = role
        }
    }

    public var participants: [Entry]
    public init(participants: [Entry]) { self.participants = participants }
}

/// `GET /v1/conversations/{conversationId}/participants`
public struct ParticipantList: Codable, Sendable, Hashable {
    public var participants: [Participant]
    public init(participants: [Participant]) { self.participants = participants }
}

/// `POST /v1/conversations/{conversationId}/messages`
public struct SendMessageRequest: Codable, Sendable, Hashable {
    public var clientMessageId: String?
    public var parts: [MessagePart]
    public var metadata: JSONValue?
    public var alert: String?
    /// The id of the message this one replies to: a message of the same conversation that is not itself a reply.
    public var replyTo: String?
    /// uids to mention (at most 50); those who are not participants are left out.
    public var mentions: [String]?
    public init(
        clientMessageId: String? = nil, parts: [MessagePart], metadata: JSONValue? = nil, alert: String? = nil,
        replyTo: String? = nil, mentions: [String]? = nil
    ) {
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
    public var parts: [MessagePart]
    public var metadata: JSONValue?
    public var mentions: [String]?
    public init(parts: [MessagePart], metadata: JSONValue? = nil, mentions: [String]? = nil) {
        self.parts = parts
        self.metadata = metadata
        self.mentions = mentions
    }
}

/// The reactions on one message as the caller sees them: the answer of adding or removing a reaction.
public struct ReactionList: Codable, Sendable, Hashable {
    public var messageId: String
    /// By key, in the order each key was first given.
    public var reactions: [ReactionSummary]
    public init(messageId: String, reactions: [ReactionSummary]) {
        self.messageId = messageId
        self.reactions = reactions
    }
}

/// A page of history (or of a thread), in ascending sequence order; or a page of the caller's unread mentions,
/// newest first.
public struct MessagePage: Codable, Sendable, Hashable {
    public var messages: [Message]
    /// Pass as `cursor` to get the next older page; nil when there is nothing older.
    public var nextCursor: String?
    /// The conversation's `lastSeq` when the page was read: the page includes every change up to it (history and
    /// threads only). A client that applies live events to the page applies those with a higher `seq`.
    public var lastSeq: Int64?
    /// The thread's first message (threads only).
    public var parent: Message?
    public init(messages: [Message], nextCursor: String? = nil, lastSeq: Int64? = nil, parent: Message? = nil) {
        self.messages = messages
        self.nextCursor = nextCursor
        self.lastSeq = lastSeq
        self.parent = parent
    }
}

/// `PATCH /v1/conversations/{conversationId}`: fields that are present replace the stored ones.
public struct UpdateConversationRequest: Codable, Sendable, Hashable {
    public var name: String?
    public var description: String?
    public var isPublic: Bool?
    public var metadata: JSONValue?
    /// Changes of what each role may do (the owner only).
    public var roles: ConversationRolesChange?
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
    public var role: ParticipantRole
    public init(role: ParticipantRole) { self.role = role }
}

/// `POST /v1/conversations/{conversationId}/receipts`: marks messages delivered and/or read up to a sequence
/// number. Positions only move forward; a smaller value changes nothing.
public struct ReceiptRequest: Codable, Sendable, Hashable {
    public var deliveredSeq: Int64?
    public var readSeq: Int64?
    public init(deliveredSeq: Int64? = nil, readSeq: Int64? = nil) {
        self.deliveredSeq = deliveredSeq
        self.readSeq = readSeq
    }
}
