import ParleyProtocol
import ParleyStore
import PostgresNIO

// Blocks, reports, mutes and bans (see ``Safety`` for the rules).

extension PostgresStore {
    // MARK: Blocks

    public func block(appId: String, blocker: String, blocked: String, now: Int64) async throws -> BlockedUser {
        try await withSession { session in
            try await session.transaction {
                // One block at a time per blocker, whichever node makes it: two blocks made at once cannot both pass
                // the count below.
                try await session.execute("SELECT 1 FROM users WHERE app_id = \(appId) AND uid = \(blocker) FOR UPDATE")
                guard
                    try await session.value(
                        "SELECT 1 FROM users WHERE app_id = \(appId) AND uid = \(blocked)", as: Int32.self)
                        != nil
                else { throw DomainError.uidNotFound(blocked) }
                let existing = try await session.value(
                    "SELECT created_at FROM blocks WHERE app_id = \(appId) AND blocker = \(blocker) AND blocked = \(blocked)",
                    as: Int64.self
                )
                if let existing { return BlockedUser(uid: blocked, blockedAt: existing) }
                let count =
                    try await session.value(
                        "SELECT count(*) FROM blocks WHERE app_id = \(appId) AND blocker = \(blocker)", as: Int64.self
                    ) ?? 0
                guard count < Safety.maxBlocks else {
                    throw DomainError(.blockLimit, "A user may block at most \(Safety.maxBlocks) users.")
                }
                // Blocked at the same moment through another node: the first one stays.
                let inserted = try await session.value(
                    """
                    INSERT INTO blocks (app_id, blocker, blocked, created_at) VALUES (\(appId), \(blocker), \(blocked), \(now))
                    ON CONFLICT DO NOTHING RETURNING created_at
                    """,
                    as: Int64.self
                )
                if let inserted { return BlockedUser(uid: blocked, blockedAt: inserted) }
                let since = try await session.value(
                    "SELECT created_at FROM blocks WHERE app_id = \(appId) AND blocker = \(blocker) AND blocked = \(blocked)",
                    as: Int64.self
                )
                return BlockedUser(uid: blocked, blockedAt: since ?? now)
            }
        }
    }

    public func unblock(appId: String, blocker: String, blocked: String) async throws {
        try await execute(
            "DELETE FROM blocks WHERE app_id = \(appId) AND blocker = \(blocker) AND blocked = \(blocked)")
    }

    public func blocks(appId: String, uid: String) async throws -> [BlockedUser] {
        try await rows(
            """
            SELECT blocked, created_at FROM blocks WHERE app_id = \(appId) AND blocker = \(uid)
            ORDER BY created_at DESC, blocked COLLATE "C"
            """
        ).map { row in
            let (blocked, createdAt) = try row.decode((String, Int64).self)
            return BlockedUser(uid: blocked, blockedAt: createdAt)
        }
    }

    /// One statement per app for the whole list.
    public func blockers(of users: [UserRef]) async throws -> [[String]] {
        var found: [UserRef: [String]] = [:]
        for (appId, members) in Dictionary(grouping: Set(users), by: \.appId) {
            let uids = members.map(\.uid)
            let rows = try await rows(
                "SELECT blocked, blocker FROM blocks WHERE app_id = \(appId) AND blocked = ANY(\(uids))")
            for row in rows {
                let (blocked, blocker) = try row.decode((String, String).self)
                found[UserRef(appId: appId, uid: blocked), default: []].append(blocker)
            }
        }
        return users.map { found[$0] ?? [] }
    }

    // MARK: Reports

