import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import ParleyProtocol
import ParleyStore
import PostgresNIO

/// Storage in PostgreSQL (postgres-nio): several server nodes may write to one database at once.
///
/// ## Lifecycle
/// ``connect(url:logger:timeout:maximumConnections:)`` checks the database with one direct connection (so that a
/// wrong password, an unknown database or an unreachable server fails within `timeout` with a clear
/// ``PostgresStoreError``, instead of postgres-nio's pool retrying forever), migrates the schema on it, then starts
/// a `PostgresClient` pool whose `run()` goes in a task the store owns. ``close()`` cancels that task, which closes
/// every connection; the server's `ParleyApplication` calls it at the end of a graceful shutdown.
///
/// ```swift
/// let store = try await PostgresStore.connect(url: "postgres://parley:secret@127.0.0.1:5432/parley")
/// defer { Task { try await store.close() } }
/// ```
///
/// ## Several writers
/// Each batch of ``apply(_:)`` runs in one transaction that locks the rows of the conversations it changes
/// (`SELECT ... FOR NO KEY UPDATE`, in primary-key order) before reading their `last_seq`, and the rows of the users
/// whose membership stream it extends. Sequence numbers of a conversation, and positions of a user's stream, are
/// therefore assigned and committed in the same order: a reader never sees seq N+1 while N is still invisible.
/// See docs/ARCHITECTURE.md ("Storage").
public final class PostgresStore: ParleyStore {
    /// Where the store is connected (the password is never shown).
    public let url: PostgresDatabaseURL
    let client: PostgresClient
    let logger: Logger
    /// Runs `client.run()`: the pool works only while it runs; cancelling it closes the pool.
    private let running: Task<Void, Never>
    /// The pool's size.
    let maximumConnections: Int
    /// Operations under way, and failed since the start (``activity``).
    private let counters = NIOLockedValueBox((inFlight: 0, failures: 0))

    private init(url: PostgresDatabaseURL, client: PostgresClient, maximumConnections: Int, logger: Logger) {
        self.url = url
        self.client = client
        self.maximumConnections = maximumConnections
        self.logger = logger
        // Detached: the pool must not inherit its creator's task-locals. Under swift-service-lifecycle those include
        // the graceful-shutdown context, and `run()` would then stop at the start of a shutdown, before the command
        // writer has committed what is queued. The pool ends when `close()` cancels this task, and only then.
        running = Task.detached { await client.run() }
    }

    deinit {
        running.cancel()
    }

    /// Connects to the database at `url`, migrates its schema, and returns a running store.
    ///
    /// - Parameters:
    ///   - url: A `postgres://user:password@host:port/database` URL (see ``PostgresDatabaseURL``).
    ///   - logger: Where the store and the pool log (postgres-nio logs connection failures at `info`).
    ///   - timeout: How long the first connection may take before start-up fails.
    ///   - maximumConnections: The size of the pool.
    ///   - migrate: Whether to bring the schema up to date (true but for tests of migrations).
    /// - Throws: ``PostgresStoreError``: `ERR_DATABASE_URL`, `ERR_DATABASE_UNREACHABLE`,
    ///   `ERR_DATABASE_AUTHENTICATION`, `ERR_DATABASE_NOT_FOUND`, `ERR_DATABASE_MIGRATION`.
    public static func connect(
        url: String, logger: Logger = Logger(label: "parley.postgres"), timeout: Duration = .seconds(10),
        maximumConnections: Int = 20, migrate: Bool = true
    ) async throws -> PostgresStore {
        try await connect(
            url: PostgresDatabaseURL(url), logger: logger, timeout: timeout, maximumConnections: maximumConnections,
            migrate: migrate
        )
    }

    /// Connects to the database at `url`, migrates its schema, and returns a running store.
    public static func connect(
        url: PostgresDatabaseURL, logger: Logger = Logger(label: "parley.postgres"), timeout: Duration = .seconds(10),
        maximumConnections: Int = 20, migrate: Bool = true
    ) async throws -> PostgresStore {
        try await connect(
            url: url, logger: logger, timeout: timeout, maximumConnections: maximumConnections, migrate: migrate,
            clock: ContinuousClock()
        )
    }

