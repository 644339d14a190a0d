/// A user of an app, identified by a `uid` the app chooses.
///
/// Timestamps on the wire are Unix epoch milliseconds.
public struct User: Codable, Sendable, Hashable {
    /// The app's identifier for this user: 1-100 letters, digits, `_`, `-`, `.` or `@`.
    public var uid: String
    /// Display name; defaults to the uid.
    public var name: String
    /// URL of the user's avatar image.
    public var avatarURL: String?
    /// Custom data the app attaches to the user.
    public var metadata: JSONValue?
    /// When the user was created (epoch ms).
    public var createdAt: Int64
    /// When the profile last changed (epoch ms).
    public var updatedAt: Int64
    /// When the app's operator deactivated the user (epoch ms): they cannot log in until reactivated. Absent while
    /// the user is active.
    public var deactivatedAt: Int64?

    /// Creates a user from its fields.
    public init(
        uid: String, name: String, avatarURL: String? = nil, metadata: JSONValue? = nil, createdAt: Int64,
        updatedAt: Int64, deactivatedAt: Int64? = nil
    ) {
        self.deactivatedAt = deactivatedAt
        self.uid = uid
        self.name = name
        self.avatarURL = avatarURL
        self.metadata = metadata
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    /// Whether `uid` is a valid user identifier.
    public static func isValidUID(_ uid: String) -> Bool {
        guard (1...100).contains(uid.utf8.count) else { return false }
        return uid.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "."),
                UInt8(ascii: "@"):
                return true
            default:
                return false
            }
        }
    }
}

/// A conversation a user is in, with their membership: part of an export (`GET /v1/users/{uid}/export`).
public struct UserMembership: Codable, Sendable, Hashable {
    /// The conversation (deleted ones included, with `deletedAt`).
    public var conversation: Conversation
    /// The user's participation: role, when they joined, their read and delivered positions, a mute.
    public var participant: Participant

    /// Creates a membership.
    public init(conversation: Conversation, participant: Participant) {
        self.conversation = conversation
        self.participant = participant
    }
}

/// A page of one user's data (`GET /v1/users/{uid}/export`): their profile on every page, the conversations they are
/// in on the first, and the messages they sent (docs/PROTOCOL.md, "Exporting a user").
public struct UserExportPage: Codable, Sendable, Hashable {
    /// The user's profile.
    public var user: User
    /// The conversations the user is in (the first page only; nil on the others).
    public var memberships: [UserMembership]?
    /// Messages the user sent, by conversation then sequence number, each in its latest state (deleted ones as
    /// tombstones); their `file` parts name the files to download.
    public var messages: [Message]
    /// Pass as `cursor` for the next page; nil when there is none. A page may hold fewer messages than asked, even
    /// none, and still have a next one: each reads a bounded part of the user's conversations.
    public var nextCursor: String?

    /// Creates a page.
    public init(user: User, memberships: [UserMembership]? = nil, messages: [Message], nextCursor: String? = nil) {
        self.user = user
        self.memberships = memberships
        self.messages = messages
        self.nextCursor = nextCursor
    }
}
