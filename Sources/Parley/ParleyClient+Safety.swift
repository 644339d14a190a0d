import Foundation
import ParleyProtocol

extension ParleyClient {
    // MARK: Blocks

    /// Blocks a user: neither of you can write to the other in a direct conversation (`ERR_BLOCKED`), you no longer
    /// get their typing, presence and profile changes, and, unless the settings say otherwise
    /// (``AppSettings/hidesBlockedUsersMessages``), this client hides what they write in groups.
    @discardableResult
    public func blockUser(_ uid: String) async throws -> BlockedUser {
        _ = try requireSession()
        let block = try await rest.call { try await $0.blockUser(path: .init(uid: uid)).ok.body.json }
        blockedUsers.withLockedValue { _ = $0.insert(uid) }
        return block
    }

    /// Lifts a block (nothing happens when there is none).
    public func unblockUser(_ uid: String) async throws {
        _ = try requireSession()
        _ = try await rest.call { try await $0.unblockUser(path: .init(uid: uid)).noContent }
        blockedUsers.withLockedValue { _ = $0.remove(uid) }
    }

    /// The users you blocked, most recent first.
    public func fetchBlockedUsers() async throws -> [BlockedUser] {
        _ = try requireSession()
        let blocks = try await rest.call { try await $0.listBlocks().ok.body.json }.blocks
        blockedUsers.withLockedValue { $0 = Set(blocks.map(\.uid)) }
        return blocks
    }

    /// Reads the block list (at login and at start: blocks made on the user's other devices count from there on).
    /// Quietly keeps what it knew when the server cannot answer.
    func refreshBlockedUsers() async {
        do {
            let blocks = try await rest.call { try await $0.listBlocks().ok.body.json }.blocks
            blockedUsers.withLockedValue { $0 = Set(blocks.map(\.uid)) }
        } catch {
            logger.info(
                "The block list could not be read (\(RESTClient.parleyError(error).code)); keeping what was known.")
        }
    }

    /// Whether you blocked `uid`, as this client knows (read at login and at start, changed by your calls).
    public func isBlocked(_ uid: String) -> Bool {
        blockedUsers.withLockedValue { $0.contains(uid) }
    }

    // MARK: Mutes

    /// Mutes a participant of a group (you need the role that may remove them): they read, but cannot send, edit,
    /// react or type until `until` (epoch ms) or until unmuted. Everyone gets `onParticipantUpdated`.
    @discardableResult
    public func muteParticipant(_ uid: String, in conversationId: String, until: Int64? = nil) async throws
        -> Participant
    {
        _ = try requireSession()
        return try await rest.call {
            try await $0.muteParticipant(
                path: .init(conversationId: conversationId, uid: uid), body: .json(MuteRequest(until: until))
            ).ok.body.json
        }
    }

    /// Lifts a participant's mute.
    @discardableResult
    public func unmuteParticipant(_ uid: String, in conversationId: String) async throws -> Participant {
        _ = try requireSession()
        return try await rest.call {
            try await $0.unmuteParticipant(path: .init(conversationId: conversationId, uid: uid)).ok.body.json
        }
    }

    // MARK: Bans

    /// Bans a user from a group: when they are in it they are removed (`onParticipantRemoved`), then everyone, they
    /// included, gets `onParticipantBanned`; until `until` (nil: until unbanned) they cannot join, be added or read it
    /// (`ERR_BANNED`). You need the role that may remove them (that may remove a member, for a user not in the group).
    /// Banning again changes the end and the reason.
    ///
    /// ```swift
    /// try await client.ban("bob", in: groupId, until: Date().addingTimeInterval(86_400), reason: "spam")
    /// ```
    ///
    /// - Throws: `ERR_FORBIDDEN` (your role, the owner, a direct conversation), `ERR_BAD_REQUEST` (yourself, a time
    ///   not in the future), `ERR_FIELD_TOO_LARGE` (a reason over 1 KiB), `ERR_UID_NOT_FOUND`.
    @discardableResult
    public func ban(_ uid: String, in conversationId: String, until: Date? = nil, reason: String? = nil) async throws
        -> ConversationBan
    {
        _ = try requireSession()
        return try await rest.call {
            try await $0.banUser(
                path: .init(conversationId: conversationId, uid: uid),
                body: .json(BanRequest(until: until.map(Self.epochMilliseconds), reason: reason))
            ).ok.body.json
        }
    }

    /// Lifts a ban (the same roles may); everyone, the user included, gets `onParticipantUnbanned`. The user is not
    /// added back: they may join (a public group) or be added again.
    ///
    /// - Throws: `ERR_BAN_NOT_FOUND` when the user is not banned (a ban that ended counts as none).
    @discardableResult
    public func unban(_ uid: String, in conversationId: String) async throws -> ConversationBan {
        _ = try requireSession()
        return try await rest.call {
            try await $0.unbanUser(path: .init(conversationId: conversationId, uid: uid)).ok.body.json
        }
    }

