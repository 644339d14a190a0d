/// What a participant may do in a conversation. See docs/PROTOCOL.md for the permission table.
public enum ParticipantRole: String, Codable, Sendable, Hashable, CaseIterable {
    /// The creator of a group: alone changes roles, deletes and restores it; nobody removes or bans the owner.
    case owner
    /// Changes the group's details; adds, removes, mutes and bans members as the roles allow.
    case admin
    /// Reads and takes part as the roles allow (both participants of a direct conversation are members).
    case member
}

/// A user's membership of a conversation.
public struct Participant: Codable, Sendable, Hashable {
    /// The participant's user.
    public var uid: String
    /// What the participant may do.
    public var role: ParticipantRole
    /// When the user joined (epoch ms).
    public var joinedAt: Int64
    /// The highest sequence number this participant marked as delivered.
    public var deliveredSeq: Int64
    /// The highest sequence number this participant marked as read.
    public var readSeq: Int64
    /// True while an owner, an admin or the app's server muted the participant: they read, but cannot send, edit,
    /// react or type. Absent when not muted.
    public var muted: Bool?
    /// When the mute ends (epoch ms); absent for a mute that lasts until it is lifted.
    public var mutedUntil: Int64?

    /// Creates a participant.
    public init(
        uid: String, role: ParticipantRole, joinedAt: Int64, deliveredSeq: Int64 = 0, readSeq: Int64 = 0,
        muted: Bool? = nil, mutedUntil: Int64? = nil
    ) {
        self.uid = uid
        self.role = role
        self.joinedAt = joinedAt
        self.deliveredSeq = deliveredSeq
        self.readSeq = readSeq
        self.muted = muted
        self.mutedUntil = mutedUntil
    }

    /// Whether the participant is muted at `now` (epoch ms).
    public func isMuted(at now: Int64) -> Bool {
        muted == true && (mutedUntil.map { $0 > now } ?? true)
    }
}
