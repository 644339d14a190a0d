import ParleyProtocol

/// The rules of who may do what in a conversation, shared by every store so that they agree.
///
/// | action | owner | admin | member |
/// | --- | --- | --- | --- |
/// | read history, send, list participants | yes | yes | yes |
/// | add participants (groups only) | yes | yes | no |
extension ParticipantRole {
    /// Whether this role may add participants to a group.
    public var canAddParticipants: Bool {
        switch self {
        case .owner, .admin: return true
        case .member: return false
        }
    }

    /// Whether this role may give `role` to a new participant: nobody makes another owner.
    public func canGrant(_ role: ParticipantRole) -> Bool {
        switch (self, role) {
        case (_, .owner): return false
        case (.owner, _), (.admin, _): return true
        case (.member, _): return false
        }
    }
}
