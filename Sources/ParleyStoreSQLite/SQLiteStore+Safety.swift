import Foundation
import GRDB
import ParleyProtocol
import ParleyStore

// Blocks, reports, mutes and bans (see ``Safety`` for the rules).

extension SQLiteStore {
    // MARK: Blocks

    public func block(appId: String, blocker: String, blocked: String, now: Int64) async throws -> BlockedUser {
        try await pool.write { db in
            guard try Self.fetchUser(db, appId: appId, uid: blocked) != nil else {
                throw DomainError.uidNotFound(blocked)
            }
            if let since = try Int64.fetchOne(
                db, sql: "SELECT created_at FROM blocks WHERE app_id = ? AND blocker = ? AND blocked = ?",
                arguments: [appId, blocker, blocked]
            ) {
                return BlockedUser(uid: blocked, blockedAt: since)
            }
            let count =
                try Int.fetchOne(
                    db, sql: "SELECT count(*) FROM blocks WHERE app_id = ? AND blocker = ?",
                    arguments: [appId, blocker]
                ) ?? 0
            guard count < Safety.maxBlocks else {
                throw DomainError(.blockLimit, "A user may block at most \(Safety.maxBlocks) users.")
            }
            try db.execute(
                sql: "INSERT INTO blocks (app_id, blocker, blocked, created_at) VALUES (?, ?, ?, ?)",
                arguments: [appId, blocker, blocked, now]
            )
            return BlockedUser(uid: blocked, blockedAt: now)
        }
    }

