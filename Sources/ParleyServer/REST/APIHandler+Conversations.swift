import ParleyAPI
import ParleyAPIServer
import ParleyProtocol
import ParleyStore

extension APIHandler {
    // MARK: Conversations

    func createConversation(_ input: Operations.CreateConversation.Input) async throws
        -> Operations.CreateConversation.Output
    {
        let principal = try await currentUser()
        guard case .json(let request) = input.body else { throw DomainError(.badRequest, "Expected JSON.") }
        try InputRules.participantCount(request.participants.count)
        for uid in request.participants { try InputRules.uid(uid) }
        try InputRules.name(request.name, "name")
        try InputRules.description(request.description)
        try InputRules.metadata(request.metadata)
        let command = Command.CreateConversation(
            appId: principal.appId, newId: Secrets.randomID(prefix: "c_"), type: request.type, creator: principal.uid,
            participants: request.participants, name: request.name, description: request.description,
            isPublic: request.isPublic ?? false, metadata: request.metadata, roles: request.roles,
            now: time.epochMilliseconds()
        )
        guard
            case .conversation(let conversation, let created) = try await writer.submit(.createConversation(command))
                .outcome
        else { throw DomainError(.internalError, "Unexpected outcome of createConversation.") }
        return created ? .created(.init(body: .json(conversation))) : .ok(.init(body: .json(conversation)))
    }

    func listConversations(_ input: Operations.ListConversations.Input) async throws
        -> Operations.ListConversations.Output
    {
        let principal: UserPrincipal
        switch try await authenticator.caller(credentials) {
        case .server(let appId):
            let list = try await appConversations(appId: appId, limit: input.query.limit, cursor: input.query.cursor)
            return .ok(.init(body: .json(list)))
        case .user(let user): principal = user
        }
        let limit = try Self.pageSize(input.query.limit)
        let after = try input.query.cursor.map(Self.decodeConversationCursor)
        let rows = try await store.conversations(
            appId: principal.appId, uid: principal.uid, query: ConversationQuery(after: after, limit: limit)
        )
        let next = rows.count == limit ? rows.last.map { "\($0.lastActivityAt).\($0.pk)" } : nil
        return .ok(.init(body: .json(ConversationList(conversations: rows.map(\.conversation), nextCursor: next))))
    }

    func getConversation(_ input: Operations.GetConversation.Input) async throws -> Operations.GetConversation.Output {
        let row = try await visibleConversation(
            try await authenticator.caller(credentials), conversationId: input.path.conversationId
        )
        return .ok(.init(body: .json(row.conversation)))
    }

    // MARK: Participants

    func addParticipants(_ input: Operations.AddParticipants.Input) async throws -> Operations.AddParticipants.Output {
        let principal = try await currentUser()
        guard case .json(let request) = input.body else { throw DomainError(.badRequest, "Expected JSON.") }
        guard !request.participants.isEmpty else { throw DomainError(.badRequest, "Name at least one participant.") }
        try InputRules.participantCount(request.participants.count)
        for entry in request.participants { try InputRules.uid(entry.uid) }
        let command = Command.AddParticipants(
            appId: principal.appId, conversationId: input.path.conversationId, actor: principal.uid,
            entries: request.participants, now: time.epochMilliseconds()
        )
        guard case .participants(let participants) = try await writer.submit(.addParticipants(command)).outcome else {
            throw DomainError(.internalError, "Unexpected outcome of addParticipants.")
        }
        return .ok(.init(body: .json(ParticipantList(participants: participants))))
    }

    func listParticipants(_ input: Operations.ListParticipants.Input) async throws -> Operations.ListParticipants.Output
    {
        let caller = try await authenticator.caller(credentials)
        _ = try await visibleConversation(caller, conversationId: input.path.conversationId)
        let participants = try await store.participants(
            appId: caller.appId, conversationId: input.path.conversationId
        )
        return .ok(.init(body: .json(ParticipantList(participants: participants))))
    }

    // MARK: Messages

    /// A user's message; with the REST API key, a system message of the app's server (`sender` empty, `system` true).
    func sendMessage(_ input: Operations.SendMessage.Input) async throws -> Operations.SendMessage.Output {
        let caller = try await authenticator.caller(credentials)
        guard case .json(let request) = input.body else { throw DomainError(.badRequest, "Expected JSON.") }
        let sender: String
        switch caller {
        case .user(let principal):
            try limits.sends?.take(appId: principal.appId, uid: principal.uid)
            sender = principal.uid
        case .server:
            sender = ""
        }
        try InputRules.identifier(input.path.conversationId, "conversationId")
        try MessageRules.validate(
            parts: request.parts, metadata: request.metadata, alert: request.alert,
            clientMessageId: request.clientMessageId, replyTo: request.replyTo, mentions: request.mentions,
            limits: configuration.messageLimits
        )
        let now = time.epochMilliseconds()
        var command = Command.SendMessage(
            appId: caller.appId, conversationId: input.path.conversationId, sender: sender,
            messageId: Secrets.messageID(at: now), clientMessageId: request.clientMessageId, parts: request.parts,
            metadata: request.metadata, alert: request.alert, replyTo: request.replyTo, mentions: request.mentions,
            now: now
        )
        command.silent = request.silent ?? false
        command.system = sender.isEmpty
        guard case .message(let message, let duplicate) = try await writer.submit(.sendMessage(command)).outcome else {
            throw DomainError(.internalError, "Unexpected outcome of sendMessage.")
        }
        return duplicate ? .ok(.init(body: .json(message))) : .created(.init(body: .json(message)))
    }

