import ParleyAPI
import ParleyAPIServer
import ParleyProtocol
import ParleyStore

extension APIHandler {
    // MARK: Blocks

    func listBlocks(_ input: Operations.ListBlocks.Input) async throws -> Operations.ListBlocks.Output {
        let principal = try await currentUser()
        return .ok(
            .init(body: .json(BlockList(blocks: try await store.blocks(appId: principal.appId, uid: principal.uid)))))
    }

    func blockUser(_ input: Operations.BlockUser.Input) async throws -> Operations.BlockUser.Output {
        let principal = try await currentUser()
        let uid = input.path.uid
        try InputRules.uid(uid)
        guard uid != principal.uid else { throw DomainError(.badRequest, "You cannot block yourself.") }
        try limits.sends?.take(appId: principal.appId, uid: principal.uid)
        let block = try await store.block(
            appId: principal.appId, blocker: principal.uid, blocked: uid, now: time.epochMilliseconds()
        )
        // From now on the blocker gets no presence of the blocked user: what it showed last goes offline.
        relay.deliver(
            appId: principal.appId, actor: uid, timestamp: time.epochMilliseconds(),
            payload: .presenceUpdated(Presence(uid: uid, online: false)), to: [principal.uid]
        )
        return .ok(.init(body: .json(block)))
    }

    func unblockUser(_ input: Operations.UnblockUser.Input) async throws -> Operations.UnblockUser.Output {
        let principal = try await currentUser()
        try InputRules.uid(input.path.uid)
        try await store.unblock(appId: principal.appId, blocker: principal.uid, blocked: input.path.uid)
        return .noContent(.init())
    }

    // MARK: Reports

    func createReport(_ input: Operations.CreateReport.Input) async throws -> Operations.CreateReport.Output {
        let principal = try await currentUser()
        guard case .json(let request) = input.body else { throw DomainError(.badRequest, "Expected JSON.") }
        try Self.validateReportText(request.details, "details")
        try limits.sends?.take(appId: principal.appId, uid: principal.uid)
        var report = Report(
            id: Secrets.randomID(prefix: "r_"), reporter: principal.uid, uid: "", reason: request.reason,
            details: request.details, state: .open, createdAt: time.epochMilliseconds()
        )
        switch (request.conversationId, request.messageId, request.uid) {
        case (let conversationId?, let messageId?, nil):
            // A message of a conversation the reporter is in: as they see it now.
            try InputRules.identifier(conversationId, "conversationId")
            try InputRules.identifier(messageId, "messageId")
            _ = try await requireParticipant(principal, conversationId: conversationId)
            guard
                let message = try await store.message(
                    appId: principal.appId, conversationId: conversationId, messageId: messageId, viewer: principal.uid
                )
            else { throw MessageLifecycle.notFound(messageId) }
            guard !message.isDeleted else { throw MessageLifecycle.deleted(messageId) }
            report.uid = message.sender
            report.conversationId = conversationId
            report.messageId = messageId
            report.message = message
        case (nil, nil, let uid?):
            try InputRules.uid(uid)
            _ = try await existingUser(appId: principal.appId, uid: uid)
            report.uid = uid
        default:
            throw DomainError(.badRequest, "Report a message (conversationId and messageId) or a user (uid).")
        }
        guard report.uid != principal.uid else { throw DomainError(.badRequest, "You cannot report yourself.") }
        let (stored, created) = try await store.insertReport(appId: principal.appId, report)
        if created { webhooksQueued() }
        return created ? .created(.init(body: .json(stored))) : .ok(.init(body: .json(stored)))
    }

    func listReports(_ input: Operations.ListReports.Input) async throws -> Operations.ListReports.Output {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        let limit = try Self.pageSize(input.query.limit)
        let after = try input.query.cursor.map { cursor in
            guard let position = Int64(cursor), position >= 0 else { throw DomainError(.badRequest, "Invalid cursor.") }
            return position
        }
        let page = try await store.reports(appId: appId, state: input.query.state, after: after, limit: limit)
        let next = page.count == limit ? page.last.map { String($0.position) } : nil
        return .ok(.init(body: .json(ReportList(reports: page.map(\.report), nextCursor: next))))
    }

    func updateReport(_ input: Operations.UpdateReport.Input) async throws -> Operations.UpdateReport.Output {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        guard case .json(let request) = input.body else { throw DomainError(.badRequest, "Expected JSON.") }
        try InputRules.identifier(input.path.reportId, "reportId")
        try Self.validateReportText(request.resolution, "resolution")
        guard
            let report = try await store.updateReport(
                appId: appId, id: input.path.reportId, state: request.state, resolution: request.resolution,
                now: time.epochMilliseconds()
            )
        else { throw DomainError(.reportNotFound, "No report \(input.path.reportId) in this app.") }
        webhooksQueued()
        return .ok(.init(body: .json(report)))
    }

    /// A report's details or a resolution: at most ``Safety/maxReportTextBytes``, line breaks and tabs allowed.
    static func validateReportText(_ value: String?, _ field: String) throws {
        try InputRules.name(value, field, maxBytes: Safety.maxReportTextBytes, lineBreaks: true)
    }
}

extension APIHandler {
    // MARK: Mutes