    /// ``connect(url:logger:timeout:maximumConnections:migrate:)`` with `timeout` measured on `clock` (tests pass a
    /// clock that moves only when they say so). The TCP connection's own timeout (postgres-nio's) stays in real time.
    public static func connect<C: Clock<Duration>>(
        url: PostgresDatabaseURL, logger: Logger = Logger(label: "parley.postgres"), timeout: Duration = .seconds(10),
        maximumConnections: Int = 20, migrate: Bool = true, clock: C
    ) async throws -> PostgresStore {
        let deadline = clock.now.advanced(by: timeout)
        let connectionConfiguration = try url.connectionConfiguration(connectTimeout: timeout)
        let connection = try await withDeadline(deadline, on: clock, url: url) {
            do {
                return try await PostgresConnection.connect(
                    configuration: connectionConfiguration, id: 0, logger: logger
                )
            } catch {
                throw PostgresStoreError.connecting(to: url, error)
            }
        }
        do {
            if migrate {
                do {
                    try await Self.migrate(connection, logger: logger)
                } catch let error as PostgresStoreError {
                    throw error
                } catch {
                    throw PostgresStoreError(
                        .migrationFailed, "Migrating the schema of \(url) failed: \(Self.describe(error)).",
                        sqlState: (error as? PSQLError)?.sqlState, underlying: error
                    )
                }
            }
            try await connection.close()
        } catch {
            try? await connection.close()
            throw error
        }

        let client = PostgresClient(
            configuration: try url.clientConfiguration(maximumConnections: maximumConnections), backgroundLogger: logger
        )
        let store = PostgresStore(url: url, client: client, maximumConnections: maximumConnections, logger: logger)
        do {
            try await withDeadline(deadline, on: clock, url: url) { try await store.checkHealth() }
        } catch {
            try? await store.close()
            throw error
        }
        logger.info("Connected to PostgreSQL at \(url)")
        return store
    }

    public func checkHealth() async throws {
        _ = try await client.query("SELECT 1", logger: logger).collect()
    }

    public func close() async throws {
        running.cancel()
        await running.value
    }