    public func insertReport(appId: String, _ report: Report) async throws -> (report: Report, created: Bool) {
        let message = try report.message.map { String(decoding: try WireCoding.encode($0), as: UTF8.self) }
        return try await withSession { session in
            try await session.transaction {
                // The same report made at the same moment through another node: the unique index keeps one.
                let inserted = try await session.rows(
                    """
                    INSERT INTO reports (id, app_id, reporter, uid, conversation_id, message_id, message, reason, details,
                        state, resolution, created_at, resolved_at)
                    VALUES (\(report.id), \(appId), \(report.reporter), \(report.uid), \(report.conversationId),
                        \(report.messageId), \(message), \(report.reason.rawValue), \(report.details),
                        \(report.state.rawValue), \(report.resolution), \(report.createdAt), \(report.resolvedAt))
                    ON CONFLICT DO NOTHING RETURNING id
                    """
                )
                if !inserted.isEmpty {
                    try await Self.queueReportEvent(
                        appId: appId, report, name: .reportCreate, at: report.createdAt, run: session.rows
                    )
                    return (report, true)
                }
                guard
                    let open = try await session.rows(
                        """
                        SELECT \(unescaped: Self.reportColumns) FROM reports
                        WHERE app_id = \(appId) AND reporter = \(report.reporter) AND uid = \(report.uid)
                        AND coalesce(message_id, '') = \(report.messageId ?? "") AND state = 'open'
                        """
                    ).first
                else { throw DomainError(.internalError, "The report could not be stored.") }
                return (try Self.report(open), false)
            }
        }
    }

    public func reports(appId: String, state: ReportState?, after: Int64?, limit: Int) async throws
        -> [(position: Int64, report: Report)]
    {
        let rows: [PostgresRow]
        if let state {
            rows = try await self.rows(
                """
                SELECT pk, \(unescaped: Self.reportColumns) FROM reports
                WHERE app_id = \(appId) AND state = \(state.rawValue) AND pk > \(after ?? 0) ORDER BY pk LIMIT \(limit)
                """
            )
        } else {
            rows = try await self.rows(
                """
                SELECT pk, \(unescaped: Self.reportColumns) FROM reports
                WHERE app_id = \(appId) AND pk > \(after ?? 0) ORDER BY pk LIMIT \(limit)
                """
            )
        }
        return try rows.map { row in
            (try row.makeRandomAccess()[0].decode(Int64.self), try Self.report(row, skippingFirst: true))
        }
    }

    public func updateReport(appId: String, id: String, state: ReportState, resolution: String?, now: Int64)
        async throws -> Report?
    {
        do {
            // A resolution given replaces the one noted; resolved again, it keeps when it was first resolved.
            return try await withSession { session in
                try await session.transaction {
                    guard
                        let report = try await session.rows(
                            """
                            UPDATE reports SET state = \(state.rawValue), resolution = coalesce(\(resolution), resolution),
                                resolved_at = CASE WHEN \(state.rawValue) = 'resolved' THEN coalesce(resolved_at, \(now)) END
                            WHERE app_id = \(appId) AND id = \(id)
                            RETURNING \(unescaped: Self.reportColumns)
                            """
                        ).first.map({ try Self.report($0) })
                    else { return nil }
                    try await Self.queueReportEvent(
                        appId: appId, report, name: .reportUpdate, at: now, run: session.rows)
                    return report
                }
            }
        } catch let error as PSQLError where error.sqlState == "23505" {
            throw DomainError(.badRequest, "The reporter has another open report about the same message or user.")
        }
    }

    static let reportColumns =
        "id, reporter, uid, conversation_id, message_id, message, reason, details, state, resolution, created_at, resolved_at"

    static func report(_ row: PostgresRow, skippingFirst: Bool = false) throws -> Report {
        let columns = row.makeRandomAccess()
        let start = skippingFirst ? 1 : 0
        func column<T: PostgresDecodable>(_ index: Int, _ type: T.Type = T.self) throws -> T {
            try columns[start + index].decode(T.self)
        }
        guard let reason = ReportReason(rawValue: try column(6)), let state = ReportState(rawValue: try column(8))
        else {
            throw DomainError(.internalError, "Unknown report reason or state in the reports table.")
        }
        let message: String? = try column(5)
        return Report(
            id: try column(0), reporter: try column(1), uid: try column(2), conversationId: try column(3),
            messageId: try column(4),
            message: try message.map { try WireCoding.decode(Message.self, from: Array($0.utf8)) },
            reason: reason, details: try column(7), state: state, resolution: try column(9),
            createdAt: try column(10), resolvedAt: try column(11)
        )
    }
}

