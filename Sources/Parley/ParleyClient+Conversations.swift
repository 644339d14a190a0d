import ParleyAPI
import ParleyAPIClient

extension ParleyClient {
    /// The direct conversation with `uid`, created on first use.
    public func directConversation(with uid: String) async throws -> Conversation {
        _ = try requireSession()
        let conversation = try await create(CreateConversationRequest(type: .direct, participants: [uid]))
        state.withLockedValue { $0.directConversations[uid] = conversation.id }
        return conversation
    }

    /// Creates a group with you as owner. `roles` changes what each role may do (`ConversationRoles.defaults`
    /// otherwise): a read-only announcement channel, say, with `.init(member: .init(canSend: false))`. The answer
    /// lists the participants.
    public func createGroup(
        name: String, participants: [String] = [], description: String? = nil, isPublic: Bool = false,
        metadata: JSONValue? = nil, roles: ConversationRolesChange? = nil
    ) async throws -> Conversation {
        _ = try requireSession()
        return try await create(
            CreateConversationRequest(
                type: .group, participants: participants, name: name, description: description, isPublic: isPublic,
                metadata: metadata, roles: roles
            )
        )
    }

    private func create(_ body: CreateConversationRequest) async throws -> Conversation {
        try await rest.call { api in
            switch try await api.createConversation(body: .json(body)) {
            case .created(let created): return try created.body.json
            case .ok(let existing): return try existing.body.json
            default: throw ParleyError(.unexpectedResponse, "Unexpected answer to createConversation.")
            }
        }
    }

    /// A page of your conversations, most recently active first.
    public func conversations(limit: Int = 50, cursor: String? = nil) async throws -> ConversationList {
        _ = try requireSession()
        return try await rest.call {
            try await $0.listConversations(query: .init(limit: limit, cursor: cursor)).ok.body.json
        }
    }

    /// A conversation you participate in.
    public func conversation(id: String) async throws -> Conversation {
        _ = try requireSession()
        return try await rest.call { try await $0.getConversation(path: .init(conversationId: id)).ok.body.json }
    }

    /// Adds users to a group (owner or admin). Returns the participants after the change.
    @discardableResult
    public func addParticipants(_ uids: [String], to conversationId: String, role: ParticipantRole = .member)
        async throws -> [Participant]
    {
        _ = try requireSession()
        let body = AddParticipantsRequest(participants: uids.map { .init(uid: $0, role: role) })
        return try await rest.call {
            try await $0.addParticipants(path: .init(conversationId: conversationId), body: .json(body)).ok.body.json
        }.participants
    }

    /// The participants of a conversation you are in.
    public func participants(of conversationId: String) async throws -> [Participant] {
        _ = try requireSession()
        return try await rest.call {
            try await $0.listParticipants(path: .init(conversationId: conversationId)).ok.body.json
        }.participants
    }

    /// A user of the app.
    public func user(uid: String) async throws -> User {
        _ = try requireSession()
        return try await rest.call { try await $0.getUser(path: .init(uid: uid)).ok.body.json }
    }
}