    func listMessages(_ input: Operations.ListMessages.Input) async throws -> Operations.ListMessages.Output {
        let caller = try await authenticator.caller(credentials)
        let query = input.query
        guard query.around != nil || query.after != nil else {
            let page = try await history(
                caller, conversationId: input.path.conversationId, thread: nil, limit: query.limit,
                cursor: query.cursor
            )
            return .ok(.init(body: .json(page)))
        }
        guard query.cursor == nil, query.around == nil || query.after == nil else {
            throw DomainError(.badRequest, "`around`, `after` and `cursor` exclude each other.")
        }
        let page = try await history(
            caller, conversationId: input.path.conversationId, around: query.around, after: query.after,
            limit: query.limit
        )
        return .ok(.init(body: .json(page)))
    }

    /// A page of history opened at a position: `around` it (half of `limit` at or before it, the rest after), or the
    /// messages `after` it; ascending, with the cursors of the older and the newer page.
    func history(_ caller: Caller, conversationId: String, around: Int64?, after: Int64?, limit: Int?) async throws
        -> MessagePage
    {
        let limit = try Self.pageSize(limit)
        if let around, !(1..<Int64.max).contains(around) {
            throw DomainError(.badRequest, "`around` must be 1 or more.")
        }
        try InputRules.position(after, "after")
        _ = try await visibleConversation(caller, conversationId: conversationId)
        let viewer: String
        if case .user(let principal) = caller { viewer = principal.uid } else { viewer = "" }
        var older: MessageHistory?
        var newerFrom = after ?? 0
        if let around {
            let half = (limit + 1) / 2
            older = try await store.messages(
                appId: caller.appId, conversationId: conversationId,
                query: HistoryQuery(beforeSeq: around + 1, limit: half, viewer: viewer)
            )
            newerFrom = around
        }
        var olderMessages = older?.messages ?? []
        let newerLimit = limit - olderMessages.count
        let newer = try await store.messages(
            appId: caller.appId, conversationId: conversationId,
            query: HistoryQuery(afterSeq: newerFrom, limit: newerLimit, viewer: viewer)
        )
        var olderFull = older != nil && olderMessages.count == (limit + 1) / 2
        // Near the end: the page is filled with older messages instead.
        if olderFull, newer.messages.count < newerLimit, let lowest = olderMessages.last?.seq {
            let more = limit - olderMessages.count - newer.messages.count
            let earlier = try await store.messages(
                appId: caller.appId, conversationId: conversationId,
                query: HistoryQuery(beforeSeq: lowest, limit: more, viewer: viewer)
            )
            olderMessages += earlier.messages
            olderFull = earlier.messages.count == more
        }
        let olderCursor = olderFull ? olderMessages.last.map { String($0.seq) } : nil
        // (A page of one message around a position is all "older": its newer page starts after that position.)
        let newerCursor =
            newer.messages.count == newerLimit ? (newer.messages.last?.seq ?? newerFrom).description : nil
        return MessagePage(
            messages: olderMessages.reversed() + newer.messages, nextCursor: olderCursor, newerCursor: newerCursor,
            // The page includes every change up to the earlier of its two reads.
            lastSeq: min(older?.lastSeq ?? newer.lastSeq, newer.lastSeq)
        )
    }

    /// A page of history or of a thread, for a participant or the app's server: ascending, with the cursor of the
    /// older page.
    func history(_ caller: Caller, conversationId: String, thread: String?, limit: Int?, cursor: String?)
        async throws -> MessagePage
    {
        let limit = try Self.pageSize(limit)
        let beforeSeq = try cursor.map { cursor in
            guard let seq = Int64(cursor), seq > 0 else { throw DomainError(.badRequest, "Invalid cursor.") }
            return seq
        }
        try InputRules.identifier(thread, "messageId")
        _ = try await visibleConversation(caller, conversationId: conversationId)
        // The app's server reacts as nobody: `reacted` is false everywhere.
        let viewer: String
        if case .user(let principal) = caller { viewer = principal.uid } else { viewer = "" }
        let history = try await store.messages(
            appId: caller.appId, conversationId: conversationId,
            query: HistoryQuery(beforeSeq: beforeSeq, limit: limit, viewer: viewer, thread: thread)
        )
        let newestFirst = history.messages
        let next = newestFirst.count == limit ? newestFirst.last.map { String($0.seq) } : nil
        return MessagePage(
            messages: newestFirst.reversed(), nextCursor: next, lastSeq: history.lastSeq, parent: history.parent
        )
    }