extension BatchTransaction {
    /// The users among `a` and `b` who blocked the other (empty when neither did).
    func blockersBetween(_ appId: String, _ a: String, _ b: String) async throws -> [String] {
        try await rows(
            """
            SELECT blocker FROM blocks WHERE app_id = \(appId)
            AND ((blocker = \(a) AND blocked = \(b)) OR (blocker = \(b) AND blocked = \(a)))
            """
        ).map { try $0.decode(String.self) }
    }
}

extension PostgresStore {
    public func isMuted(appId: String, conversationId: String, uid: String, now: Int64) async throws -> Bool {
        let rows = try await rows(
            """
            SELECT p.muted, p.muted_until FROM participants p JOIN conversations c ON c.pk = p.conversation_pk
            WHERE c.app_id = \(appId) AND c.id = \(conversationId) AND p.uid = \(uid)
            """
        )
        guard let (muted, until) = try rows.first?.decode((Bool, Int64?).self) else { return false }
        return Participant(uid: uid, role: .member, joinedAt: 0, muted: muted ? true : nil, mutedUntil: until)
            .isMuted(at: now)
    }
}

extension BatchTransaction {
    /// The bans of `uids` from the conversation that hold at `now` (a row whose `until` passed is no ban), by uid.
    func activeBans(row: ConversationRow, uids: [String], now: Int64) async throws -> [String: ConversationBan] {
        var bans: [String: ConversationBan] = [:]
        for ban in try await rows(
            """
            SELECT uid, banned_by, reason, until, created_at FROM bans
            WHERE conversation_pk = \(row.pk) AND uid = ANY(\(uids)) AND (until IS NULL OR until > \(now))
            """
        ) {
            let (uid, bannedBy, reason, until, createdAt) = try ban.decode(
                (String, String?, String?, Int64?, Int64).self
            )
            bans[uid] = ConversationBan(
                conversationId: row.conversation.id, uid: uid, bannedBy: bannedBy, reason: reason, until: until,
                createdAt: createdAt
            )
        }
        return bans
    }
}

extension PostgresStore {
    public func bans(appId: String, conversationId: String, now: Int64) async throws -> [ConversationBan] {
        try await rows(
            """
            SELECT b.uid, b.banned_by, b.reason, b.until, b.created_at FROM bans b
            JOIN conversations c ON c.pk = b.conversation_pk
            WHERE c.app_id = \(appId) AND c.id = \(conversationId) AND (b.until IS NULL OR b.until > \(now))
            ORDER BY b.created_at DESC, b.uid COLLATE "C"
            """
        ).map { row in
            let (uid, bannedBy, reason, until, createdAt) = try row.decode(
                (String, String?, String?, Int64?, Int64).self
            )
            return ConversationBan(
                conversationId: conversationId, uid: uid, bannedBy: bannedBy, reason: reason, until: until,
                createdAt: createdAt
            )
        }
    }

    public func ban(appId: String, conversationId: String, uid: String, now: Int64) async throws -> ConversationBan? {
        try await rows(
            """
            SELECT b.banned_by, b.reason, b.until, b.created_at FROM bans b
            JOIN conversations c ON c.pk = b.conversation_pk
            WHERE c.app_id = \(appId) AND c.id = \(conversationId) AND b.uid = \(uid)
                AND (b.until IS NULL OR b.until > \(now))
            """
        ).first.map { row in
            let (bannedBy, reason, until, createdAt) = try row.decode((String?, String?, Int64?, Int64).self)
            return ConversationBan(
                conversationId: conversationId, uid: uid, bannedBy: bannedBy, reason: reason, until: until,
                createdAt: createdAt
            )
        }
    }
}
