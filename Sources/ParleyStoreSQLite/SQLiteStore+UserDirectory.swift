import Foundation
import GRDB
import ParleyProtocol
import ParleyStore

// The user directory on SQLite: `user_words` holds each user's words (``UserDirectory/words(name:uid:)``), keyed by
// (app, word, uid) for the search and by (app, uid, word) for a user's own words. They are written with the user, in
// the same transaction, and again when the name changes.

extension SQLiteStore {
    public func updateAppUserDirectory(appId: String, visibility: UserDirectoryVisibility) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: "UPDATE apps SET user_directory = ? WHERE id = ?", arguments: [visibility.rawValue, appId]
            )
            return db.changesCount > 0
        }
    }

    public func updateAppDeletedUserMessages(appId: String, _ mode: DeletedUserMessages) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: "UPDATE apps SET deleted_user_messages = ? WHERE id = ?", arguments: [mode.rawValue, appId]
            )
            return db.changesCount > 0
        }
    }

    /// Replaces the words `uid` is found by with those of `name` and the uid.
    static func fileUserWords(_ db: Database, appId: String, uid: String, name: String) throws {
        try db.execute(
            sql: "DELETE FROM user_words WHERE app_id = ? AND uid = ?", arguments: [appId, uid]
        )
        let insert = try db.cachedStatement(sql: "INSERT INTO user_words (app_id, word, uid) VALUES (?, ?, ?)")
        for word in UserDirectory.words(name: name, uid: uid) {
            try insert.execute(arguments: [appId, word, uid])
        }
    }

    public func userWordCounts(appId: String, prefixes: [String], cap: Int) async throws -> [Int] {
        try await pool.read { db in
            let statement = try db.cachedStatement(
                sql: """
                    SELECT count(*) FROM (
                        SELECT 1 FROM user_words WHERE app_id = ? AND word >= ? AND word < ? LIMIT ?
                    )
                    """
            )
            return try prefixes.map { prefix in
                let (lower, upper) = UserDirectory.range(of: prefix)
                return try Int.fetchOne(statement, arguments: [appId, lower, upper, cap + 1]) ?? 0
            }
        }
    }

    public func searchUsers(_ request: UserSearchRequest) async throws -> UserSearchPage {
        let (sql, arguments) = Self.userSearchSQL(request)
        return try await pool.read { db in
            let rows = try Row.fetchAll(db.cachedStatement(sql: sql), arguments: arguments).map { row in
                (word: row[0] as String, user: try Self.user(row, from: 1))
            }
            return UserSearchPage(rows: rows, request: request)
        }
    }

    /// The statement of a user search, with only the conditions that apply.
    ///
    /// The leading word's range of `user_words` in word order gives the results in order, so the first page stops
    /// after `limit` users. A user with several words in the range is found at the first (`NOT EXISTS` on their own
    /// words). Limited to contacts, the searcher's contacts lead instead (a few hundred, against every user of the
    /// app), each one's words looked up in the range and sorted.
    static func userSearchSQL(_ request: UserSearchRequest) -> (String, StatementArguments) {
        let (lower, upper) = UserDirectory.range(of: request.leading)
        var arguments: StatementArguments = []
        var sql = ""
        var from = "user_words w"
        if let viewer = request.viewer, request.visibility == .contacts {
            sql += """
                WITH contacts(uid) AS (
                    SELECT DISTINCT other.uid FROM participants mine
                    CROSS JOIN conversations c ON c.pk = mine.conversation_pk AND c.app_id = ? AND c.deleted_at IS NULL
                    CROSS JOIN participants other ON other.conversation_pk = mine.conversation_pk
                    WHERE mine.uid = ?
                )

                """
            arguments += [request.appId, viewer]
            from = "contacts k CROSS JOIN user_words w ON w.app_id = ? AND w.uid = k.uid"
            arguments += [request.appId]
        }
        sql += """
            SELECT w.word, \(userColumns("u"))
            FROM \(from)
            CROSS JOIN users u ON u.app_id = w.app_id AND u.uid = w.uid
            WHERE w.app_id = ? AND w.word >= ? AND w.word < ?
            AND NOT EXISTS (
                SELECT 1 FROM user_words d WHERE d.app_id = w.app_id AND d.uid = w.uid AND d.word >= ? AND d.word < w.word
            )
            """
        arguments += [request.appId, lower, upper, lower]
        if let after = request.after {
            sql += "\nAND (w.word, w.uid) > (?, ?)"
            arguments += [after.word, after.uid]
        }
        for prefix in request.others {
            let (lower, upper) = UserDirectory.range(of: prefix)
            sql += """

                AND EXISTS (
                    SELECT 1 FROM user_words o WHERE o.app_id = w.app_id AND o.uid = w.uid AND o.word >= ? AND o.word < ?
                )
                """
            arguments += [lower, upper]
        }
        if let viewer = request.viewer {
            sql += """

                AND w.uid != ? AND u.deactivated_at IS NULL
                AND NOT EXISTS (SELECT 1 FROM blocks b WHERE b.app_id = w.app_id AND b.blocker = ? AND b.blocked = w.uid)
                AND NOT EXISTS (SELECT 1 FROM blocks b WHERE b.app_id = w.app_id AND b.blocker = w.uid AND b.blocked = ?)
                """
            arguments += [viewer, viewer, viewer]
        }
        sql += "\nORDER BY w.word, w.uid LIMIT ?"
        arguments += [request.limit]
        return (sql, arguments)
    }
}
