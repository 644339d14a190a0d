import ParleyProtocol

/// The rules of who may do what in a conversation, shared by every store so that they agree.
///
/// | action | owner | admin | member |
/// | --- | --- | --- | --- |
/// | read history, send, list participants, type, mark delivered/read | yes | yes | yes |
/// | add participants (groups only) | yes | yes | no |
/// | update the group's name, description, visibility, metadata | yes | yes | no |
/// | remove a member | yes | yes | no |
/// | remove an admin | yes | no | no |
/// | change a participant's role (member <-> admin) | yes | no | no |
/// | delete / undelete the group | yes | no | no |
/// | leave | no (delete the group instead) | yes | yes |
///
/// Direct conversations have no roles that matter: their two participants can read, send, type and mark, and
/// nobody can add, remove, update or delete.
extension ParticipantRole {
    /// Whether this role may add participants to a group.
    public var canAddParticipants: Bool {
        switch self {
        case .owner, .admin: return true
        case .member: return false
        }
    }

    /// Whether this role may change a group's details.
    public var canUpdateConversation: Bool { canAddParticipants }

    /// Whether this role may delete or restore a group.
    public var canDeleteConversation: Bool { self == .owner }

    /// Whether this role may change other participants' roles.
    public var canChangeRoles: Bool { self == .owner }

    /// Whether this role may remove a participant who has `target`.
    public func canRemove(_ target: ParticipantRole) -> Bool {
        switch (self, target) {
        case (_, .owner): return false
        case (.owner, _): return true
        case (.admin, .member): return true
        case (.admin, .admin), (.member, _): return false
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