    func listEvents(_ input: Operations.ListEvents.Input) async throws -> Operations.ListEvents.Output {
        let principal = try await currentUser()
        let limit = try Self.pageSize(input.query.limit)
        guard input.query.after >= 0 else { throw DomainError(.badRequest, "`after` must be 0 or more.") }
        _ = try await requireParticipant(principal, conversationId: input.path.conversationId)
        let events = try await store.events(
            appId: principal.appId, conversationId: input.path.conversationId, afterSeq: input.query.after,
            limit: limit
        )
        let next = events.count == limit ? events.last?.event.seq.map(String.init) : nil
        return .ok(.init(body: .json(EventPage(events: events.map(\.event), nextCursor: next))))
    }

    // MARK: Helpers

    /// A conversation a participant sees (``requireParticipant(_:conversationId:)``), or, for the app's server, any
    /// of the app's that is not deleted.
    func visibleConversation(_ caller: Caller, conversationId: String) async throws -> ConversationRow {
        switch caller {
        case .user(let principal): return try await requireParticipant(principal, conversationId: conversationId)
        case .server(let appId): return try await appConversation(appId: appId, conversationId: conversationId)
        }
    }

    /// The conversation, when the caller participates in it. A private conversation the caller is not in is
    /// "not found"; a public one is `ERR_NOT_A_PARTICIPANT` (it can be joined), or `ERR_BANNED` for a user banned
    /// from it.
    func requireParticipant(_ principal: UserPrincipal, conversationId: String) async throws -> ConversationRow {
        try await participation(principal, conversationId: conversationId).row
    }

    /// ``requireParticipant(_:conversationId:)`` with the caller's role.
    func participation(_ principal: UserPrincipal, conversationId: String) async throws
        -> (row: ConversationRow, role: ParticipantRole)
    {
        guard
            let (row, role) = try await store.conversation(
                appId: principal.appId, id: conversationId, viewer: principal.uid
            ), row.deletedAt == nil
        else { throw DomainError.conversationNotFound(conversationId) }
        // (A deleted conversation is visible to nobody; its owner restores it with undelete.)
        guard let role else {
            if row.conversation.isPublic {
                if let ban = try await store.ban(
                    appId: principal.appId, conversationId: conversationId, uid: principal.uid,
                    now: time.epochMilliseconds()
                ) {
                    throw Safety.bannedRefusal(ban)
                }
                throw DomainError(.notAParticipant, "Join conversation \(conversationId) to see it.")
            }
            throw DomainError.conversationNotFound(conversationId)
        }
        return (row, role)
    }

    static func decodeConversationCursor(_ cursor: String) throws -> ConversationQuery.Position {
        let parts = cursor.split(separator: ".")
        guard parts.count == 2, let activity = Int64(parts[0]), let pk = Int64(parts[1]) else {
            throw DomainError(.badRequest, "Invalid cursor.")
        }
        return ConversationQuery.Position(lastActivityAt: activity, conversationPK: pk)
    }
}

extension APIHandler {
    // MARK: Inbox

    /// `GET /v1/me/inbox`: a page of the caller's conversations with what an inbox shows of each (``InboxEntry``).
    func getInbox(_ input: Operations.GetInbox.Input) async throws -> Operations.GetInbox.Output {
        let principal = try await currentUser()
        let parameters = input.query
        let limit = try Self.pageSize(parameters.limit)
        let sort = parameters.sort ?? .activity
        let after = try parameters.cursor.map { try InboxCursor(parsing: $0, sort: sort) }
        if let id = parameters.conversationId { try InputRules.identifier(id, "conversationId") }
        let filter = InboxFilter(
            unreadOnly: parameters.unreadOnly ?? false, type: parameters._type,
            mentionsOnly: parameters.mentionsOnly ?? false, archived: parameters.archived ?? false,
            conversationId: parameters.conversationId
        )
        let page = try await store.inbox(
            InboxRequest(
                appId: principal.appId, uid: principal.uid, filter: filter, sort: sort, after: after, limit: limit
            )
        )
        return .ok(.init(body: .json(page)))
    }

    /// `PUT /v1/conversations/{id}/archive`.
    func archiveConversation(_ input: Operations.ArchiveConversation.Input) async throws
        -> Operations.ArchiveConversation.Output
    {
        try await setArchived(input.path.conversationId, true)
        return .noContent(.init())
    }

    /// `DELETE /v1/conversations/{id}/archive`.
    func unarchiveConversation(_ input: Operations.UnarchiveConversation.Input) async throws
        -> Operations.UnarchiveConversation.Output
    {
        try await setArchived(input.path.conversationId, false)
        return .noContent(.init())
    }

    /// Archives or brings back a conversation the caller participates in (the answers of any participant's request).
    private func setArchived(_ conversationId: String, _ archived: Bool) async throws {
        let principal = try await currentUser()
        try InputRules.identifier(conversationId, "conversationId")
        _ = try await requireParticipant(principal, conversationId: conversationId)
        guard
            try await store.setArchived(
                appId: principal.appId, conversationId: conversationId, uid: principal.uid, archived: archived
            )
        else { throw DomainError.conversationNotFound(conversationId) }
    }
}
