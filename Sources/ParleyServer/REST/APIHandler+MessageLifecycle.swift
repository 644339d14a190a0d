import ParleyAPI
import ParleyAPIServer
import ParleyProtocol
import ParleyStore

extension APIHandler {
    // MARK: One message

    /// For a participant, or the app's server (REST API key: any conversation of the app, `reacted` false).
    func getMessage(_ input: Operations.GetMessage.Input) async throws -> Operations.GetMessage.Output {
        let caller = try await authenticator.caller(credentials)
        try InputRules.identifier(input.path.messageId, "messageId")
        _ = try await visibleConversation(caller, conversationId: input.path.conversationId)
        let viewer: String
        if case .user(let principal) = caller { viewer = principal.uid } else { viewer = "" }
        guard
            let message = try await store.message(
                appId: caller.appId, conversationId: input.path.conversationId, messageId: input.path.messageId,
                viewer: viewer
            )
        else { throw MessageLifecycle.notFound(input.path.messageId) }
        return .ok(.init(body: .json(message)))
    }

    func editMessage(_ input: Operations.EditMessage.Input) async throws -> Operations.EditMessage.Output {
        let principal = try await currentUser()
        guard case .json(let request) = input.body else { throw DomainError(.badRequest, "Expected JSON.") }
        try limits.sends?.take(appId: principal.appId, uid: principal.uid)
        try MessageRules.validateEdit(
            messageId: input.path.messageId, parts: request.parts, metadata: request.metadata,
            mentions: request.mentions, limits: configuration.messageLimits
        )
        let command = Command.EditMessage(
            appId: principal.appId, conversationId: input.path.conversationId, actor: principal.uid,
            messageId: input.path.messageId, parts: request.parts, metadata: request.metadata,
            mentions: request.mentions, limits: configuration.messageLimits, now: time.epochMilliseconds()
        )
        return .ok(.init(body: .json(try await message(of: .editMessage(command)))))
    }

    /// A user deletes a message where their role lets them; the app's server (REST API key) any message of its app.
    func deleteMessage(_ input: Operations.DeleteMessage.Input) async throws -> Operations.DeleteMessage.Output {
        let caller = try await authenticator.caller(credentials)
        let actor = try messageActor(caller)
        try InputRules.identifier(input.path.conversationId, "conversationId")
        try InputRules.identifier(input.path.messageId, "messageId")
        let command = Command.MessageAction(
            appId: caller.appId, conversationId: input.path.conversationId, actor: actor,
            messageId: input.path.messageId, now: time.epochMilliseconds()
        )
        return .ok(.init(body: .json(try await message(of: .deleteMessage(command)))))
    }

    /// Who changes a message: a user (whose message budget the change takes from), or nil for the app's server.
    private func messageActor(_ caller: Caller) throws -> String? {
        guard case .user(let principal) = caller else { return nil }
        try limits.sends?.take(appId: principal.appId, uid: principal.uid)
        return principal.uid
    }

    /// The message a command left.
    private func message(of command: Command) async throws -> Message {
        guard case .message(let message, _) = try await writer.submit(command).outcome else {
            throw DomainError(.internalError, "Unexpected outcome of a message command.")
        }
        return message
    }

    // MARK: Threads

    func listReplies(_ input: Operations.ListReplies.Input) async throws -> Operations.ListReplies.Output {
        let page = try await history(
            .user(try await currentUser()), conversationId: input.path.conversationId, thread: input.path.messageId,
            limit: input.query.limit, cursor: input.query.cursor
        )
        return .ok(.init(body: .json(page)))
    }

    // MARK: Reactions

    func addReaction(_ input: Operations.AddReaction.Input) async throws -> Operations.AddReaction.Output {
        let principal = try await currentUser()
        let reactions = try await react(
            principal, input.path.conversationId, input.path.messageId, input.path.key, add: true
        )
        return .ok(.init(body: .json(reactions)))
    }

    func removeReaction(_ input: Operations.RemoveReaction.Input) async throws -> Operations.RemoveReaction.Output {
        let principal = try await currentUser()
        let reactions = try await react(
            principal, input.path.conversationId, input.path.messageId, input.path.key, add: false
        )
        return .ok(.init(body: .json(reactions)))
    }

