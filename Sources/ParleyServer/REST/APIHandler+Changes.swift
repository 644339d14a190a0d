import ParleyAPI
import ParleyAPIServer
import ParleyProtocol
import ParleyStore

/// Conversation changes, receipts, unread counts and presence.
extension APIHandler {
    func updateConversation(_ input: Operations.UpdateConversation.Input) async throws
        -> Operations.UpdateConversation.Output
    {
        let principal = try await currentUser()
        guard case .json(let update) = input.body else { throw DomainError(.badRequest, "Expected JSON.") }
        try InputRules.name(update.name, "name")
        try InputRules.description(update.description)
        try InputRules.metadata(update.metadata)
        let command = Command.UpdateConversation(
            appId: principal.appId, conversationId: input.path.conversationId, actor: principal.uid, update: update,
            now: time.epochMilliseconds()
        )
        return .ok(.init(body: .json(try await conversation(of: .updateConversation(command)))))
    }

    func deleteConversation(_ input: Operations.DeleteConversation.Input) async throws
        -> Operations.DeleteConversation.Output
    {
        let principal = try await currentUser()
        _ = try await conversation(of: .deleteConversation(action(principal, input.path.conversationId)))
        return .noContent(.init())
    }

    func undeleteConversation(_ input: Operations.UndeleteConversation.Input) async throws
        -> Operations.UndeleteConversation.Output
    {
        let principal = try await currentUser()
        return .ok(
            .init(
                body: .json(
                    try await conversation(of: .undeleteConversation(action(principal, input.path.conversationId)))))
        )
    }

    func joinConversation(_ input: Operations.JoinConversation.Input) async throws -> Operations.JoinConversation.Output
    {
        let principal = try await currentUser()
        return .ok(.init(body: .json(try await participant(of: .join(action(principal, input.path.conversationId))))))
    }

    func updateParticipant(_ input: Operations.UpdateParticipant.Input) async throws
        -> Operations.UpdateParticipant.Output
    {
        let principal = try await currentUser()
        guard case .json(let update) = input.body else { throw DomainError(.badRequest, "Expected JSON.") }
        let command = Command.UpdateParticipant(
            appId: principal.appId, conversationId: input.path.conversationId, actor: principal.uid,
            uid: input.path.uid, role: update.role, now: time.epochMilliseconds()
        )
        return .ok(.init(body: .json(try await participant(of: .updateParticipant(command)))))
    }

    func removeParticipant(_ input: Operations.RemoveParticipant.Input) async throws
        -> Operations.RemoveParticipant.Output
    {
        let principal = try await currentUser()
        let command = Command.RemoveParticipant(
            appId: principal.appId, conversationId: input.path.conversationId, actor: principal.uid,
            uid: input.path.uid, now: time.epochMilliseconds()
        )
        _ = try await writer.submit(.removeParticipant(command))
        return .noContent(.init())
    }

    func markReceipts(_ input: Operations.MarkReceipts.Input) async throws -> Operations.MarkReceipts.Output {
        let principal = try await currentUser()
        guard case .json(let request) = input.body else { throw DomainError(.badRequest, "Expected JSON.") }
        try InputRules.position(request.deliveredSeq, "deliveredSeq")
        try InputRules.position(request.readSeq, "readSeq")
        guard request.deliveredSeq != nil || request.readSeq != nil else {
            throw DomainError(.badRequest, "Give deliveredSeq, readSeq or both.")
        }
        let command = Command.MarkReceipt(
            appId: principal.appId, conversationId: input.path.conversationId, uid: principal.uid,
            deliveredSeq: request.deliveredSeq, readSeq: request.readSeq, now: time.epochMilliseconds()
        )
        return .ok(.init(body: .json(try await participant(of: .markReceipt(command)))))
    }

    func getUnread(_ input: Operations.GetUnread.Input) async throws -> Operations.GetUnread.Output {
        let principal = try await currentUser()
        return .ok(
            .init(body: .json(try await store.unread(appId: principal.appId, uid: principal.uid, conversationIds: nil)))
        )
    }

    func getPresence(_ input: Operations.GetPresence.Input) async throws -> Operations.GetPresence.Output {
        let caller = try await authenticator.caller(credentials)
        let user = try await existingUser(appId: caller.appId, uid: input.path.uid)
        // A user who blocked another sees them offline, as their presence events stopped reaching them.
        if case .user(let principal) = caller,
            try await store.blocks(appId: caller.appId, uid: principal.uid).contains(where: { $0.uid == user.uid })
        {
            return .ok(.init(body: .json(Presence(uid: user.uid, online: false))))
        }
        return .ok(.init(body: .json(await presence.presence(appId: caller.appId, uid: user.uid))))
    }

    // MARK: Helpers

    private func action(_ principal: UserPrincipal, _ conversationId: String) -> Command.ConversationAction {
        Command.ConversationAction(
            appId: principal.appId, conversationId: conversationId, actor: principal.uid, now: time.epochMilliseconds()
        )
    }

    private func conversation(of command: Command) async throws -> Conversation {
        guard case .conversation(let conversation, _) = try await writer.submit(command).outcome else {
            throw DomainError(.internalError, "Unexpected outcome.")
        }
        return conversation
    }

    private func participant(of command: Command) async throws -> Participant {
        guard case .participant(let participant) = try await writer.submit(command).outcome else {
            throw DomainError(.internalError, "Unexpected outcome.")
        }
        return participant
    }
}