    public func unblock(appId: String, blocker: String, blocked: String) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "DELETE FROM blocks WHERE app_id = ? AND blocker = ? AND blocked = ?",
                arguments: [appId, blocker, blocked]
            )
        }
    }

    public func blocks(appId: String, uid: String) async throws -> [BlockedUser] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql:
                    "SELECT blocked, created_at FROM blocks WHERE app_id = ? AND blocker = ? ORDER BY created_at DESC, blocked",
                arguments: [appId, uid]
            ).map { BlockedUser(uid: $0[0], blockedAt: $0[1]) }
        }
    }

    public func blockers(of users: [UserRef]) async throws -> [[String]] {
        try await pool.read { db in
            let statement = try db.cachedStatement(sql: "SELECT blocker FROM blocks WHERE app_id = ? AND blocked = ?")
            return try users.map { try String.fetchAll(statement, arguments: [$0.appId, $0.uid]) }
        }
    }

    /// The users among `a` and `b` who blocked the other (empty when neither did).
    static func blockersBetween(_ db: Database, appId: String, _ a: String, _ b: String) throws -> [String] {
        try String.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT blocker FROM blocks
                    WHERE app_id = ? AND ((blocker = ? AND blocked = ?) OR (blocker = ? AND blocked = ?))
                    """
            ),
            arguments: [appId, a, b, b, a]
        )
    }

    // MARK: Reports

    public func insertReport(appId: String, _ report: Report) async throws -> (report: Report, created: Bool) {
        try await pool.write { db in
            if let open = try Row.fetchOne(
                db,
                sql: """
                    SELECT \(Self.reportColumns) FROM reports
                    WHERE app_id = ? AND reporter = ? AND uid = ? AND coalesce(message_id, '') = ? AND state = 'open'
                    """,
                arguments: [appId, report.reporter, report.uid, report.messageId ?? ""]
            ) {
                return (try Self.report(open), false)
            }
            try db.execute(
                sql: """
                    INSERT INTO reports (id, app_id, reporter, uid, conversation_id, message_id, message, reason, details,
                        state, resolution, created_at, resolved_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    report.id, appId, report.reporter, report.uid, report.conversationId, report.messageId,
                    try report.message.map { String(decoding: try WireCoding.encode($0), as: UTF8.self) },
                    report.reason.rawValue, report.details, report.state.rawValue, report.resolution, report.createdAt,
                    report.resolvedAt,
                ]
            )
            try Self.queueReportEvent(db, appId: appId, report, name: .reportCreate, at: report.createdAt)
            return (report, true)
        }
    }

    public func reports(appId: String, state: ReportState?, after: Int64?, limit: Int) async throws
        -> [(position: Int64, report: Report)]
    {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT pk, \(Self.reportColumns) FROM reports
                    WHERE app_id = ? AND (? IS NULL OR state = ?) AND pk > ? ORDER BY pk LIMIT ?
                    """,
                arguments: [appId, state?.rawValue, state?.rawValue, after ?? 0, limit]
            ).map { row in (row[0], try Self.report(row, from: 1)) }
        }
    }

    public func updateReport(appId: String, id: String, state: ReportState, resolution: String?, now: Int64)
        async throws -> Report?
    {
        try await pool.write { db in
            // Reopening a report while the same reporter has another open one about the same thing would make two:
            // the unique index refuses it, and the caller is told.
            do {
                try db.execute(
                    // A resolution given replaces the one noted; resolved again, it keeps when it was first resolved.
                    sql: """
                        UPDATE reports SET state = ?, resolution = coalesce(?, resolution),
                            resolved_at = CASE WHEN ? = 'resolved' THEN coalesce(resolved_at, ?) END
                        WHERE app_id = ? AND id = ?
                        """,
                    arguments: [state.rawValue, resolution, state.rawValue, now, appId, id]
                )
            } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
                throw DomainError(.badRequest, "The reporter has another open report about the same message or user.")
            }
            guard
                let report = try Row.fetchOne(
                    db, sql: "SELECT \(Self.reportColumns) FROM reports WHERE app_id = ? AND id = ?",
                    arguments: [appId, id]
                ).map({ try Self.report($0) })
            else { return nil }
            try Self.queueReportEvent(db, appId: appId, report, name: .reportUpdate, at: now)
            return report
        }
    }

    static let reportColumns =
        "id, reporter, uid, conversation_id, message_id, message, reason, details, state, resolution, created_at, resolved_at"

    static func report(_ row: Row, from start: Int = 0) throws -> Report {
        let reason: String = row[start + 6]
        let state: String = row[start + 8]
        guard let reason = ReportReason(rawValue: reason), let state = ReportState(rawValue: state) else {
            throw DatabaseError(message: "Unknown report reason or state in the reports table.")
        }
        let message: String? = row[start + 5]
        return Report(
            id: row[start], reporter: row[start + 1], uid: row[start + 2], conversationId: row[start + 3],
            messageId: row[start + 4],
            message: try message.map { try WireCoding.decode(Message.self, from: Array($0.utf8)) },
            reason: reason, details: row[start + 7], state: state, resolution: row[start + 9],
            createdAt: row[start + 10], resolvedAt: row[start + 11]
        )
    }
}

extension SQLiteStore {
    // MARK: Mutes

    public func isMuted(appId: String, conversationId: String, uid: String, now: Int64) async throws -> Bool {
        try await pool.read { db in
            guard let row = try Self.fetchConversation(db, appId: appId, id: conversationId) else { return false }
            return try Self.fetchParticipant(db, conversationPK: row.pk, uid: uid)?.isMuted(at: now) ?? false
        }
    }
}

extension SQLiteStore {
    // MARK: Bans

    /// `uid`'s ban from the conversation when it holds at `now` (a row whose `until` passed is no ban).
    /// The bans in force at `now` of those of `uids` who have one, by uid.
    static func activeBans(_ db: Database, row: ConversationRow, uids: [String], now: Int64) throws
        -> [String: ConversationBan]
    {
        var bans: [String: ConversationBan] = [:]
        _ = try inChunks(uids) { chunk, marks in
            let rows = try Row.fetchCursor(
                db,
                sql: """
                    SELECT uid, banned_by, reason, until, created_at FROM bans
                    WHERE conversation_pk = ? AND (until IS NULL OR until > ?) AND uid IN (\(marks))
                    """,
                arguments: StatementArguments([row.pk.databaseValue, now.databaseValue] + chunk.map(\.databaseValue))
            )
            while let ban = try rows.next() {
                let uid: String = ban[0]
                bans[uid] = ConversationBan(
                    conversationId: row.conversation.id, uid: uid, bannedBy: ban[1], reason: ban[2], until: ban[3],
                    createdAt: ban[4]
                )
            }
        }
        return bans
    }

    static func activeBan(_ db: Database, row: ConversationRow, uid: String, now: Int64) throws -> ConversationBan? {
        try Row.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT banned_by, reason, until, created_at FROM bans
                    WHERE conversation_pk = ? AND uid = ? AND (until IS NULL OR until > ?)
                    """
            ),
            arguments: [row.pk, uid, now]
        ).map { ban in
            ConversationBan(
                conversationId: row.conversation.id, uid: uid, bannedBy: ban[0], reason: ban[1], until: ban[2],
                createdAt: ban[3]
            )
        }
    }

    public func bans(appId: String, conversationId: String, now: Int64) async throws -> [ConversationBan] {
        try await pool.read { db in
            guard let row = try Self.fetchConversation(db, appId: appId, id: conversationId) else { return [] }
            return try Row.fetchAll(
                db,
                sql: """
                    SELECT uid, banned_by, reason, until, created_at FROM bans
                    WHERE conversation_pk = ? AND (until IS NULL OR until > ?) ORDER BY created_at DESC, uid
                    """,
                arguments: [row.pk, now]
            ).map { ban in
                ConversationBan(
                    conversationId: conversationId, uid: ban[0], bannedBy: ban[1], reason: ban[2], until: ban[3],
                    createdAt: ban[4]
                )
            }
        }
    }

    public func ban(appId: String, conversationId: String, uid: String, now: Int64) async throws -> ConversationBan? {
        try await pool.read { db in
            guard let row = try Self.fetchConversation(db, appId: appId, id: conversationId) else { return nil }
            return try Self.activeBan(db, row: row, uid: uid, now: now)
        }
    }
}
