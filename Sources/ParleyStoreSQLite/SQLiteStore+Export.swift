import Foundation
import GRDB
import ParleyProtocol
import ParleyStore

// A user's data for an export (``UserExport``): their memberships and, page by page, the messages they sent.

extension SQLiteStore {
    public func memberships(appId: String, uid: String) async throws -> [UserMembership] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT c.*, p.uid, p.role, p.joined_at, p.delivered_seq, p.read_seq, p.muted, p.muted_until
                    FROM participants p CROSS JOIN conversations c ON c.pk = p.conversation_pk
                    WHERE p.uid = ? AND c.app_id = ? ORDER BY c.pk
                    """,
                arguments: [uid, appId]
            ).map { row in
                UserMembership(
                    conversation: try Self.conversationRow(row).conversation, participant: Self.participant(row))
            }
        }
    }

    public func exportMessages(appId: String, uid: String, after: UserExport.Position?, limit: Int, scan: Int)
        async throws -> UserExport.Page
    {
        try await pool.read { db in
            // Every conversation the user ever joined: their stream of joins and departures.
            let conversations = try Int64.fetchAll(
                db, sql: "SELECT DISTINCT conversation_pk FROM memberships WHERE app_id = ? AND uid = ?",
                arguments: [appId, uid]
            )
            var walk = UserExport.Walk(conversations: conversations, after: after, limit: limit, scan: scan)
            let decoder = JSONDecoder()
            while let read = walk.next() {
                // A body is read only for the user's messages.
                let rows = try Row.fetchAll(
                    db.cachedStatement(
                        sql: """
                            SELECT seq, CASE WHEN actor = ? AND message_index IS NOT NULL THEN body END FROM events
                            WHERE conversation_pk = ? AND seq > ? ORDER BY seq LIMIT ?
                            """
                    ),
                    arguments: [uid, read.conversationPK, read.afterSeq, read.budget]
                )
                walk.take(
                    try rows.map { row in
                        let body: Data? = row[1]
                        return UserExport.Scanned(
                            position: UserExport.Position(conversationPK: read.conversationPK, seq: row[0]),
                            message: try body.map { try MessageLifecycle.message(in: $0, decoder: decoder) }
                        )
                    }
                )
            }
            return walk.page
        }
    }
}

extension SQLiteStore {
    public func purgeUser(appId: String, uid: String, now: Int64) async throws -> UserPurge {
        try await pool.write { db in
            guard let user = try Self.fetchUser(db, appId: appId, uid: uid) else { return .notFound }
            let participates = try Bool.fetchOne(
                db,
                sql: """
                    SELECT EXISTS (SELECT 1 FROM participants p CROSS JOIN conversations c ON c.pk = p.conversation_pk
                    WHERE p.uid = ? AND c.app_id = ?)
                    """,
                arguments: [uid, appId]
            )
            guard participates != true else { return .stillParticipates }
            for statement in PurgeStatement.allCases {
                let values: [(any DatabaseValueConvertible)?] = statement.parameters.map {
                    switch $0 {
                    case .appId: appId
                    case .uid: uid
                    case .now: now
                    }
                }
                try db.execute(sql: statement.sql, arguments: StatementArguments(values))
            }
            try Self.queueUserEvent(db, appId: appId, user, name: .userDelete, at: now)
            return .purged(user)
        }
    }
}
