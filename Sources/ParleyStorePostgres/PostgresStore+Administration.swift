import NIOCore
import ParleyProtocol
import ParleyStore
import PostgresNIO

/// What an app's operator reads and changes with the REST API key (the web console): allowed origins, every user,
/// every conversation, counts. Not on any hot path.
extension PostgresStore {
    public func updateAppOrigins(appId: String, origins: [String]) async throws -> Bool {
        try await !rows(
            """
            UPDATE apps SET allowed_origins = \(AppRecord.storedOrigins(origins)) WHERE id = \(appId) RETURNING id
            """
        ).isEmpty
    }

    public func updateAppFileLimit(appId: String, maxFileBytes: Int64?) async throws -> Bool {
        try await !rows("UPDATE apps SET max_file_bytes = \(maxFileBytes) WHERE id = \(appId) RETURNING id").isEmpty
    }

    public func users(appId: String, after: String?, limit: Int) async throws -> [User] {
        try await rows(
            """
            SELECT \(unescaped: Self.userColumns) FROM users
            WHERE app_id = \(appId) AND (\(after)::text IS NULL OR uid > \(after)) ORDER BY uid LIMIT \(limit)
            """
        ).map(Self.user)
    }

    public func appConversations(appId: String, beforePK: Int64?, limit: Int) async throws -> [ConversationRow] {
        try await rows(
            """
            SELECT \(unescaped: Self.conversationColumns("c")) FROM conversations c
            WHERE c.app_id = \(appId) AND c.deleted_at IS NULL AND (\(beforePK)::bigint IS NULL OR c.pk < \(beforePK))
            ORDER BY c.pk DESC LIMIT \(limit)
            """
        ).map { try Self.conversationRow($0) }
    }

    public func appCounts(appId: String) async throws -> AppCounts {
        let row = try await rows(
            """
            SELECT (SELECT count(*) FROM users WHERE app_id = \(appId)),
                (SELECT count(*) FROM conversations WHERE app_id = \(appId) AND deleted_at IS NULL)
            """
        ).first
        guard let row else { return AppCounts(users: 0, conversations: 0) }
        let (users, conversations) = try row.decode((Int64, Int64).self)
        return AppCounts(users: Int(users), conversations: Int(conversations))
    }
}
