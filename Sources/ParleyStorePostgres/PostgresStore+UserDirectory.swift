import Foundation
import ParleyProtocol
import ParleyStore
import PostgresNIO

// The user directory on PostgreSQL: `user_words` holds each user's words (``UserDirectory/words(name:uid:)``), in
// byte order (`COLLATE "C"`, so that a prefix is a range of the index), keyed by (app, word, uid) for the search and
// by (app, uid, word) for a user's own words. They are written with the user, in the same transaction, and again when
// the name changes.

extension PostgresStore {
    public func updateAppUserDirectory(appId: String, visibility: UserDirectoryVisibility) async throws -> Bool {
        try await !rows("UPDATE apps SET user_directory = \(visibility.rawValue) WHERE id = \(appId) RETURNING id")
            .isEmpty
    }

    public func updateAppDeletedUserMessages(appId: String, _ mode: DeletedUserMessages) async throws -> Bool {
        try await !rows("UPDATE apps SET deleted_user_messages = \(mode.rawValue) WHERE id = \(appId) RETURNING id")
            .isEmpty
    }

    /// Replaces the words `uid` is found by with those of `name` and the uid.
    static func fileUserWords(_ session: PostgresSession, appId: String, uid: String, name: String) async throws {
        try await session.execute("DELETE FROM user_words WHERE app_id = \(appId) AND uid = \(uid)")
        try await session.execute(
            """
            INSERT INTO user_words (app_id, word, uid)
            SELECT \(appId), word, \(uid) FROM unnest(\(UserDirectory.words(name: name, uid: uid))::text[]) AS word
            """
        )
    }

    /// Files the words of every user (the migration that made the directory), 1,000 users a statement.
    static func fileEveryUsersWords(_ session: PostgresSession) async throws {
        var after: (appId: String, uid: String)?
        while true {
            let users = try await session.rows(
                """
                SELECT app_id, uid, name FROM users
                WHERE \(after == nil) OR (app_id, uid) > (\(after?.appId ?? ""), \(after?.uid ?? ""))
                ORDER BY app_id, uid LIMIT 1000
                """
            ).map { try $0.decode((String, String, String).self) }
            guard let last = users.last else { return }
            var apps: [String] = []
            var words: [String] = []
            var uids: [String] = []
            for (appId, uid, name) in users {
                for word in UserDirectory.words(name: name, uid: uid) {
                    apps.append(appId)
                    words.append(word)
                    uids.append(uid)
                }
            }
            try await session.execute(
                "INSERT INTO user_words (app_id, word, uid) SELECT * FROM unnest(\(apps)::text[], \(words)::text[], \(uids)::text[])"
            )
            after = (last.0, last.1)
        }
    }

    public func userWordCounts(appId: String, prefixes: [String], cap: Int) async throws -> [Int] {
        let ranges = prefixes.map { UserDirectory.range(of: $0) }
        return try await rows(
            """
            SELECT (
                SELECT count(*) FROM (
                    SELECT 1 FROM user_words w
                    WHERE w.app_id = \(appId) AND w.word >= r.lower AND w.word < r.upper LIMIT \(cap + 1)
                ) found
            ) FROM unnest(\(ranges.map(\.lower))::text[], \(ranges.map(\.upper))::text[]) WITH ORDINALITY
                AS r(lower, upper, position)
            ORDER BY r.position
            """
        ).map { Int(try $0.decode(Int64.self)) }
    }

    public func searchUsers(_ request: UserSearchRequest) async throws -> UserSearchPage {
        let query = Self.userSearchQuery(request)
        return try await withSession { session in
            let rows = try await session.rows(query).map { row in
                let columns = row.makeRandomAccess()
                return (word: try columns[0].decode(String.self), user: try Self.user(columns, from: 1))
            }
            return UserSearchPage(rows: rows, request: request)
        }
    }

    /// The statement of a user search, with only the conditions that apply (as `SQLiteStore.userSearchSQL`): the
    /// leading word's range of the index in word order, each user at the first of their words in it; limited to
    /// contacts, the searcher's contacts first.
    static func userSearchQuery(_ request: UserSearchRequest) -> PostgresQuery {
        var binds = PostgresBindings()
        func bind(_ value: some PostgresNonThrowingEncodable & Sendable) -> String {
            binds.append(value)
            return "$\(binds.count)"
        }
        let (lower, upper) = UserDirectory.range(of: request.leading)
        let app = bind(request.appId)
        let (from, to) = (bind(lower), bind(upper))
        var sql = ""
        var source = "user_words w"
        if let viewer = request.viewer, request.visibility == .contacts {
            sql += """
                WITH contacts AS MATERIALIZED (
                    SELECT DISTINCT other.uid FROM participants mine
                    JOIN conversations c ON c.pk = mine.conversation_pk AND c.app_id = \(app) AND c.deleted_at IS NULL
                    JOIN participants other ON other.conversation_pk = mine.conversation_pk
                    WHERE mine.uid = \(bind(viewer))
                )

                """
            source = "contacts k JOIN user_words w ON w.app_id = \(app) AND w.uid = k.uid"
        }
        sql += """
            SELECT w.word, \(userColumns("u"))
            FROM \(source)
            JOIN users u ON u.app_id = w.app_id AND u.uid = w.uid
            WHERE w.app_id = \(app) AND w.word >= \(from) AND w.word < \(to)
            AND NOT EXISTS (
                SELECT 1 FROM user_words d WHERE d.app_id = w.app_id AND d.uid = w.uid AND d.word >= \(from)
                AND d.word < w.word
            )
            """
        if let after = request.after {
            sql += "\nAND (w.word, w.uid) > (\(bind(after.word)), \(bind(after.uid)))"
        }
        for prefix in request.others {
            let (lower, upper) = UserDirectory.range(of: prefix)
            sql += """

                AND EXISTS (
                    SELECT 1 FROM user_words o WHERE o.app_id = w.app_id AND o.uid = w.uid
                    AND o.word >= \(bind(lower)) AND o.word < \(bind(upper))
                )
                """
        }
        if let viewer = request.viewer {
            let me = bind(viewer)
            sql += """

                AND w.uid != \(me) AND u.deactivated_at IS NULL
                AND NOT EXISTS (SELECT 1 FROM blocks b WHERE b.app_id = w.app_id AND b.blocker = \(me) AND b.blocked = w.uid)
                AND NOT EXISTS (SELECT 1 FROM blocks b WHERE b.app_id = w.app_id AND b.blocker = w.uid AND b.blocked = \(me))
                """
        }
        sql += "\nORDER BY w.word, w.uid LIMIT \(bind(request.limit))"
        return PostgresQuery(unsafeSQL: sql, binds: binds)
    }
}
