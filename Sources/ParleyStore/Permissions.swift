import ParleyProtocol

/// The rules of who may do what in a conversation, shared by every store so that they agree (docs/PROTOCOL.md,
/// "Who may do what").
///
/// Two kinds of rule:
/// - what a conversation's ``ConversationRoles`` say, per role: send (and edit one's own messages), add
///   participants, remove members, edit others' messages, delete others' messages;
/// - what no role setting changes: only the owner and admins change a group's details; only the owner changes roles
///   (participants' and the conversation's), deletes or restores the group, and removes an admin; nobody removes the
///   owner or makes another owner; an admin is made only by the owner or an admin; anyone may leave but the owner;
///   anyone deletes their own messages and reacts to messages.
///
/// Direct conversations keep ``ConversationRoles/defaults`` and their two participants: nobody adds, removes,
/// updates or deletes there.
extension ParticipantRole {
    /// Whether this role may change a group's name, description, visibility and metadata.
    public var canUpdateConversation: Bool { self == .owner || self == .admin }

    /// Whether this role may delete or restore a group.
    public var canDeleteConversation: Bool { self == .owner }

    /// Whether this role may change participants' roles and the conversation's ``ConversationRoles``.
    public var canChangeRoles: Bool { self == .owner }

    /// Whether this role may give `role` to a new participant (when it may add participants at all): nobody makes
    /// another owner, and only the owner and admins make admins.
    public func canGrant(_ role: ParticipantRole) -> Bool {
        switch (self, role) {
        case (_, .owner): return false
        case (.member, .admin): return false
        default: return true
        }
    }
}

/// The checks stores run before they change a conversation; each throws the documented ``DomainError``.
public enum ConversationRules {
    /// `actor` (with `role`) sends a message.
    public static func requireSend(_ role: ParticipantRole, roles: ConversationRoles) throws {
        guard roles[role].canSend else {
            throw DomainError(.forbidden, "In this conversation a \(role.rawValue) may not send messages.")
        }
    }

    /// `role` adds participants.
    public static func requireAdd(_ role: ParticipantRole, roles: ConversationRoles) throws {
        guard roles[role].canAddParticipants else {
            throw DomainError(.forbidden, "In this conversation a \(role.rawValue) may not add participants.")
        }
    }

    /// `role` gives `newRole` to a participant it adds.
    public static func requireGrant(_ role: ParticipantRole, _ newRole: ParticipantRole) throws {
        guard role.canGrant(newRole) else {
            throw DomainError(.forbidden, "A \(role.rawValue) cannot make a participant \(newRole.rawValue).")
        }
    }

    /// `role` removes a participant who has `target` (not themself: leaving is always allowed but for the owner).
    public static func requireRemove(_ role: ParticipantRole, _ target: ParticipantRole, roles: ConversationRoles)
        throws
    {
        let allowed: Bool
        switch target {
        case .owner: allowed = false
        case .admin: allowed = role == .owner && roles.owner.canRemoveParticipants
        case .member: allowed = roles[role].canRemoveParticipants
        }
        guard allowed else {
            throw DomainError(.forbidden, "A \(role.rawValue) cannot remove a \(target.rawValue) here.")
        }
    }

    /// `role` changes the conversation's roles (the owner only, groups only).
    public static func requireChangeRoles(_ role: ParticipantRole, type: ConversationType) throws {
        guard type == .group else { throw DomainError(.forbidden, "A direct conversation keeps the default roles.") }
        guard role.canChangeRoles else {
            throw DomainError(.forbidden, "Only the owner can change what each role may do.")
        }
    }
}

extension ConversationRoles {
    /// The JSON a store keeps for these roles; nil for ``defaults`` (no column value needed).
    public var storedJSON: String? {
        guard self != .defaults else { return nil }
        // Encoding plain booleans cannot fail.
        return (try? WireCoding.encode(self)).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Roles as stored: ``defaults`` for none.
    public init(storedJSON: String?) throws {
        guard let storedJSON else {
            self = .defaults
            return
        }
        self = try WireCoding.decode(ConversationRoles.self, from: Array(storedJSON.utf8))
    }
}

extension ConversationRules {
    /// The roles a new conversation starts with: the defaults with `change` applied (groups only).
    public static func initialRoles(type: ConversationType, change: ConversationRolesChange?) throws
        -> ConversationRoles
    {
        guard let change else { return .defaults }
        guard type == .group else {
            throw DomainError(.badRequest, "A direct conversation keeps the default roles.")
        }
        return ConversationRoles.defaults.applying(change)
    }
}