    func muteParticipant(_ input: Operations.MuteParticipant.Input) async throws -> Operations.MuteParticipant.Output {
        guard case .json(let request) = input.body else { throw DomainError(.badRequest, "Expected JSON.") }
        let now = time.epochMilliseconds()
        if let until = request.until, until <= now {
            throw DomainError(.badRequest, "`until` must be in the future (epoch ms).")
        }
        let participant = try await mute(
            conversationId: input.path.conversationId, uid: input.path.uid, muted: true, until: request.until, now: now
        )
        return .ok(.init(body: .json(participant)))
    }

    func unmuteParticipant(_ input: Operations.UnmuteParticipant.Input) async throws
        -> Operations.UnmuteParticipant.Output
    {
        let participant = try await mute(
            conversationId: input.path.conversationId, uid: input.path.uid, muted: false, until: nil,
            now: time.epochMilliseconds()
        )
        return .ok(.init(body: .json(participant)))
    }

    /// Mutes or unmutes, as a user (who may remove the participant) or as the app's server.
    private func mute(conversationId: String, uid: String, muted: Bool, until: Int64?, now: Int64) async throws
        -> Participant
    {
        let caller = try await authenticator.caller(credentials)
        var actor: String?
        if case .user(let principal) = caller {
            try limits.sends?.take(appId: principal.appId, uid: principal.uid)
            actor = principal.uid
        }
        try InputRules.identifier(conversationId, "conversationId")
        try InputRules.uid(uid)
        let command = Command.MuteParticipant(
            appId: caller.appId, conversationId: conversationId, actor: actor, uid: uid, muted: muted, until: until,
            now: now
        )
        guard case .participant(let participant) = try await writer.submit(.muteParticipant(command)).outcome else {
            throw DomainError(.internalError, "Unexpected outcome of a mute.")
        }
        return participant
    }
}

extension APIHandler {
    // MARK: Bans

    func banUser(_ input: Operations.BanUser.Input) async throws -> Operations.BanUser.Output {
        let caller = try await authenticator.caller(credentials)
        guard case .json(let request) = input.body else { throw DomainError(.badRequest, "Expected JSON.") }
        let now = time.epochMilliseconds()
        if let until = request.until, until <= now {
            throw DomainError(.badRequest, "`until` must be in the future (epoch ms).")
        }
        try Self.validateReportText(request.reason, "reason")
        let ban = try await ban(
            caller, conversationId: input.path.conversationId, uid: input.path.uid, banned: true, until: request.until,
            reason: request.reason, now: now
        )
        return .ok(.init(body: .json(ban)))
    }

    func unbanUser(_ input: Operations.UnbanUser.Input) async throws -> Operations.UnbanUser.Output {
        let caller = try await authenticator.caller(credentials)
        let ban = try await ban(
            caller, conversationId: input.path.conversationId, uid: input.path.uid, banned: false, until: nil,
            reason: nil, now: time.epochMilliseconds()
        )
        return .ok(.init(body: .json(ban)))
    }

    /// The bans of a group that hold now: for whoever may ban there (who may remove a member), or the app's server.
    func listBans(_ input: Operations.ListBans.Input) async throws -> Operations.ListBans.Output {
        let caller = try await authenticator.caller(credentials)
        let conversationId = input.path.conversationId
        try InputRules.identifier(conversationId, "conversationId")
        let conversation: Conversation
        var role: ParticipantRole?
        switch caller {
        case .user(let principal):
            let participation = try await participation(principal, conversationId: conversationId)
            (conversation, role) = (participation.row.conversation, participation.role)
        case .server(let appId):
            // No uid is empty: the app's server is nobody's participant, and sees every conversation of its app.
            guard let (row, _) = try await store.conversation(appId: appId, id: conversationId, viewer: ""),
                row.deletedAt == nil
            else { throw DomainError.conversationNotFound(conversationId) }
            conversation = row.conversation
        }
        guard conversation.type == .group else {
            throw DomainError(.forbidden, "Nobody is banned from a direct conversation.")
        }
        if let role, !conversation.roles[role].canRemoveParticipants {
            throw DomainError(.forbidden, "A \(role.rawValue) cannot see the bans here.")
        }
        let bans = try await store.bans(
            appId: caller.appId, conversationId: conversationId, now: time.epochMilliseconds()
        )
        return .ok(.init(body: .json(BanList(bans: bans))))
    }

    /// Bans or unbans, as a user (who may remove the participant, or a member for someone not in the group) or as the
    /// app's server.
    private func ban(
        _ caller: Caller, conversationId: String, uid: String, banned: Bool, until: Int64?, reason: String?, now: Int64
    ) async throws -> ConversationBan {
        var actor: String?
        if case .user(let principal) = caller {
            try limits.sends?.take(appId: principal.appId, uid: principal.uid)
            actor = principal.uid
        }
        try InputRules.identifier(conversationId, "conversationId")
        try InputRules.uid(uid)
        let command = Command.BanParticipant(
            appId: caller.appId, conversationId: conversationId, actor: actor, uid: uid, banned: banned, until: until,
            reason: reason, now: now
        )
        guard case .ban(let ban) = try await writer.submit(.banParticipant(command)).outcome else {
            throw DomainError(.internalError, "Unexpected outcome of a ban.")
        }
        return ban
    }
}
