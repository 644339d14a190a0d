import Foundation
import GRDB
import ParleyProtocol
import ParleyStore

/// Storage in one SQLite file in WAL mode (GRDB `DatabasePool`): reads run concurrently with the single writer.
public final class SQLiteStore: ParleyStore {
    let pool: DatabasePool
    /// The writer connection's page cache (SQLite allocates it as pages are used).
    ///
    /// Not larger: every write transaction that splits B-tree pages out of order (most batches of `parley-bench
    /// rooms`, whose messages land in the middle of the events table) gives a page the temporary number of the
    /// 1 GiB "pending byte" page (`balance_nonroot`), and SQLite then ends the transaction by walking every page in
    /// the cache (`pcache1Truncate`, until the database passes 1 GiB). With 32 MiB that walk was 14% of the writer's
    /// time in `rooms`; 4 MiB measured 488-491 µs of server CPU per message there against 520-539 µs (p99 5.8-6.6 ms
    /// against 13.6-25 ms), and `persist` the same either way (35,000-44,000 messages/s).
    static let writerCacheKiB = 4 * 1024
    /// WAL pages after which a commit checkpoints, while the store opens (migrations).
    static let walCheckpointPages = 10_000
    /// WAL frames after which the checkpointer copies the WAL back (see ``WALCheckpointer``): 64 MiB of 4 KiB pages.
    ///
    /// A checkpoint copies each page once, however many frames of it the WAL holds, and the writer keeps rewriting the
    /// same pages (the newest leaves of every active conversation and of its indexes, `conversations`, the senders'
    /// `participants` rows). In `parley-bench rooms` 2,000 × 5 at 2,000 msg/s the checkpointer's thread took 38-59 µs
    /// per message with 4,000 frames, and 16-24 µs with 16,000 (32,000 saved nothing more).
    public static let defaultCheckpointThreshold = 16_000
    /// WAL frames past which the checkpointer restarts the WAL, holding the writer off for two `fdatasync`s: twice
    /// ``defaultCheckpointThreshold``, reached only while readers keep the PASSIVE passes from copying everything.
    /// See ``WALCheckpointer``.
    public static let defaultRestartThreshold = 32_000
    /// The WAL file's size after a restart of the WAL.
    static let walSizeLimitBytes = 64 * 1024 * 1024
    let checkpointer: WALCheckpointer
    /// The connections of the inline reads (``InlineReads``), lent to one thread at a time.
    let inlineReaders: InlineReaders
    /// What the writer's batches carry from one to the next (``writeBatch(_:memory:_:)``).
    let writerMemory = WriterMemory()
    /// The data directory's lock, when the store holds it (a server does); released by ``close()``.
    let lock: DataDirectoryLock?
    /// The search index's own file (`SQLiteStore+Search.swift`), written by ``fileSearchIndex(limit:)`` alone.
    let searchIndex: DatabaseQueue

