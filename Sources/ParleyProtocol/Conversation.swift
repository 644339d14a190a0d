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
    /// Direct or group.
    public var type: ConversationType
    /// Group name (nil for direct conversations).
    public var name: String?
    /// Group description.
    public var description: String?
    /// Whether anyone in the app may join (groups only).
    public var isPublic: Bool
    /// Custom data the app attaches to the conversation.
    public var metadata: JSONValue?
    /// uid of the creator.
    public var createdBy: String
    /// When the conversation was created (epoch ms).
    public var createdAt: Int64
    /// When its details last changed (epoch ms).
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

    /// Creates a conversation from its fields.
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

    /// Decodes a conversation; one stored before roles existed gets ``ConversationRoles/defaults``.
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
    /// Pin and unpin messages of a group (in a direct conversation both participants may).
    public var canPinMessages: Bool

    /// Creates one role's permissions.
    public init(
        canSend: Bool, canAddParticipants: Bool, canRemoveParticipants: Bool, canEditOthersMessages: Bool,
        canDeleteOthersMessages: Bool, canPinMessages: Bool
    ) {
        self.canSend = canSend
        self.canAddParticipants = canAddParticipants
        self.canRemoveParticipants = canRemoveParticipants
        self.canEditOthersMessages = canEditOthersMessages
        self.canDeleteOthersMessages = canDeleteOthersMessages
        self.canPinMessages = canPinMessages
    }
}

/// What each role may do in a conversation: the catalog's `conversation.payload.roles`.
public struct ConversationRoles: Codable, Sendable, Hashable {
    /// What the owner may do.
    public var owner: RolePermissions
    /// What admins may do.
    public var admin: RolePermissions
    /// What members may do.
    public var member: RolePermissions

    /// Creates the permissions of every role.
    public init(owner: RolePermissions, admin: RolePermissions, member: RolePermissions) {
        self.owner = owner
        self.admin = admin
        self.member = member
    }

    private enum CodingKeys: String, CodingKey { case owner, admin, member }

    /// Decodes roles; a permission left out (one an older release did not know, as `canPinMessages`) takes its
    /// role's default, so that roles stored or sent before it was added keep their meaning.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = ConversationRoles.defaults
        owner = defaults.owner.applying(try container.decode(RolePermissionsChange.self, forKey: .owner))
        admin = defaults.admin.applying(try container.decode(RolePermissionsChange.self, forKey: .admin))
        member = defaults.member.applying(try container.decode(RolePermissionsChange.self, forKey: .member))
    }

    /// Every conversation starts with these: everyone sends; the owner and admins add and remove participants,
    /// delete others' messages and pin messages; nobody edits others' messages.
    public static let defaults = ConversationRoles(
        owner: RolePermissions(
            canSend: true, canAddParticipants: true, canRemoveParticipants: true, canEditOthersMessages: false,
            canDeleteOthersMessages: true, canPinMessages: true
        ),
        admin: RolePermissions(
            canSend: true, canAddParticipants: true, canRemoveParticipants: true, canEditOthersMessages: false,
            canDeleteOthersMessages: true, canPinMessages: true
        ),
        member: RolePermissions(
            canSend: true, canAddParticipants: false, canRemoveParticipants: false, canEditOthersMessages: false,
            canDeleteOthersMessages: false, canPinMessages: false
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
            canDeleteOthersMessages: change.canDeleteOthersMessages ?? canDeleteOthersMessages,
            canPinMessages: change.canPinMessages ?? canPinMessages
        )
    }
}

/// A change of one role's permissions in a create or update request: what is present replaces, what is absent stays
/// (at creation: stays the default).
public struct RolePermissionsChange: Codable, Sendable, Hashable {
    /// Send messages (and edit their own); absent: unchanged.
    public var canSend: Bool?
    /// Add participants to a group; absent: unchanged.
    public var canAddParticipants: Bool?
    /// Remove members from a group; absent: unchanged.
    public var canRemoveParticipants: Bool?
    /// Edit messages other participants sent; absent: unchanged.
    public var canEditOthersMessages: Bool?
    /// Delete messages other participants sent; absent: unchanged.
    public var canDeleteOthersMessages: Bool?
    /// Pin and unpin messages; absent: unchanged.
    public var canPinMessages: Bool?

    /// Creates a change; what is left nil stays.
    public init(
        canSend: Bool? = nil, canAddParticipants: Bool? = nil, canRemoveParticipants: Bool? = nil,
        canEditOthersMessages: Bool? = nil, canDeleteOthersMessages: Bool? = nil, canPinMessages: Bool? = nil
    ) {
        self.canPinMessages = canPinMessages
        self.canSend = canSend
        self.canAddParticipants = canAddParticipants
        self.canRemoveParticipants = canRemoveParticipants
        self.canEditOthersMessages = canEditOthersMessages
        self.canDeleteOthersMessages = canDeleteOthersMessages
    }
}

