import Foundation
import GRDB
import ParleyProtocol
import ParleyStore

/// What an app's operator reads and changes with the REST API key (the web console): allowed origins, every user,
/// every conversation, counts. Not on any hot path.
extension SQLiteStore {
    public func updateAppOrigins(appId: String, origins: [String]) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: "UPDATE apps SET allowed_origins = ? WHERE id = ?",
                arguments: [AppRecord.storedOrigins(origins), appId]
            )
            return db.changesCount > 0
        }
    }

    public func updateAppFileLimit(appId: String, maxFileBytes: Int64?) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "UPDATE apps SET max_file_bytes = ? WHERE id = ?", arguments: [maxFileBytes, appId])
            return db.changesCount > 0
        }
    }

    public func users(appId: String, after: String?, limit: Int) async throws -> [User] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.userColumns("u")) FROM users u
                    WHERE u.app_id = ? AND (? IS NULL OR u.uid > ?) ORDER BY u.uid LIMIT ?
                    """,
                arguments: [appId, after, after, limit]
            ).map { try Self.user($0, from: 0) }
        }
    }

    public func appConversations(appId: String, beforePK: Int64?, limit: Int) async throws -> [ConversationRow] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM conversations WHERE app_id = ? AND deleted_at IS NULL AND (? IS NULL OR pk < ?)
                    ORDER BY pk DESC LIMIT ?
                    """,
                arguments: [appId, beforePK, beforePK, limit]
            ).map(Self.conversationRow)
        }
    }

    public func appCounts(appId: String) async throws -> AppCounts {
        try await pool.read { db in
            let users = try Int.fetchOne(db, sql: "SELECT count(*) FROM users WHERE app_id = ?", arguments: [appId])
            let conversations = try Int.fetchOne(
                db, sql: "SELECT count(*) FROM conversations WHERE app_id = ? AND deleted_at IS NULL",
                arguments: [appId]
            )
            return AppCounts(users: users ?? 0, conversations: conversations ?? 0)
        }
    }
}
