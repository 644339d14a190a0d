/// Whether a conversation is between exactly two users or a group.
public enum ConversationType: String, Codable, Sendable, Hashable, CaseIterable {
    /// One-to-one: exactly two participants, created once per pair of users.
    case direct
    /// A group with any number of participants and roles.
    case group
}

/// A conversation: the unit of membership, ordering and history.
///
/// Every durable event of a conversation carries the next value of its sequence number (`lastSeq`):
/// strictly increasing by one, without gaps, so a client can tell when it missed something.
public struct Conversation: Codable, Sendable, Hashable {
    /// Server-assigned identifier.
    public var id: String
    public var type: ConversationType
    /// Group name (nil for direct conversations).
    public var name: String?
    public var description: String?
    /// Whether anyone in the app may join (groups only).
    public var isPublic: Bool
    /// Custom data the app attaches to the conversation.
    public var metadata: JSONValue?
    /// uid of the creator.
    public var createdBy: String
    public var createdAt: Int64
    public var updatedAt: Int64
    /// The sequence number of the conversation's latest durable event (0 when there is none).
    public var lastSeq: Int64
    /// Number of participants.
    public var participantCount: Int
    /// When the conversation was deleted (epoch ms); nil while it is not. A deleted conversation keeps its history
    /// and can be restored by its owner.
    public var deletedAt: Int64?

    public init(
        id: String, type: ConversationType, name: String? = nil, description: String? = nil, isPublic: Bool = false,
        metadata: JSONValue? = nil, createdBy: String, createdAt: Int64, updatedAt: Int64, lastSeq: Int64,
        participantCount: Int, deletedAt: Int64? = nil
    ) {
        self.deletedAt = deletedAt
        self.id = id
        self.type = type
        self.name = name
        self.description = description
        self.isPublic = isPublic
        self.metadata = metadata
        self.createdBy = createdBy
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.lastSeq = lastSeq
        self.participantCount = participantCount
    }
}