    /// The bans of a group that hold now, newest first (when your role may ban there).
    public func bans(in conversationId: String) async throws -> [ConversationBan] {
        _ = try requireSession()
        return try await rest.call {
            try await $0.listBans(path: .init(conversationId: conversationId)).ok.body.json
        }.bans
    }

    /// A date as the wire's epoch milliseconds.
    static func epochMilliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded())
    }

    // MARK: Reports

    /// Reports a message of a conversation you are in to the app's moderators. Reporting it again while the first
    /// report is open returns that report.
    @discardableResult
    public func reportMessage(
        _ messageId: String, in conversationId: String, reason: ReportReason, details: String? = nil
    )
        async throws -> Report
    {
        try await report(
            CreateReportRequest(conversationId: conversationId, messageId: messageId, reason: reason, details: details)
        )
    }

    /// Reports a user to the app's moderators.
    @discardableResult
    public func reportUser(_ uid: String, reason: ReportReason, details: String? = nil) async throws -> Report {
        try await report(CreateReportRequest(uid: uid, reason: reason, details: details))
    }

    private func report(_ body: CreateReportRequest) async throws -> Report {
        _ = try requireSession()
        return try await rest.call { api in
            switch try await api.createReport(body: .json(body)) {
            case .created(let created): return try created.body.json
            case .ok(let existing): return try existing.body.json
            default: throw ParleyError(.unexpectedResponse, "Unexpected answer to createReport.")
            }
        }
    }

    /// Events that carry what a user writes: a message, its edit, a reaction (hidden when the user is blocked).
    static func isWriting(_ event: Event) -> Bool {
        switch event.payload {
        case .messageSent, .messageUpdated, .reactionAdded, .reactionRemoved: return true
        default: return false
        }
    }
}

extension ParleyAdmin {
    /// Mutes a participant of any group of the app (moderation); `until` nil: until unmuted.
    @discardableResult
    public func muteParticipant(_ uid: String, in conversationId: String, until: Int64? = nil) async throws
        -> Participant
    {
        try await rest.call {
            try await $0.muteParticipant(
                path: .init(conversationId: conversationId, uid: uid), body: .json(MuteRequest(until: until))
            ).ok.body.json
        }
    }

    /// Lifts a participant's mute.
    @discardableResult
    public func unmuteParticipant(_ uid: String, in conversationId: String) async throws -> Participant {
        try await rest.call {
            try await $0.unmuteParticipant(path: .init(conversationId: conversationId, uid: uid)).ok.body.json
        }
    }

    /// Bans a user from any group of the app (moderation): anyone but the owner, as
    /// ``ParleyClient/ban(_:in:until:reason:)`` does otherwise. The ban has no `bannedBy`.
    @discardableResult
    public func ban(_ uid: String, in conversationId: String, until: Date? = nil, reason: String? = nil) async throws
        -> ConversationBan
    {
        try await rest.call {
            try await $0.banUser(
                path: .init(conversationId: conversationId, uid: uid),
                body: .json(BanRequest(until: until.map(ParleyClient.epochMilliseconds), reason: reason))
            ).ok.body.json
        }
    }

    /// Lifts a ban from any group of the app.
    @discardableResult
    public func unban(_ uid: String, in conversationId: String) async throws -> ConversationBan {
        try await rest.call {
            try await $0.unbanUser(path: .init(conversationId: conversationId, uid: uid)).ok.body.json
        }
    }

    /// The bans of any group of the app that hold now, newest first.
    public func bans(in conversationId: String) async throws -> [ConversationBan] {
        try await rest.call { try await $0.listBans(path: .init(conversationId: conversationId)).ok.body.json }.bans
    }

    /// Deletes any message of the app's conversations (moderation): participants get `conversationMessage.delete`,
    /// the tombstone has no `deletedBy`.
    @discardableResult
    public func deleteMessage(_ messageId: String, in conversationId: String) async throws -> Message {
        try await rest.call {
            try await $0.deleteMessage(path: .init(conversationId: conversationId, messageId: messageId)).ok.body.json
        }
    }

    /// The app's reports (in `state`, when given), oldest first.
    public func reports(state: ReportState? = nil, limit: Int = 50, cursor: String? = nil) async throws -> ReportList {
        try await rest.call {
            try await $0.listReports(query: .init(state: state, limit: limit, cursor: cursor)).ok.body.json
        }
    }

    /// Resolves (or reopens) a report.
    @discardableResult
    public func updateReport(_ id: String, state: ReportState, resolution: String? = nil) async throws -> Report {
        try await rest.call {
            try await $0.updateReport(
                path: .init(reportId: id), body: .json(UpdateReportRequest(state: state, resolution: resolution))
            ).ok.body.json
        }
    }
}