    /// A short, secret-free description of a database failure: SQLSTATE and message for server errors.
    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let state = error.sqlState { return "SQLSTATE \(state): \(error.serverInfo?[.message] ?? "")" }
            return "\(error.code)"
        }
        return "\(error)"
    }

    // MARK: Queries

    /// How long an operation waits for a connection from the pool before it fails (``PoolLease``).
    static let leaseTimeout: TimeAmount = .seconds(30)

    /// Runs `body` on one leased connection.
    func withSession<T: Sendable>(_ body: @escaping @Sendable (PostgresSession) async throws -> T) async throws -> T {
        try await tracked {
            try await PoolLease.run(
                on: client, timeout: Self.leaseTimeout,
                timeoutError: PostgresStoreError(
                    .database, "No connection from the pool within \(Self.leaseTimeout.nanoseconds / 1_000_000_000) s.")
            ) { [logger] connection in
                try await body(PostgresSession(connection: connection, logger: logger))
            }
        }
    }

    /// Every row of a query run on any connection of the pool.
    func rows(_ query: PostgresQuery) async throws -> [PostgresRow] {
        try await withSession { try await $0.rows(query) }
    }

    func execute(_ query: PostgresQuery) async throws {
        try await withSession { try await $0.execute(query) }
    }

    /// A network database shared by several nodes: `async` reads and batches only.
    public var capabilities: StoreCapabilities { StoreCapabilities() }

    public var activity: StoreActivity {
        let (inFlight, failures) = counters.withLockedValue { ($0.inFlight, $0.failures) }
        return StoreActivity(inFlight: inFlight, capacity: maximumConnections, failures: failures)
    }

    /// Counts an operation while it runs, and its failure if the database (not a rule) failed it.
    private func tracked<T>(_ work: () async throws -> T) async throws -> T {
        counters.withLockedValue { $0.inFlight += 1 }
        defer { counters.withLockedValue { $0.inFlight -= 1 } }
        do {
            return try await work()
        } catch let refusal as DomainError {
            throw refusal
        } catch {
            counters.withLockedValue { $0.failures += 1 }
            throw error
        }
    }

    // MARK: Apps

    static let appColumns =
        """
        id, name, auth_key_hash, rest_api_key_hash, created_at, allowed_origins, max_file_bytes, user_directory,
        deleted_user_messages
        """

    public func insertApp(_ app: AppRecord) async throws {
        try await execute(
            """
            INSERT INTO apps (id, name, auth_key_hash, rest_api_key_hash, created_at, allowed_origins)
            VALUES (\(app.id), \(app.name), \(ByteBuffer(bytes: app.authKeyHash)), \(ByteBuffer(bytes: app.restAPIKeyHash)),
                \(app.createdAt), \(AppRecord.storedOrigins(app.allowedOrigins)))
            """
        )
    }

    /// The key of the advisory lock that makes "create the default app" one node's job ("parley.firstapp").
    static let firstAppLockKey: Int64 = 0x7061_726C_6579_4131

    public func insertFirstApp(_ app: AppRecord) async throws -> Bool {
        // Nodes starting together on an empty database: the lock makes the second wait, then find the first's app.
        try await withSession { session in
            try await session.transaction {
                try await session.execute("SELECT pg_advisory_xact_lock(\(Self.firstAppLockKey))")
                guard try await session.value("SELECT count(*) FROM apps", as: Int64.self) == 0 else { return false }
                try await session.execute(
                    """
                    INSERT INTO apps (id, name, auth_key_hash, rest_api_key_hash, created_at, allowed_origins)
                    VALUES (\(app.id), \(app.name), \(ByteBuffer(bytes: app.authKeyHash)),
                        \(ByteBuffer(bytes: app.restAPIKeyHash)), \(app.createdAt),
                        \(AppRecord.storedOrigins(app.allowedOrigins)))
                    """
                )
                return true
            }
        }
    }

    public func app(id: String) async throws -> AppRecord? {
        try await rows("SELECT \(unescaped: Self.appColumns) FROM apps WHERE id = \(id)").first.map(Self.appRecord)
    }

    public func app(restAPIKeyHash: [UInt8]) async throws -> AppRecord? {
        try await rows(
            "SELECT \(unescaped: Self.appColumns) FROM apps WHERE rest_api_key_hash = \(ByteBuffer(bytes: restAPIKeyHash))"
        ).first.map(Self.appRecord)
    }

    public func apps() async throws -> [AppRecord] {
        try await rows("SELECT \(unescaped: Self.appColumns) FROM apps ORDER BY created_at, id").map(Self.appRecord)
    }

    public func updateAppKeys(appId: String, authKeyHash: [UInt8], restAPIKeyHash: [UInt8]) async throws -> Bool {
        try await !rows(
            """
            UPDATE apps SET auth_key_hash = \(ByteBuffer(bytes: authKeyHash)),
                rest_api_key_hash = \(ByteBuffer(bytes: restAPIKeyHash))
            WHERE id = \(appId) RETURNING id
            """
        ).isEmpty
    }

    static func appRecord(_ row: PostgresRow) throws -> AppRecord {
        let (id, name, authKeyHash, restAPIKeyHash, createdAt, origins, maxFileBytes, directory, deleted) =
            try row.decode((String, String, ByteBuffer, ByteBuffer, Int64, String, Int64?, String, String).self)
        return AppRecord(
            id: id, name: name, authKeyHash: Array(authKeyHash.readableBytesView),
            restAPIKeyHash: Array(restAPIKeyHash.readableBytesView), createdAt: createdAt,
            allowedOrigins: AppRecord.origins(stored: origins), maxFileBytes: maxFileBytes,
            userDirectory: UserDirectoryVisibility(rawValue: directory) ?? .everyone,
            deletedUserMessages: DeletedUserMessages(rawValue: deleted) ?? .tombstone
        )
    }

    // MARK: Users

    static let userColumns = userColumns(nil)

    /// The columns ``user(_:from:)`` reads, of the users table as `alias`.
    static func userColumns(_ alias: String?) -> String {
        ["uid", "name", "avatar_url", "metadata::text", "created_at", "updated_at", "deactivated_at"]
            .map { column in alias.map { "\($0).\(column)" } ?? column }.joined(separator: ", ")
    }

    public func insertUser(appId: String, _ user: User) async throws {
        guard try await insertUserAndQueue(appId: appId, user) else {
            throw DomainError(.uidAlreadyExists, "A user \(user.uid) already exists.")
        }
    }

    public func ensureUser(appId: String, _ user: User) async throws -> User {
        _ = try await insertUserAndQueue(appId: appId, user)
        return try await self.user(appId: appId, uid: user.uid)!
    }

    /// Inserts the user unless the uid exists, with its `user.create` webhook event; returns whether it was inserted.
    private func insertUserAndQueue(appId: String, _ user: User) async throws -> Bool {
        try await withSession { session in
            try await session.transaction {
                guard try await Self.insertUserIfNew(appId: appId, user, run: session.rows) else { return false }
                try await Self.fileUserWords(session, appId: appId, uid: user.uid, name: user.name)
                try await Self.queueUserEvent(appId: appId, user, name: .userCreate, run: session.rows)
                return true
            }
        }
    }

    public func user(appId: String, uid: String) async throws -> User? {
        try await rows("SELECT \(unescaped: Self.userColumns) FROM users WHERE app_id = \(appId) AND uid = \(uid)")
            .first.map(Self.user)
    }

    public func updateUser(appId: String, uid: String, _ update: UpdateUserRequest, now: Int64) async throws -> User? {
        // One statement: each field keeps its value unless the update sets it.
        let metadata: String? = try update.metadata.flatMap { try Self.json($0) }
        return try await withSession { session in
            try await session.transaction {
                guard
                    let user = try await session.rows(
                        """
                        UPDATE users SET name = COALESCE(\(update.name), name),
                            avatar_url = COALESCE(\(update.avatarURL), avatar_url),
                            metadata = CASE WHEN \(metadata != nil) THEN \(metadata)::jsonb ELSE metadata END,
                            updated_at = \(now)
                        WHERE app_id = \(appId) AND uid = \(uid)
                        RETURNING \(unescaped: Self.userColumns)
                        """
                    ).first.map(Self.user)
                else { return nil }
                if update.name != nil {
                    try await Self.fileUserWords(session, appId: appId, uid: uid, name: user.name)
                }
                try await Self.queueUserEvent(appId: appId, user, name: .profileUpdate, run: session.rows)
                return user
            }
        }
    }

    /// Inserts the user unless the uid exists; returns whether it was inserted.
    static func insertUserIfNew(
        appId: String, _ user: User, run: (PostgresQuery) async throws -> [PostgresRow]
    ) async throws -> Bool {
        let metadata = try json(user.metadata)
        return try await !run(
            """
            INSERT INTO users (app_id, uid, name, avatar_url, metadata, created_at, updated_at)
            VALUES (\(appId), \(user.uid), \(user.name), \(user.avatarURL), \(metadata)::jsonb,
                \(user.createdAt), \(user.updatedAt))
            ON CONFLICT DO NOTHING RETURNING uid
            """
        ).isEmpty
    }

    static func user(_ row: PostgresRow) throws -> User {
        try user(row.makeRandomAccess(), from: 0)
    }

    /// The user in ``userColumns(_:)`` from column `index` of `columns` on.
    static func user(_ columns: PostgresRandomAccessRow, from index: Int) throws -> User {
        User(
            uid: try columns[index].decode(String.self), name: try columns[index + 1].decode(String.self),
            avatarURL: try columns[index + 2].decode(String?.self),
            metadata: try jsonValue(try columns[index + 3].decode(String?.self)),
            createdAt: try columns[index + 4].decode(Int64.self), updatedAt: try columns[index + 5].decode(Int64.self),
            deactivatedAt: try columns[index + 6].decode(Int64?.self)
        )
    }

    public func setUserDeactivated(appId: String, uid: String, deactivated: Bool, now: Int64) async throws -> User? {
        try await withSession { session in
            try await session.transaction {
                let changed = try await session.rows(
                    """
                    UPDATE users SET deactivated_at = CASE WHEN \(deactivated) THEN \(now)::bigint END
                    WHERE app_id = \(appId) AND uid = \(uid) AND (deactivated_at IS NULL) = \(deactivated)
                    RETURNING \(unescaped: Self.userColumns)
                    """
                ).first.map(Self.user)
                if let changed {
                    try await Self.queueUserEvent(
                        appId: appId, changed, name: deactivated ? .userDeactivate : .userReactivate, at: now,
                        run: session.rows)
                    return changed
                }
                return try await session.rows(
                    "SELECT \(unescaped: Self.userColumns) FROM users WHERE app_id = \(appId) AND uid = \(uid)"
                ).first.map(Self.user)
            }
        }
    }

    // MARK: Tokens

    static let tokenColumns = "id, hash, app_id, uid, created_at, expires_at, revoked_at"

    public func insertToken(_ token: TokenRecord) async throws {
        try await execute(
            """
            INSERT INTO auth_tokens (hash, id, app_id, uid, created_at, expires_at, revoked_at)
            VALUES (\(ByteBuffer(bytes: token.hash)), \(token.id), \(token.appId), \(token.uid), \(token.createdAt),
                \(token.expiresAt), \(token.revokedAt))
            """
        )
    }

    public func token(hash: [UInt8]) async throws -> TokenRecord? {
        try await rows(
            "SELECT \(unescaped: Self.tokenColumns) FROM auth_tokens WHERE hash = \(ByteBuffer(bytes: hash))"
        )
        .first.map(Self.tokenRecord)
    }

    public func tokens(appId: String, uid: String, now: Int64) async throws -> [TokenRecord] {
        try await rows(
            """
            SELECT \(unescaped: Self.tokenColumns) FROM auth_tokens
            WHERE app_id = \(appId) AND uid = \(uid) AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > \(now))
            ORDER BY created_at, id
            """
        ).map(Self.tokenRecord)
    }

    public func revokeToken(appId: String, uid: String, tokenId: String, now: Int64) async throws -> TokenRecord? {
        try await rows(
            """
            UPDATE auth_tokens SET revoked_at = \(now)
            WHERE app_id = \(appId) AND uid = \(uid) AND id = \(tokenId) AND revoked_at IS NULL
            RETURNING \(unescaped: Self.tokenColumns)
            """
        ).first.map(Self.tokenRecord)
    }

    public func revokeTokens(appId: String, uid: String, now: Int64) async throws -> [String] {
        try await rows(
            """
            UPDATE auth_tokens SET revoked_at = \(now) WHERE app_id = \(appId) AND uid = \(uid) AND revoked_at IS NULL
            RETURNING id
            """
        ).map { try $0.decode(String.self) }.sorted()
    }

    static func tokenRecord(_ row: PostgresRow) throws -> TokenRecord {
        let (id, hash, appId, uid, createdAt, expiresAt, revokedAt) = try row.decode(
            (String, ByteBuffer, String, String, Int64, Int64?, Int64?).self
        )
        return TokenRecord(
            id: id, hash: Array(hash.readableBytesView), appId: appId, uid: uid, createdAt: createdAt,
            expiresAt: expiresAt, revokedAt: revokedAt
        )
    }

    // MARK: Conversations (reads)

    /// The columns ``conversationRow(_:at:)`` decodes, for a table alias.
    static func conversationColumns(_ alias: String = "conversations") -> String {
        [
            "pk", "id", "app_id", "type", "name", "description", "is_public", "metadata::text", "created_by",
            "created_at",
            "updated_at", "last_seq", "participant_count", "deleted_at", "last_activity_at", "roles",
        ]
        .map { "\(alias).\($0)" }.joined(separator: ", ")
    }

    static let conversationColumnCount = 16

    public func conversation(appId: String, id: String, viewer: String) async throws -> (
        ConversationRow, ParticipantRole?
    )? {
        try await rows(
            """
            SELECT \(unescaped: Self.conversationColumns("c")), p.role
            FROM conversations c LEFT JOIN participants p ON p.conversation_pk = c.pk AND p.uid = \(viewer)
            WHERE c.id = \(id) AND c.app_id = \(appId)
            """
        ).first.map { row in
            let role = try row.makeRandomAccess()[Self.conversationColumnCount].decode(String?.self)
            return (try Self.conversationRow(row), role.flatMap(ParticipantRole.init(rawValue:)))
        }
    }

    public func conversations(appId: String, uid: String, query: ConversationQuery) async throws -> [ConversationRow] {
        let select = """
            SELECT \(Self.conversationColumns("c")) FROM participants p JOIN conversations c ON c.pk = p.conversation_pk
            WHERE p.uid = $1 AND c.app_id = $2 AND c.deleted_at IS NULL
            """
        var binds = PostgresBindings(capacity: 5)
        binds.append(uid)
        binds.append(appId)
        binds.append(query.limit)
        var sql = select
        if let after = query.after {
            sql += " AND (c.last_activity_at < $4 OR (c.last_activity_at = $4 AND c.pk < $5))"
            binds.append(after.lastActivityAt)
            binds.append(after.conversationPK)
        }
        sql += " ORDER BY c.last_activity_at DESC, c.pk DESC LIMIT $3"
        return try await rows(PostgresQuery(unsafeSQL: sql, binds: binds)).map { try Self.conversationRow($0) }
    }

    public func participants(appId: String, conversationId: String) async throws -> [Participant] {
        try await rows(
            """
            SELECT \(unescaped: Self.participantColumns("p")) FROM participants p
            JOIN conversations c ON c.pk = p.conversation_pk
            WHERE c.id = \(conversationId) AND c.app_id = \(appId) ORDER BY p.joined_at, p.uid
            """
        ).map(Self.participant)
    }

    public func unread(appId: String, uid: String, conversationIds: [String]?) async throws -> UnreadSummary {
        // The user's participations drive the loop, each looking its conversation up by key: `OFFSET 0` keeps the
        // planner from flattening the subquery. With a plain JOIN on tables never analyzed (a new deployment, the
        // benchmarks), PostgreSQL walked every conversation of the app and probed each for the user: 2.3 ms for an
        // app of 2,000 conversations against 0.14 ms (EXPLAIN ANALYZE), on every unread push.
        // Conversations asked for by id: each looked up by its unique id, then the participant by key.
        let rows =
            if let conversationIds {
                try await rows(
                    """
                    SELECT \(unescaped: Self.unreadColumns)
                    FROM conversations c JOIN participants p ON p.conversation_pk = c.pk AND p.uid = \(uid)
                    WHERE c.id = ANY(\(Array(Set(conversationIds)))) AND c.app_id = \(appId) AND c.deleted_at IS NULL
                    """
                )
            } else {
                try await rows(
                    """
                    SELECT \(unescaped: Self.unreadColumns)
                    FROM participants p CROSS JOIN LATERAL (
                        SELECT * FROM conversations c
                        WHERE c.pk = p.conversation_pk AND c.app_id = \(appId) AND c.deleted_at IS NULL OFFSET 0
                    ) c
                    WHERE p.uid = \(uid)
                    """
                )
            }
        var total = 0
        var conversations: [ConversationUnread] = []
        for row in rows {
            let (id, lastSeq, messageCount, readSeq, readMessageCount, deletedUnread) = try row.decode(
                (String, Int64, Int64, Int64, Int64, Int64).self
            )
            // Messages after the read position, less the deleted ones among them.
            let count = max(0, Int(messageCount - readMessageCount - deletedUnread))
            total += count
            conversations.append(
                ConversationUnread(conversationId: id, unread: count, readSeq: readSeq, lastSeq: lastSeq))
        }
        return UnreadSummary(
            total: total, conversations: conversations.sorted { $0.conversationId < $1.conversationId })
    }

    /// One statement for every request: the conversations asked for by id (each looked up by its unique id, then the
    /// participant by key), and every conversation of the users read whole (their participations driving the loop, as
    /// in ``unread(appId:uid:conversationIds:)``). The unread notifier pushed each user with a statement of its own
    /// before: most of PostgreSQL's statements per message under `parley-bench rooms`, each parsed and planned anew.
    public func unread(_ requests: [UnreadRequest]) async throws -> [UnreadSummary] {
        guard !requests.isEmpty else { return [] }
        var someIndex: [Int64] = []
        var someApp: [String] = []
        var someUid: [String] = []
        var someConversation: [String] = []
        var wholeIndex: [Int64] = []
        var wholeApp: [String] = []
        var wholeUid: [String] = []
        for (index, request) in requests.enumerated() {
            if request.everyConversation {
                wholeIndex.append(Int64(index))
                wholeApp.append(request.appId)
                wholeUid.append(request.uid)
            } else {
                for id in Set(request.conversationIds) {
                    someIndex.append(Int64(index))
                    someApp.append(request.appId)
                    someUid.append(request.uid)
                    someConversation.append(id)
                }
            }
        }
        let query = Self.unreadQuery(someIndex, someApp, someUid, someConversation, wholeIndex, wholeApp, wholeUid)
        let rows = try await withSession { session in try await session.rows(query, as: UnreadCounts.self) }
        var totals = Array(repeating: 0, count: requests.count)
        var conversations = Array(repeating: [ConversationUnread](), count: requests.count)
        for row in rows {
            let (index, id, lastSeq, messageCount, readSeq, readMessageCount, deletedUnread) = try row.decode(
                (Int64, String, Int64, Int64, Int64, Int64, Int64).self
            )
            guard index >= 0, index < Int64(requests.count) else { continue }
            let count = max(0, Int(messageCount - readMessageCount - deletedUnread))
            totals[Int(index)] += count
            conversations[Int(index)].append(
                ConversationUnread(conversationId: id, unread: count, readSeq: readSeq, lastSeq: lastSeq))
        }
        return (0..<requests.count).map { index in
            UnreadSummary(
                total: totals[index],
                conversations: conversations[index].sorted { $0.conversationId < $1.conversationId })
        }
    }

    /// The counts of ``unread(_:)``: the conversations asked for (`some...`) and every conversation of the users read
    /// whole (`whole...`), each row with the index of its request. The list drives the loop and every row is found by
    /// key (`LATERAL`, `OFFSET 0` so that the planner keeps it): joined as sets, the generic plan hashed every
    /// conversation and every participant of the database (17 ms for 113 rows among 10,000 participants).
    static func unreadQuery(
        _ someIndex: [Int64], _ someApp: [String], _ someUid: [String], _ someConversation: [String],
        _ wholeIndex: [Int64], _ wholeApp: [String], _ wholeUid: [String]
    ) -> PostgresQuery {
        """
        SELECT r.i, \(unescaped: Self.unreadColumns)
        FROM unnest(\(someIndex), \(someApp), \(someUid), \(someConversation)) AS r(i, app_id, uid, conversation_id)
        CROSS JOIN LATERAL (
            SELECT * FROM conversations c
            WHERE c.id = r.conversation_id AND c.app_id = r.app_id AND c.deleted_at IS NULL OFFSET 0
        ) c
        CROSS JOIN LATERAL (
            SELECT * FROM participants p WHERE p.conversation_pk = c.pk AND p.uid = r.uid OFFSET 0
        ) p
        UNION ALL
        SELECT r.i, \(unescaped: Self.unreadColumns)
        FROM unnest(\(wholeIndex), \(wholeApp), \(wholeUid)) AS r(i, app_id, uid)
        CROSS JOIN LATERAL (SELECT * FROM participants p WHERE p.uid = r.uid OFFSET 0) p
        CROSS JOIN LATERAL (
            SELECT * FROM conversations c
            WHERE c.pk = p.conversation_pk AND c.app_id = r.app_id AND c.deleted_at IS NULL OFFSET 0
        ) c
        """
    }

    enum UnreadCounts: PreparedSQL { static let sql = unreadQuery([], [], [], [], [], [], []).sql }

    /// What ``unread(appId:uid:conversationIds:)`` reads of a conversation `c` and its participant `p`.
    private static let unreadColumns = """
        c.id, c.last_seq, c.message_count, p.read_seq, p.read_message_count,
            CASE WHEN c.deleted_message_count = 0 THEN 0 ELSE (
                SELECT count(*) FROM deleted_messages d
                WHERE d.conversation_pk = c.pk AND d.message_index > p.read_message_count
            ) END
        """

    public func contacts(appId: String, uid: String) async throws -> [String] {
        try await contacts(of: [UserRef(appId: appId, uid: uid)])[0]
    }

    /// One query per app for the whole list (the arrivals of a reconnection storm asked one at a time were the most
    /// frequent statement in PostgreSQL during `parley-bench rooms`). The user's participations drive the loop (see
    /// ``unread(appId:uid:conversationIds:)``), and each conversation's other participants are found by key: joined
    /// as a set, the planner hashed every participant of the database for each turn of arrivals (8 ms for two users
    /// among 10,000 participants, and growing with the table).
    public func contacts(of users: [UserRef]) async throws -> [[String]] {
        var found: [UserRef: [String]] = [:]
        for (appId, members) in Dictionary(grouping: Set(users), by: \.appId) {
            let query = Self.contactsQuery(appId: appId, uids: members.map(\.uid))
            let rows = try await withSession { session in try await session.rows(query, as: Contacts.self) }
            for row in rows {
                let (uid, contact) = try row.decode((String, String).self)
                found[UserRef(appId: appId, uid: uid), default: []].append(contact)
            }
        }
        return users.map { found[$0] ?? [] }
    }

    static func contactsQuery(appId: String, uids: [String]) -> PostgresQuery {
        """
        SELECT DISTINCT mine.uid, other.uid FROM participants mine
        CROSS JOIN LATERAL (
            SELECT c.pk FROM conversations c
            WHERE c.pk = mine.conversation_pk AND c.app_id = \(appId) AND c.deleted_at IS NULL OFFSET 0
        ) c
        CROSS JOIN LATERAL (
            SELECT o.uid FROM participants o WHERE o.conversation_pk = mine.conversation_pk AND o.uid <> mine.uid OFFSET 0
        ) other
        WHERE mine.uid = ANY(\(uids))
        AND NOT EXISTS (
            SELECT 1 FROM blocks b WHERE b.app_id = \(appId) AND b.blocker = other.uid AND b.blocked = mine.uid
        )
        """
    }

    enum Contacts: PreparedSQL { static let sql = contactsQuery(appId: "", uids: []).sql }

    public func activeParticipants(appId: String, conversationId: String) async throws -> [String]? {
        // One statement (one snapshot): the conversation, then its participants when it is not deleted.
        let rows = try await rows(
            """
            SELECT c.deleted_at IS NULL, p.uid FROM conversations c
            LEFT JOIN participants p ON p.conversation_pk = c.pk AND c.deleted_at IS NULL
            WHERE c.id = \(conversationId) AND c.app_id = \(appId)
            """
        )
        guard let first = rows.first, try first.decode(Bool.self) else { return nil }
        return try rows.compactMap { try $0.makeRandomAccess()[1].decode(String?.self) }
    }

    // MARK: Resume

    public func events(appId: String, conversationId: String, afterSeq: Int64, limit: Int) async throws
        -> [StoredEvent]
    {
        let rows = try await rows(
            """
            SELECT e.body FROM events e JOIN conversations c ON c.pk = e.conversation_pk
            WHERE c.id = \(conversationId) AND c.app_id = \(appId) AND e.seq > \(afterSeq)
            ORDER BY e.seq LIMIT \(limit)
            """
        )
        let decoder = JSONDecoder()
        return try rows.map { row in
            let json = Array(try row.decode(ByteBuffer.self).readableBytesView)
            return StoredEvent(event: try decoder.decode(Event.self, from: Data(json)), json: json)
        }
    }

    public func membershipChanges(appId: String, uid: String, afterUserSeq: Int64, limit: Int) async throws
        -> [MembershipChange]
    {
        try await rows(
            """
            SELECT m.user_seq, c.id, m.joined, m.seq FROM memberships m JOIN conversations c ON c.pk = m.conversation_pk
            WHERE m.app_id = \(appId) AND m.uid = \(uid) AND m.user_seq > \(afterUserSeq) ORDER BY m.user_seq LIMIT \(limit)
            """
        ).map { row in
            let (userSeq, conversationId, joined, seq) = try row.decode((Int64, String, Bool, Int64).self)
            return MembershipChange(userSeq: userSeq, conversationId: conversationId, joined: joined, seq: seq)
        }
    }

    public func streamPositions(appId: String, uid: String) async throws -> StreamPositions {
        // One statement, so the user's position and the conversations' agree (one snapshot). The user's participations
        // drive the loop (see ``unread(appId:uid:conversationIds:)``): joined as a set, the planner hashed every
        // conversation of the app for each arrival, 3-5 ms per connection under `parley-bench rooms`.
        let rows = try await rows(
            """
            SELECT COALESCE((SELECT last_user_seq FROM users WHERE app_id = \(appId) AND uid = \(uid)), 0), c.id, c.last_seq
            FROM (SELECT 1) one
            LEFT JOIN (
                participants p CROSS JOIN LATERAL (
                    SELECT c.id, c.last_seq FROM conversations c
                    WHERE c.pk = p.conversation_pk AND c.app_id = \(appId) OFFSET 0
                ) c
            ) ON p.uid = \(uid)
            """
        )
        var userSeq: Int64 = 0
        var conversations: [String: Int64] = [:]
        for row in rows {
            let (position, id, lastSeq) = try row.decode((Int64, String?, Int64?).self)
            userSeq = position
            if let id, let lastSeq { conversations[id] = lastSeq }
        }
        return StreamPositions(userSeq: userSeq, conversations: conversations)
    }

    // MARK: Rows

    static func conversationRow(_ row: PostgresRow) throws -> ConversationRow {
        let (
            pk, id, appId, type, name, description, isPublic, metadata, createdBy, createdAt, updatedAt, lastSeq,
            participantCount, deletedAt, lastActivityAt, roles
        ) = try row.decode(
            (
                Int64, String, String, String, String?, String?, Bool, String?, String, Int64, Int64, Int64, Int64,
                Int64?, Int64, String?
            ).self
        )
        let conversation = Conversation(
            id: id, type: ConversationType(rawValue: type) ?? .group, name: name, description: description,
            isPublic: isPublic, metadata: try jsonValue(metadata), createdBy: createdBy, createdAt: createdAt,
            updatedAt: updatedAt, lastSeq: lastSeq, participantCount: Int(participantCount), deletedAt: deletedAt,
            roles: try ConversationRoles(storedJSON: roles)
        )
        return ConversationRow(
            pk: pk, appId: appId, conversation: conversation, lastActivityAt: lastActivityAt, deletedAt: deletedAt
        )
    }

    static func participantColumns(_ alias: String = "participants") -> String {
        ["uid", "role", "joined_at", "delivered_seq", "read_seq", "muted", "muted_until"].map { "\(alias).\($0)" }
            .joined(separator: ", ")
    }

    static func participant(_ row: PostgresRow) throws -> Participant {
        let (uid, role, joinedAt, deliveredSeq, readSeq, muted, mutedUntil) = try row.decode(
            (String, String, Int64, Int64, Int64, Bool, Int64?).self
        )
        return Participant(
            uid: uid, role: ParticipantRole(rawValue: role) ?? .member, joinedAt: joinedAt, deliveredSeq: deliveredSeq,
            readSeq: readSeq, muted: muted ? true : nil, mutedUntil: mutedUntil
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

/// Runs `body`, or fails with `ERR_DATABASE_UNREACHABLE` at `deadline` on `clock` without waiting for it to notice.
///
/// postgres-nio's pool waits for a connection as long as it takes (it retries a refused login forever); start-up must
/// not. At the deadline the body's task is cancelled and this returns at once.
func withDeadline<T: Sendable, C: Clock<Duration>>(
    _ deadline: C.Instant, on clock: C, url: PostgresDatabaseURL, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let race = DeadlineRace<T>()
    let work = Task {
        do { race.finish(.success(try await body())) } catch { race.finish(.failure(error)) }
    }
    let timer = Task {
        try? await clock.sleep(until: deadline, tolerance: nil)
        race.finish(
            .failure(
                PostgresStoreError(
                    .unreachable, "No answer from PostgreSQL at \(url.endpoint) before the start-up timeout."))
        )
    }
    defer {
        work.cancel()
        timer.cancel()
    }
    return try await withTaskCancellationHandler {
        try await race.value()
    } onCancel: {
        race.finish(.failure(CancellationError()))
    }
}

/// The first of several outcomes, handed to one waiter.
private final class DeadlineRace<T: Sendable>: Sendable {
    private struct State {
        var result: Result<T, any Error>?
        var waiter: CheckedContinuation<T, any Error>?
    }
    private let state = NIOLockedValueBox(State())

    func finish(_ result: Result<T, any Error>) {
        let waiter = state.withLockedValue { state -> CheckedContinuation<T, any Error>? in
            guard state.result == nil else { return nil }
            state.result = result
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(with: result)
    }

    func value() async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let result = state.withLockedValue { state -> Result<T, any Error>? in
                if state.result == nil { state.waiter = continuation }
                return state.result
            }
            if let result { continuation.resume(with: result) }
        }
    }
}
