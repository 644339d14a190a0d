/// What a participant may do in a conversation. See docs/PROTOCOL.md for the permission table.
public enum ParticipantRole: String, Codable, Sendable, Hashable, CaseIterable {
    case owner
    case admin
    case member
}

/// A user's membership of a conversation.
public struct Participant: Codable, Sendable, Hashable {
    public var uid: String
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