/// A change of roles in a create or update request; a role left out keeps its permissions.
public struct ConversationRolesChange: Codable, Sendable, Hashable {
    /// The change of the owner's permissions; nil keeps them.
    public var owner: RolePermissionsChange?
    /// The change of admins' permissions; nil keeps them.
    public var admin: RolePermissionsChange?
    /// The change of members' permissions; nil keeps them.
    public var member: RolePermissionsChange?

    /// Creates a change of roles; a role left nil keeps its permissions.
    public init(
        owner: RolePermissionsChange? = nil, admin: RolePermissionsChange? = nil, member: RolePermissionsChange? = nil
    ) {
        self.owner = owner
        self.admin = admin
        self.member = member
    }

    /// The change of `role`'s permissions, nil when it keeps them.
    public subscript(role: ParticipantRole) -> RolePermissionsChange? {
        switch role {
        case .owner: owner
        case .admin: admin
        case .member: member
        }
    }
}

/// How `GET /v1/me/inbox` orders conversations.
public enum InboxSort: String, Codable, Sendable, Hashable, CaseIterable {
    /// Most recently active first (a message, or a change of the conversation).
    case activity
    /// Conversations with unread messages first, each group most recently active first.
    case unread
}

/// Which of a user's conversations an inbox request lists (every condition given must hold).
public struct InboxFilter: Sendable, Hashable {
    /// Only conversations with unread messages.
    public var unreadOnly: Bool
    /// Only direct conversations, or only groups.
    public var type: ConversationType?
    /// Only conversations with unread messages that mention the user.
    public var mentionsOnly: Bool
    /// The archived conversations instead of the others.
    public var archived: Bool
    /// This conversation alone, archived or not (`archived` is not read): one row of the inbox.
    public var conversationId: String?

    /// Creates a filter; the default lists every conversation that is not archived.
    public init(
        unreadOnly: Bool = false, type: ConversationType? = nil, mentionsOnly: Bool = false, archived: Bool = false,
        conversationId: String? = nil
    ) {
        self.conversationId = conversationId
        self.unreadOnly = unreadOnly
        self.type = type
        self.mentionsOnly = mentionsOnly
        self.archived = archived
    }
}

/// One row of the inbox: a conversation with what an inbox screen shows about it, as the caller sees it.
public struct InboxEntry: Codable, Sendable, Hashable, Identifiable {
    /// The conversation (without `participants`).
    public var conversation: Conversation
    /// The newest message the caller sees (not one of a user they block), in its latest state as events carry it: a
    /// deleted one shows as deleted. Nil when there is none.
    public var lastMessage: Message?
    /// Messages the caller has not read (after `membership.readSeq`, not deleted, not their own).
    public var unread: Int
    /// Messages among them that mention the caller.
    public var unreadMentions: Int
    /// The caller's participation: role, when they joined, read and delivered positions, and whether they are muted.
    public var membership: Participant
    /// The other participant of a direct conversation; nil for a group.
    public var otherMember: User?
    /// Whether the caller archived it and no message came since.
    public var archived: Bool
    /// When the conversation was last active (epoch ms): the order of the inbox.
    public var lastActivityAt: Int64

    /// The conversation's id.
    public var id: String { conversation.id }

    /// Creates an entry.
    public init(
        conversation: Conversation, lastMessage: Message?, unread: Int, unreadMentions: Int, membership: Participant,
        otherMember: User?, archived: Bool, lastActivityAt: Int64
    ) {
        self.conversation = conversation
        self.lastMessage = lastMessage
        self.unread = unread
        self.unreadMentions = unreadMentions
        self.membership = membership
        self.otherMember = otherMember
        self.archived = archived
        self.lastActivityAt = lastActivityAt
    }
}

/// `GET /v1/me/inbox`: a page of the caller's conversations.
public struct InboxPage: Codable, Sendable, Hashable {
    /// The conversations of the page, in the order asked for.
    public var entries: [InboxEntry]
    /// Unread messages over every conversation of the caller (archived ones too), whatever the filters.
    public var totalUnread: Int
    /// Pass as `cursor` for the next page, with the same filters and sort; nil on the last page.
    public var nextCursor: String?

    /// Creates a page.
    public init(entries: [InboxEntry], totalUnread: Int, nextCursor: String? = nil) {
        self.entries = entries
        self.totalUnread = totalUnread
        self.nextCursor = nextCursor
    }
}