    /// Opens (creating if needed) the database at `path` and migrates it to the current schema.
    ///
    /// - Parameters:
    ///   - checkpointThreshold: WAL frames (pages) after a commit past which ``WALCheckpointer`` copies the WAL back
    ///     into the database, off the writer's thread.
    ///   - restartThreshold: WAL frames past which it also restarts the WAL (at least `checkpointThreshold`).
    ///   - creation: What to do with a file that exists and holds nothing: refused unless told (a file that is not
    ///     Parley's is always refused, with ``SQLiteStoreError``).
    ///   - lock: The data directory's lock, held until ``close()``.
    public init(
        path: String, checkpointThreshold: Int = SQLiteStore.defaultCheckpointThreshold,
        restartThreshold: Int = SQLiteStore.defaultRestartThreshold, creation: DatabaseCreation = .ifMissing,
        lock: DataDirectoryLock? = nil
    ) throws {
        try DatabaseIdentity.check(path: path, creation: creation)
        self.lock = lock
        let searchPath = Self.searchIndexPath(for: path)
        searchIndex = try Self.openOrRemakeSearchIndex(path: searchPath)
        var configuration = Configuration()
        configuration.busyMode = .polling(seconds: 10)
        configuration.prepareDatabase { db in
            // WAL with synchronous=NORMAL is durable across process crashes; a power loss may lose the last
            // transactions but never corrupts the file.
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            guard !db.configuration.readonly else {
                // The search index (`SQLiteStore+Search.swift`), for the readers' searches. Never on the writer: its
                // `BEGIN IMMEDIATE` would take the index's write lock too, and the indexer's filing would hold it off.
                try db.execute(sql: "ATTACH DATABASE ? AS search", arguments: [searchPath])
                return
            }
            // The writer (one connection) touches the end of every active conversation in the (conversation, seq)
            // index, and the filed id tables at random places when clients' ids are not time-ordered: a cache a
            // little larger than SQLite's default 2 MB keeps a large batch of sends from evicting pages it needs again and spilling dirty ones to the WAL before its
            // commit; a much larger one costs a walk through all of it after most commits (see `writerCacheKiB`).
            try db.execute(sql: "PRAGMA cache_size = -\(Self.writerCacheKiB)")
            // Until the checkpointer takes over (after the migrations), SQLite checkpoints on the writer's thread
            // at a commit: every 10,000 pages (~40 MB of WAL) instead of SQLite's 1,000.
            try db.execute(sql: "PRAGMA wal_autocheckpoint = \(Self.walCheckpointPages)")
            // The WAL file keeps the size it once grew to; a restart of the WAL truncates it back to this.
            try db.execute(sql: "PRAGMA journal_size_limit = \(Self.walSizeLimitBytes)")
        }
        pool = try DatabasePool(path: path, configuration: configuration)
        let applied = try pool.read { try Self.migrator.appliedIdentifiers($0) }
        try Self.migrator.migrate(pool)
        try pool.write { try Self.recordRelease($0, after: applied) }
        try pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA application_id = \(DatabaseIdentity.applicationID)")
        }
        try pool.write { db in
            // The webhook trigger exists exactly while an enabled endpoint does; a migration that rebuilt `events`
            // dropped it with the old table.
            try Self.syncWebhookTrigger(db)
            // The log's tail after a crash (or the whole log after the migration to it) is filed before any lookup.
            try Self.indexLogTail(db)
        }
        try Self.matchSearchIndex(searchIndex, to: pool)
        checkpointer = try WALCheckpointer(
            path: path, threshold: checkpointThreshold, restartThreshold: restartThreshold
        )
        inlineReaders = InlineReaders(path: path, configuration: configuration, pool: pool)
        pool.writeWithoutTransaction { db in checkpointer.install(on: db) }
    }

    public var activity: StoreActivity {
        StoreActivity(capacity: pool.configuration.maximumReaderCount + 1)
    }

    /// Reads and batches on the caller's thread; one server at a time on the file.
    public var capabilities: StoreCapabilities {
        StoreCapabilities(
            inlineReads: self, synchronousBatches: self, oneServerAtATime: true, searchFiledAfterCommit: true
        )
    }

    public func checkHealth() async throws {
        _ = try await pool.read { db in try Int.fetchOne(db, sql: "SELECT 1") }
    }

    public func close() async throws {
        inlineReaders.close()
        try checkpointer.close()
        // Everything into the database file, and the WAL emptied: a stopped server's `parley.sqlite` alone holds all
        // its data. SQLite's own checkpoint at the last close does not happen while any other connection has the file
        // open. Not fatal if it fails (a read still running): the WAL keeps what it holds and is replayed at the next
        // open.
        _ = try? await pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
        defer { lock?.release() }
        try pool.close()
        try searchIndex.close()
    }

    // MARK: Apps

    public func insertApp(_ app: AppRecord) async throws {
        try await pool.write { db in try Self.insert(app, in: db) }
    }

    public func insertFirstApp(_ app: AppRecord) async throws -> Bool {
        // One write transaction: SQLite's single writer makes the check and the insert atomic.
        try await pool.write { db in
            guard try Int.fetchOne(db, sql: "SELECT count(*) FROM apps") == 0 else { return false }
            try Self.insert(app, in: db)
            return true
        }
    }

    private static func insert(_ app: AppRecord, in db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO apps (id, name, auth_key_hash, rest_api_key_hash, created_at, allowed_origins)
                VALUES (?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                app.id, app.name, Data(app.authKeyHash), Data(app.restAPIKeyHash), app.createdAt,
                AppRecord.storedOrigins(app.allowedOrigins),
            ]
        )
    }

    public func app(id: String) async throws -> AppRecord? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM apps WHERE id = ?", arguments: [id]).map(Self.appRecord)
        }
    }

    public func app(restAPIKeyHash: [UInt8]) async throws -> AppRecord? {
        try await pool.read { db in
            try Row.fetchOne(
                db, sql: "SELECT * FROM apps WHERE rest_api_key_hash = ?", arguments: [Data(restAPIKeyHash)]
            ).map(Self.appRecord)
        }
    }

    public func apps() async throws -> [AppRecord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM apps ORDER BY created_at, id").map(Self.appRecord)
        }
    }

    public func updateAppKeys(appId: String, authKeyHash: [UInt8], restAPIKeyHash: [UInt8]) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: "UPDATE apps SET auth_key_hash = ?, rest_api_key_hash = ? WHERE id = ?",
                arguments: [Data(authKeyHash), Data(restAPIKeyHash), appId]
            )
            return db.changesCount > 0
        }
    }

    static func appRecord(_ row: Row) -> AppRecord {
        AppRecord(
            id: row["id"], name: row["name"], authKeyHash: [UInt8](row["auth_key_hash"] as Data),
            restAPIKeyHash: [UInt8](row["rest_api_key_hash"] as Data), createdAt: row["created_at"],
            allowedOrigins: AppRecord.origins(stored: row["allowed_origins"]), maxFileBytes: row["max_file_bytes"],
            userDirectory: UserDirectoryVisibility(rawValue: row["user_directory"]) ?? .everyone,
            deletedUserMessages: DeletedUserMessages(rawValue: row["deleted_user_messages"]) ?? .tombstone
        )
    }

    // MARK: Users

    public func insertUser(appId: String, _ user: User) async throws {
        try await pool.write { db in
            guard try Self.insertUserIfNew(db, appId: appId, user) else {
                throw DomainError(.uidAlreadyExists, "A user \(user.uid) already exists.")
            }
        }
    }

    public func ensureUser(appId: String, _ user: User) async throws -> User {
        try await pool.write { db in
            _ = try Self.insertUserIfNew(db, appId: appId, user)
            return try Self.fetchUser(db, appId: appId, uid: user.uid)!
        }
    }

    public func user(appId: String, uid: String) async throws -> User? {
        try await pool.read { db in try Self.fetchUser(db, appId: appId, uid: uid) }
    }

    public func updateUser(appId: String, uid: String, _ update: UpdateUserRequest, now: Int64) async throws -> User? {
        try await pool.write { db in
            guard var user = try Self.fetchUser(db, appId: appId, uid: uid) else { return nil }
            if let name = update.name { user.name = name }
            if let avatar = update.avatarURL { user.avatarURL = avatar }
            if let metadata = update.metadata { user.metadata = metadata }
            user.updatedAt = now
            try db.execute(
                sql:
                    "UPDATE users SET name = ?, avatar_url = ?, metadata = ?, updated_at = ? WHERE app_id = ? AND uid = ?",
                arguments: [user.name, user.avatarURL, try Self.json(user.metadata), now, appId, uid]
            )
            if update.name != nil { try Self.fileUserWords(db, appId: appId, uid: uid, name: user.name) }
            try Self.queueUserEvent(db, appId: appId, user, name: .profileUpdate)
            return user
        }
    }

    static func insertUserIfNew(_ db: Database, appId: String, _ user: User) throws -> Bool {
        try db.execute(
            sql: """
                INSERT INTO users (app_id, uid, name, avatar_url, metadata, created_at, updated_at)
                VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
                """,
            arguments: [
                appId, user.uid, user.name, user.avatarURL, try json(user.metadata), user.createdAt, user.updatedAt,
            ]
        )
        guard db.changesCount > 0 else { return false }
        try fileUserWords(db, appId: appId, uid: user.uid, name: user.name)
        try queueUserEvent(db, appId: appId, user, name: .userCreate)
        return true
    }

    static func fetchUser(_ db: Database, appId: String, uid: String) throws -> User? {
        try fetchUserAndStream(db, appId: appId, uid: uid)?.user
    }

    /// A user and the end of their membership stream (`users.last_user_seq`), in one lookup.
    ///
    /// The hot reads (a WebSocket's handshake, unread counts) name their columns and read them by position from a
    /// cursor on the statement: GRDB's `Row.fetchOne` copies every column of the row, and a column read by name
    /// compares lowercased names, which together cost more than SQLite's lookup itself.
    static func fetchUserAndStream(_ db: Database, appId: String, uid: String) throws
        -> (user: User, lastUserSeq: Int64)?
    {
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT name, avatar_url, metadata, created_at, updated_at, last_user_seq, deactivated_at
                    FROM users WHERE app_id = ? AND uid = ?
                    """
            ),
            arguments: [appId, uid]
        )
        guard let row = try rows.next() else { return nil }
        let user = User(
            uid: uid, name: row[0], avatarURL: row[1], metadata: try jsonValue(row[2]), createdAt: row[3],
            updatedAt: row[4], deactivatedAt: row[6]
        )
        return (user, row[5])
    }

    /// The columns ``user(_:from:)`` reads, of the users table as `alias`.
    static func userColumns(_ alias: String) -> String {
        ["uid", "name", "avatar_url", "metadata", "created_at", "updated_at", "deactivated_at"]
            .map { "\(alias).\($0)" }.joined(separator: ", ")
    }

    /// The user in ``userColumns(_:)`` from column `index` of `row` on.
    static func user(_ row: Row, from index: Int) throws -> User {
        User(
            uid: row[index], name: row[index + 1], avatarURL: row[index + 2],
            metadata: try jsonValue(row[index + 3]), createdAt: row[index + 4], updatedAt: row[index + 5],
            deactivatedAt: row[index + 6]
        )
    }

    public func setUserDeactivated(appId: String, uid: String, deactivated: Bool, now: Int64) async throws -> User? {
        try await pool.write { db in
            try db.execute(
                sql: deactivated
                    ? "UPDATE users SET deactivated_at = ? WHERE app_id = ? AND uid = ? AND deactivated_at IS NULL"
                    : "UPDATE users SET deactivated_at = NULL WHERE app_id = ? AND uid = ? AND deactivated_at IS NOT NULL",
                arguments: deactivated ? [now, appId, uid] : [appId, uid]
            )
            let changed = db.changesCount > 0
            guard let user = try Self.fetchUser(db, appId: appId, uid: uid) else { return nil }
            if changed {
                try Self.queueUserEvent(
                    db, appId: appId, user, name: deactivated ? .userDeactivate : .userReactivate, at: now)
            }
            return user
        }
    }

    // MARK: Tokens

    public func insertToken(_ token: TokenRecord) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO auth_tokens (hash, id, app_id, uid, created_at, expires_at, revoked_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    Data(token.hash), token.id, token.appId, token.uid, token.createdAt, token.expiresAt,
                    token.revokedAt,
                ]
            )
        }
    }

    public func token(hash: [UInt8]) async throws -> TokenRecord? {
        try await pool.read { db in try Self.fetchToken(db, hash: hash) }
    }

    static func fetchToken(_ db: Database, hash: [UInt8]) throws -> TokenRecord? {
        // Columns by position from the statement (see `fetchUserAndStream`): every WebSocket handshake reads this.
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: "SELECT id, app_id, uid, created_at, expires_at, revoked_at FROM auth_tokens WHERE hash = ?"
            ),
            arguments: [Data(hash)]
        )
        guard let row = try rows.next() else { return nil }
        return TokenRecord(
            id: row[0], hash: hash, appId: row[1], uid: row[2], createdAt: row[3], expiresAt: row[4],
            revokedAt: row[5]
        )
    }

    public func tokens(appId: String, uid: String, now: Int64) async throws -> [TokenRecord] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM auth_tokens WHERE app_id = ? AND uid = ? AND revoked_at IS NULL
                    AND (expires_at IS NULL OR expires_at > ?) ORDER BY created_at, id
                    """,
                arguments: [appId, uid, now]
            ).map(Self.tokenRecord)
        }
    }

    public func revokeToken(appId: String, uid: String, tokenId: String, now: Int64) async throws -> TokenRecord? {
        try await pool.write { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: "SELECT * FROM auth_tokens WHERE app_id = ? AND uid = ? AND id = ? AND revoked_at IS NULL",
                    arguments: [appId, uid, tokenId]
                )
            else { return nil }
            try db.execute(sql: "UPDATE auth_tokens SET revoked_at = ? WHERE id = ?", arguments: [now, tokenId])
            var record = Self.tokenRecord(row)
            record.revokedAt = now
            return record
        }
    }

    public func revokeTokens(appId: String, uid: String, now: Int64) async throws -> [String] {
        try await pool.write { db in
            let ids = try String.fetchAll(
                db, sql: "SELECT id FROM auth_tokens WHERE app_id = ? AND uid = ? AND revoked_at IS NULL",
                arguments: [appId, uid]
            )
            try db.execute(
                sql: "UPDATE auth_tokens SET revoked_at = ? WHERE app_id = ? AND uid = ? AND revoked_at IS NULL",
                arguments: [now, appId, uid]
            )
            return ids
        }
    }

    static func tokenRecord(_ row: Row) -> TokenRecord {
        TokenRecord(
            id: row["id"], hash: [UInt8](row["hash"] as Data), appId: row["app_id"], uid: row["uid"],
            createdAt: row["created_at"], expiresAt: row["expires_at"], revokedAt: row["revoked_at"]
        )
    }

    // MARK: Conversations (reads)

    public func conversation(appId: String, id: String, viewer: String) async throws -> (
        ConversationRow, ParticipantRole?
    )? {
        try await pool.read { db in
            guard let row = try Self.fetchConversation(db, appId: appId, id: id) else { return nil }
            return (row, try Self.role(db, conversationPK: row.pk, uid: viewer))
        }
    }

    public func conversations(appId: String, uid: String, query: ConversationQuery) async throws -> [ConversationRow] {
        try await pool.read { db in
            let after = query.after
            return try Row.fetchAll(
                db,
                sql: """
                    SELECT c.* FROM participants p JOIN conversations c ON c.pk = p.conversation_pk
                    WHERE p.uid = ? AND c.app_id = ? AND c.deleted_at IS NULL
                    AND (? IS NULL OR c.last_activity_at < ? OR (c.last_activity_at = ? AND c.pk < ?))
                    ORDER BY c.last_activity_at DESC, c.pk DESC LIMIT ?
                    """,
                arguments: [
                    uid, appId, after?.lastActivityAt, after?.lastActivityAt, after?.lastActivityAt,
                    after?.conversationPK, query.limit,
                ]
            ).map(Self.conversationRow)
        }
    }

    public func participants(appId: String, conversationId: String) async throws -> [Participant] {
        try await pool.read { db in
            guard let row = try Self.fetchConversation(db, appId: appId, id: conversationId) else { return [] }
            return try Self.fetchParticipants(db, conversationPK: row.pk)
        }
    }

    public func unread(appId: String, uid: String, conversationIds: [String]?) async throws -> UnreadSummary {
        try await pool.read { db in try Self.fetchUnread(db, appId: appId, uid: uid, conversationIds: conversationIds) }
    }

    /// ``unread(appId:uid:conversationIds:)`` in `db`, for an ``UnreadRequest``.
    static func fetchUnread(_ db: Database, _ request: UnreadRequest) throws -> UnreadSummary {
        try fetchUnread(
            db, appId: request.appId, uid: request.uid, conversationIds: request.reads,
            maxConversations: request.everyConversation ? request.maxConversations : nil
        )
    }

    /// ``unread(appId:uid:conversationIds:)`` in `db`; a read of every conversation of a user in more than
    /// `maxConversations` throws.
    static func fetchUnread(
        _ db: Database, appId: String, uid: String, conversationIds: [String]?, maxConversations: Int? = nil
    ) throws -> UnreadSummary {
        // Straight from SQLite (``GRDB/Statement/forEachRawRow(_:_:)``): read for every unread push, most of them
        // in the writer's transaction.
        var total = 0
        var conversations: [ConversationUnread] = []
        let add = { (row: RawRow) in
            if let maxConversations, conversations.count >= maxConversations {
                throw DatabaseError(resultCode: .SQLITE_TOOBIG, message: "more than \(maxConversations) conversations")
            }
            // Messages after the read position, less the deleted ones among them.
            let count = max(0, Int(row.int64(2)) - Int(row.int64(4)) - Int(row.int64(5)))
            total += count
            conversations.append(
                ConversationUnread(
                    conversationId: row.string(0), unread: count, readSeq: row.int64(3), lastSeq: row.int64(1))
            )
        }
        let columns = """
            SELECT c.id, c.last_seq, c.message_count, p.read_seq, p.read_message_count,
                CASE WHEN c.deleted_message_count = 0 THEN 0 ELSE (
                    SELECT COUNT(*) FROM deleted_messages d
                    WHERE d.conversation_pk = c.pk AND d.message_index > p.read_message_count
                ) END
            """
        if let conversationIds {
            // A lookup per conversation asked for (by its unique id, then the participant's key).
            let statement = try db.cachedStatement(
                sql: columns + """

                    FROM conversations c CROSS JOIN participants p ON p.conversation_pk = c.pk AND p.uid = ?
                    WHERE c.id = ? AND c.app_id = ? AND c.deleted_at IS NULL
                    """
            )
            for id in Set(conversationIds) {
                try statement.forEachRawRow([.text(uid), .text(id), .text(appId)], add)
            }
        } else {
            // CROSS JOIN keeps the user's participations as the outer loop: with a plain JOIN, SQLite's planner
            // walks every conversation of the app (its (app_id, direct_key) index) and probes each for the user,
            // which made every unread push cost O(conversations in the app).
            try db.cachedStatement(
                sql: columns + """

                    FROM participants p CROSS JOIN conversations c ON c.pk = p.conversation_pk
                    WHERE p.uid = ? AND c.app_id = ? AND c.deleted_at IS NULL
                    """
            ).forEachRawRow([.text(uid), .text(appId)], add)
        }
        return UnreadSummary(
            total: total, conversations: conversations.sorted { $0.conversationId < $1.conversationId })
    }

    public func contacts(appId: String, uid: String) async throws -> [String] {
        try await pool.read { db in try Self.fetchContacts(db, appId: appId, uid: uid) }
    }

    static func fetchContacts(_ db: Database, appId: String, uid: String) throws -> [String] {
        // CROSS JOIN: the user's participations drive the loop (not every conversation of the app).
        try String.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT DISTINCT other.uid FROM participants mine
                    CROSS JOIN conversations c ON c.pk = mine.conversation_pk AND c.app_id = ? AND c.deleted_at IS NULL
                    CROSS JOIN participants other ON other.conversation_pk = mine.conversation_pk
                    WHERE mine.uid = ? AND other.uid != ?
                    AND NOT EXISTS (SELECT 1 FROM blocks b WHERE b.app_id = ? AND b.blocker = other.uid AND b.blocked = ?)
                    """
            ),
            arguments: [appId, uid, uid, appId, uid]
        )
    }

    public func activeParticipants(appId: String, conversationId: String) async throws -> [String]? {
        try await pool.read { db in
            guard let row = try Self.fetchConversation(db, appId: appId, id: conversationId), row.deletedAt == nil
            else {
                return nil
            }
            return try Self.participantUIDs(db, conversationPK: row.pk)
        }
    }

    // MARK: Resume

    public func events(appId: String, conversationId: String, afterSeq: Int64, limit: Int) async throws
        -> [StoredEvent]
    {
        let bodies = try await pool.read { db -> [Data] in
            guard let row = try Self.fetchConversation(db, appId: appId, id: conversationId) else { return [] }
            return try Data.fetchAll(
                db, sql: "SELECT body FROM events WHERE conversation_pk = ? AND seq > ? ORDER BY seq LIMIT ?",
                arguments: [row.pk, afterSeq, limit]
            )
        }
        let decoder = JSONDecoder()
        return try bodies.map { StoredEvent(event: try decoder.decode(Event.self, from: $0), json: [UInt8]($0)) }
    }

    public func membershipChanges(appId: String, uid: String, afterUserSeq: Int64, limit: Int) async throws
        -> [MembershipChange]
    {
        try await pool.read { db in
            try Self.fetchMembershipChanges(db, appId: appId, uid: uid, afterUserSeq: afterUserSeq, limit: limit)
        }
    }

    static func fetchMembershipChanges(_ db: Database, appId: String, uid: String, afterUserSeq: Int64, limit: Int)
        throws -> [MembershipChange]
    {
        try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT m.user_seq, c.id, m.joined, m.seq FROM memberships m
                    JOIN conversations c ON c.pk = m.conversation_pk
                    WHERE m.app_id = ? AND m.uid = ? AND m.user_seq > ? ORDER BY m.user_seq LIMIT ?
                    """
            ),
            arguments: [appId, uid, afterUserSeq, limit]
        ).map { row in MembershipChange(userSeq: row[0], conversationId: row[1], joined: row[2], seq: row[3]) }
    }

    public func streamPositions(appId: String, uid: String) async throws -> StreamPositions {
        try await pool.read { db in try Self.fetchStreamPositions(db, appId: appId, uid: uid) }
    }

    static func fetchStreamPositions(_ db: Database, appId: String, uid: String) throws -> StreamPositions {
        let userSeq =
            try Int64.fetchOne(
                db.cachedStatement(sql: "SELECT last_user_seq FROM users WHERE app_id = ? AND uid = ?"),
                arguments: [appId, uid]
            ) ?? 0
        let conversations = try fetchConversationPositions(db, appId: appId, uid: uid)
        return StreamPositions(userSeq: userSeq, conversations: conversations)
    }

    /// The last sequence number of each conversation the user participates in (by position from a cursor, see
    /// `fetchUserAndStream`).
    static func fetchConversationPositions(_ db: Database, appId: String, uid: String) throws -> [String: Int64] {
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT c.id, c.last_seq FROM participants p CROSS JOIN conversations c
                    ON c.pk = p.conversation_pk WHERE p.uid = ? AND c.app_id = ?
                    """
            ),
            arguments: [uid, appId]
        )
        var conversations: [String: Int64] = [:]
        while let row = try rows.next() { conversations[row[0]] = row[1] }
        return conversations
    }

    static func fetchConversation(_ db: Database, appId: String, id: String) throws -> ConversationRow? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT * FROM conversations WHERE id = ? AND app_id = ?"), arguments: [id, appId]
        ).map(conversationRow)
    }

    static func role(_ db: Database, conversationPK: Int64, uid: String) throws -> ParticipantRole? {
        try String.fetchOne(
            db.cachedStatement(sql: "SELECT role FROM participants WHERE conversation_pk = ? AND uid = ?"),
            arguments: [conversationPK, uid]
        ).flatMap(ParticipantRole.init(rawValue:))
    }

    /// A conversation's participants, in the order they joined. Columns are named and read by position from a cursor
    /// (a group of thousands: `Row.fetchAll` copies each row, and a column read by name compares lowercased names).
    static func fetchParticipants(_ db: Database, conversationPK: Int64) throws -> [Participant] {
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT uid, role, joined_at, delivered_seq, read_seq, muted, muted_until FROM participants
                    WHERE conversation_pk = ? ORDER BY joined_at, uid
                    """
            ),
            arguments: [conversationPK]
        )
        var participants: [Participant] = []
        while let row = try rows.next() {
            participants.append(
                Participant(
                    uid: row[0], role: ParticipantRole(rawValue: row[1]) ?? .member, joinedAt: row[2],
                    deliveredSeq: row[3], readSeq: row[4], muted: (row[5] as Bool) ? true : nil, mutedUntil: row[6]
                ))
        }
        return participants
    }

    static func participant(_ row: Row) -> Participant {
        Participant(
            uid: row["uid"], role: ParticipantRole(rawValue: row["role"]) ?? .member, joinedAt: row["joined_at"],
            deliveredSeq: row["delivered_seq"], readSeq: row["read_seq"], muted: (row["muted"] as Bool) ? true : nil,
            mutedUntil: row["muted_until"]
        )
    }

    static func conversationRow(_ row: Row) throws -> ConversationRow {
        let conversation = Conversation(
            id: row["id"], type: ConversationType(rawValue: row["type"]) ?? .group, name: row["name"],
            description: row["description"], isPublic: row["is_public"], metadata: try jsonValue(row["metadata"]),
            createdBy: row["created_by"], createdAt: row["created_at"], updatedAt: row["updated_at"],
            lastSeq: row["last_seq"], participantCount: row["participant_count"], deletedAt: row["deleted_at"],
            roles: try ConversationRoles(storedJSON: row["roles"])
        )
        return ConversationRow(
            pk: row["pk"], appId: row["app_id"], conversation: conversation,
            lastActivityAt: row["last_activity_at"], deletedAt: row["deleted_at"]
        )
    }

    // MARK: JSON columns

    static func json(_ value: JSONValue?) throws -> String? {
        guard let value else { return nil }
        return String(decoding: try WireCoding.encode(value), as: UTF8.self)
    }

    static func jsonValue(_ text: String?) throws -> JSONValue? {
        guard let text else { return nil }
        return try WireCoding.decode(JSONValue.self, from: Array(text.utf8))
    }
}
