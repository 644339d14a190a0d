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
    /// What each role may do (``ConversationRoles/defaults`` unless the group's owner changed it).
    public var roles: ConversationRoles
    /// The participants: in the payload of `conversation.create` and the answer of the request that created the
    /// conversation; nil elsewhere (list them with `GET /v1/conversations/{id}/participants`).
    public var participants: [Participant]?

    public init(
        id: String, type: ConversationType, name: String? = nil, description: String? = nil, isPublic: Bool = false,
        metadata: JSONValue? = nil, createdBy: String, createdAt: Int64, updatedAt: Int64, lastSeq: Int64,
        participantCount: Int, deletedAt: Int64? = nil, roles: ConversationRoles = .defaults,
        participants: [Participant]? = nil
    ) {
        self.deletedAt = deletedAt
        self.roles = roles
        self.participants = participants
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

    enum CodingKeys: String, CodingKey {
        case id, type, name, description, isPublic, metadata, createdBy, createdAt, updatedAt, lastSeq
        case participantCount, deletedAt, roles, participants
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        type = try container.decode(ConversationType.self, forKey: .type)
        name = try container.decodeIfPresent(String.self, forKey: .name)
        description = try container.decodeIfPresent(String.self, forKey: .description)
        isPublic = try container.decode(Bool.self, forKey: .isPublic)
        metadata = try container.decodeIfPresent(JSONValue.self, forKey: .metadata)
        createdBy = try container.decode(String.self, forKey: .createdBy)
        createdAt = try container.decode(Int64.self, forKey: .createdAt)
        updatedAt = try container.decode(Int64.self, forKey: .updatedAt)
        lastSeq = try container.decode(Int64.self, forKey: .lastSeq)
        participantCount = try container.decode(Int.self, forKey: .participantCount)
        deletedAt = try container.decodeIfPresent(Int64.self, forKey: .deletedAt)
        // Events stored before roles existed carry none: they had the defaults.
        roles = try container.decodeIfPresent(ConversationRoles.self, forKey: .roles) ?? .defaults
        participants = try container.decodeIfPresent([Participant].self, forKey: .participants)
    }
}

/// What the participants of one role may do in a conversation. The rules that no role setting changes (who may
/// change the group's details, roles or delete it; that nobody removes the owner) are in docs/PROTOCOL.md.
public struct RolePermissions: Codable, Sendable, Hashable {
    /// Send messages (and edit their own).
    public var canSend: Bool
    /// Add participants to a group.
    public var canAddParticipants: Bool
    /// Remove members from a group (the owner also removes admins).
    public var canRemoveParticipants: Bool
    /// Edit messages other participants sent.
    public var canEditOthersMessages: Bool
    /// Delete messages other participants sent.
    public var canDeleteOthersMessages: Bool

    public init(
        canSend: Bool, canAddParticipants: Bool, canRemoveParticipants: Bool, canEditOthersMessages: Bool,
        canDeleteOthersMessages: Bool
    ) {
        self.canSend = canSend
        self.canAddParticipants = canAddParticipants
        self.canRemoveParticipants = canRemoveParticipants
        self.canEditOthersMessages = canEditOthersMessages
        self.canDeleteOthersMessages = canDeleteOthersMessages
    }
}

/// What each role may do in a conversation: the catalog's `conversation.payload.roles`.
public struct ConversationRoles: Codable, Sendable, Hashable {
    public var owner: RolePermissions
    public var admin: RolePermissions
    public var member: RolePermissions

    public init(owner: RolePermissions, admin: RolePermissions, member: RolePermissions) {
        self.owner = owner
        self.admin = admin
        self.member = member
    }

    /// Every conversation starts with these: everyone sends; the owner and admins add and remove participants and
    /// delete others' messages; nobody edits others' messages.
    public static let defaults = ConversationRoles(
        owner: RolePermissions(
            canSend: true, canAddParticipants: true, canRemoveParticipants: true, canEditOthersMessages: false,
            canDeleteOthersMessages: true
        ),
        admin: RolePermissions(
            canSend: true, canAddParticipants: true, canRemoveParticipants: true, canEditOthersMessages: false,
            canDeleteOthersMessages: true
        ),
        member: RolePermissions(
            canSend: true, canAddParticipants: false, canRemoveParticipants: false, canEditOthersMessages: false,
            canDeleteOthersMessages: false
        )
    )

    /// The permissions of `role`.
    public subscript(role: ParticipantRole) -> RolePermissions {
        get {
            switch role {
            case .owner: owner
            case .admin: admin
            case .member: member
            }
        }
        set {
            switch role {
            case .owner: owner = newValue
            case .admin: admin = newValue
            case .member: member = newValue
            }
        }
    }

    /// These roles with `change` applied: what it names replaces, what it leaves out stays.
    public func applying(_ change: ConversationRolesChange) -> ConversationRoles {
        var roles = self
        for role in ParticipantRole.allCases {
            if let permissions = change[role] { roles[role] = roles[role].applying(permissions) }
        }
        return roles
    }
}

extension RolePermissions {
    /// These permissions with `change` applied.
    public func applying(_ change: RolePermissionsChange) -> RolePermissions {
        RolePermissions(
            canSend: change.canSend ?? canSend,
            canAddParticipants: change.canAddParticipants ?? canAddParticipants,
            canRemoveParticipants: change.canRemoveParticipants ?? canRemoveParticipants,
            canEditOthersMessages: change.canEditOthersMessages ?? canEditOthersMessages,
            canDeleteOthersMessages: change.canDeleteOthersMessages ?? canDeleteOthersMessages
        )
    }
}

/// A change of one role's permissions in a create or update request: what is present replaces, what is absent stays
/// (at creation: stays the default).
public struct RolePermissionsChange: Codable, Sendable, Hashable {
    public var canSend: Bool?
    public var canAddParticipants: Bool?
    public var canRemoveParticipants: Bool?
    public var canEditOthersMessages: Bool?
    public var canDeleteOthersMessages: Bool?

    public init(
        canSend: Bool? = nil, canAddParticipants: Bool? = nil, canRemoveParticipants: Bool? = nil,
        canEditOthersMessages: Bool? = nil, canDeleteOthersMessages: Bool? = nil
    ) {
        self.canSend = canSend
        self.canAddParticipants = canAddParticipants
        self.canRemoveParticipants = canRemoveParticipants
        self.canEditOthersMessages = canEditOthersMessages
        self.canDeleteOthersMessages = canDeleteOthersMessages
    }
}

/// A change of roles in a create or update request; a role left out keeps its permissions.
public struct ConversationRolesChange: Codable, Sendable, Hashable {
    public var owner: RolePermissionsChange?
    public var admin: RolePermissionsChange?
    public var member: RolePermissionsChange?

    public init(
        owner: RolePermissionsChange? = nil, admin: RolePermissionsChange? = nil, member: RolePermissionsChange? = nil
    ) {
        self.owner = owner
        self.admin = admin
        self.member = member
    }

    public subscript(role: ParticipantRole) -> RolePermissionsChange? {
        switch role {
        case .owner: owner
        case .admin: admin
        case .member: member
        }
    }
}