    private func react(
        _ principal: UserPrincipal, _ conversationId: String, _ messageId: String, _ key: String, add: Bool
    )
        async throws -> ReactionList
    {
        try limits.sends?.take(appId: principal.appId, uid: principal.uid)
        try MessageRules.validateReaction(messageId: messageId, key: key)
        let command = Command.React(
            appId: principal.appId, conversationId: conversationId, actor: principal.uid, messageId: messageId,
            key: key,
            add: add, now: time.epochMilliseconds()
        )
        guard case .reactions(let reactions, _) = try await writer.submit(.react(command)).outcome else {
            throw DomainError(.internalError, "Unexpected outcome of a reaction.")
        }
        return reactions
    }

    // MARK: Pins

    func pinMessage(_ input: Operations.PinMessage.Input) async throws -> Operations.PinMessage.Output {
        guard let pin = try await setPinned(input.path.conversationId, input.path.messageId, true) else {
            throw DomainError(.internalError, "A pin left no pin.")
        }
        return .ok(.init(body: .json(pin)))
    }

    func unpinMessage(_ input: Operations.UnpinMessage.Input) async throws -> Operations.UnpinMessage.Output {
        _ = try await setPinned(input.path.conversationId, input.path.messageId, false)
        return .noContent(.init())
    }

    /// A user pins or unpins where their role lets them; the app's server (REST API key) in any conversation of its
    /// app. Returns the message's pin after the command.
    private func setPinned(_ conversationId: String, _ messageId: String, _ pinned: Bool) async throws -> MessagePin? {
        let caller = try await authenticator.caller(credentials)
        let actor = try messageActor(caller)
        try InputRules.identifier(conversationId, "conversationId")
        try InputRules.identifier(messageId, "messageId")
        let command = Command.Pin(
            appId: caller.appId, conversationId: conversationId, actor: actor, messageId: messageId, pinned: pinned,
            now: time.epochMilliseconds()
        )
        guard case .pin(let pin, _, _) = try await writer.submit(.pin(command)).outcome else {
            throw DomainError(.internalError, "Unexpected outcome of a pin.")
        }
        return pin
    }

    /// The pinned messages, for whoever may read the conversation's history.
    func listPins(_ input: Operations.ListPins.Input) async throws -> Operations.ListPins.Output {
        let caller = try await authenticator.caller(credentials)
        _ = try await visibleConversation(caller, conversationId: input.path.conversationId)
        let viewer: String
        if case .user(let principal) = caller { viewer = principal.uid } else { viewer = "" }
        let pins = try await store.pinnedMessages(
            appId: caller.appId, conversationId: input.path.conversationId, viewer: viewer
        )
        return .ok(.init(body: .json(MessagePage(messages: pins.messages, lastSeq: pins.lastSeq))))
    }

    // MARK: Mentions

    func listMentions(_ input: Operations.ListMentions.Input) async throws -> Operations.ListMentions.Output {
        let principal = try await currentUser()
        let limit = try Self.pageSize(input.query.limit)
        let after = try input.query.cursor.map(Self.decodeMentionCursor)
        let rows = try await store.unreadMentions(
            appId: principal.appId, uid: principal.uid, after: after, limit: limit
        )
        let next =
            rows.count == limit
            ? rows.last.map { "\($0.position.sentAt).\($0.position.conversationPK).\($0.position.seq)" } : nil
        return .ok(.init(body: .json(MessagePage(messages: rows.map(\.message), nextCursor: next))))
    }

    static func decodeMentionCursor(_ cursor: String) throws -> MentionPosition {
        let parts = cursor.split(separator: ".")
        guard parts.count == 3, let sentAt = Int64(parts[0]), let pk = Int64(parts[1]), let seq = Int64(parts[2]) else {
            throw DomainError(.badRequest, "Invalid cursor.")
        }
        return MentionPosition(sentAt: sentAt, conversationPK: pk, seq: seq)
    }
}
