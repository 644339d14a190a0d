import Logging
import ParleyProtocol
import PostgresNIO

/// One step of the PostgreSQL schema. A migration once shipped is never edited, only followed by new ones.
struct PostgresMigration: Sendable {
    var version: Int64
    var name: String
    /// Statements run in order, in the migration's transaction.
    var statements: [String]
    /// Run after the statements, in the same transaction: what SQL alone cannot compute (words Parley folds).
    var then: (@Sendable (PostgresSession) async throws -> Void)?
}

extension PostgresStore {
    /// Every schema step, in order. The same tables as the SQLite store, with PostgreSQL types.
    static let migrations: [PostgresMigration] = [
        PostgresMigration(
            version: 1, name: "tables",
            statements: [
                """
                CREATE TABLE apps (
                    id TEXT PRIMARY KEY,
                    name TEXT NOT NULL,
                    auth_key_hash BYTEA NOT NULL,
                    rest_api_key_hash BYTEA NOT NULL UNIQUE,
                    created_at BIGINT NOT NULL
                )
                """,
                """
                CREATE TABLE users (
                    app_id TEXT NOT NULL REFERENCES apps(id),
                    uid TEXT NOT NULL,
                    name TEXT NOT NULL,
                    avatar_url TEXT,
                    metadata JSONB,
                    created_at BIGINT NOT NULL,
                    updated_at BIGINT NOT NULL,
                    -- The last position of the user's own stream of joins and departures (memberships).
                    last_user_seq BIGINT NOT NULL DEFAULT 0,
                    PRIMARY KEY (app_id, uid)
                )
                """,
                """
                CREATE TABLE auth_tokens (
                    hash BYTEA PRIMARY KEY,
                    id TEXT NOT NULL UNIQUE,
                    app_id TEXT NOT NULL,
                    uid TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT,
                    revoked_at BIGINT,
                    FOREIGN KEY (app_id, uid) REFERENCES users(app_id, uid)
                )
                """,
                "CREATE INDEX auth_tokens_by_user ON auth_tokens(app_id, uid)",
                """
                CREATE TABLE conversations (
                    pk BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    id TEXT NOT NULL UNIQUE,
                    app_id TEXT NOT NULL REFERENCES apps(id),
                    type TEXT NOT NULL,
                    -- The pair of a direct conversation ("uid1\\nuid2", sorted): one conversation per pair.
                    direct_key TEXT,
                    name TEXT,
                    description TEXT,
                    is_public BOOLEAN NOT NULL,
                    metadata JSONB,
                    created_by TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    updated_at BIGINT NOT NULL,
                    -- Assigned under this row's lock: see PostgresStore+Commands.swift.
                    last_seq BIGINT NOT NULL DEFAULT 0,
                    last_activity_at BIGINT NOT NULL,
                    participant_count BIGINT NOT NULL DEFAULT 0,
                    message_count BIGINT NOT NULL DEFAULT 0,
                    deleted_at BIGINT,
                    UNIQUE (app_id, direct_key)
                )
                """,
                """
                CREATE TABLE participants (
                    conversation_pk BIGINT NOT NULL REFERENCES conversations(pk),
                    uid TEXT NOT NULL,
                    role TEXT NOT NULL,
                    joined_at BIGINT NOT NULL,
                    delivered_seq BIGINT NOT NULL DEFAULT 0,
                    read_seq BIGINT NOT NULL DEFAULT 0,
                    -- How many of the conversation's messages read_seq covers (unread = message_count - this).
                    read_message_count BIGINT NOT NULL DEFAULT 0,
                    PRIMARY KEY (conversation_pk, uid)
                )
                """,
                "CREATE INDEX participants_by_user ON participants(uid, conversation_pk)",
                """
                CREATE TABLE events (
                    conversation_pk BIGINT NOT NULL REFERENCES conversations(pk),
                    seq BIGINT NOT NULL,
                    name TEXT NOT NULL,
                    actor TEXT,
                    created_at BIGINT NOT NULL,
                    client_message_id TEXT,
                    -- A message's index among the conversation's messages (1 for the first); NULL for other events.
                    message_index BIGINT,
                    -- The event's JSON exactly as published (encoded once).
                    body BYTEA NOT NULL,
                    PRIMARY KEY (conversation_pk, seq)
                )
                """,
                """
                CREATE UNIQUE INDEX events_by_client_message
                    ON events(conversation_pk, actor, client_message_id) WHERE client_message_id IS NOT NULL
                """,
                """
                CREATE TABLE memberships (
                    app_id TEXT NOT NULL,
                    uid TEXT NOT NULL,
                    user_seq BIGINT NOT NULL,
                    conversation_pk BIGINT NOT NULL REFERENCES conversations(pk),
                    joined BOOLEAN NOT NULL,
                    seq BIGINT NOT NULL,
                    PRIMARY KEY (app_id, uid, user_seq)
                )
                """,
            ]
        ),
        PostgresMigration(
            version: 2, name: "cluster",
            statements: [
                // Recipients of an event read by another node: the joins and departures of a conversation by seq.
                "CREATE INDEX memberships_by_conversation ON memberships (conversation_pk, seq)",
                """
                CREATE TABLE cluster_nodes (
                    node_id TEXT PRIMARY KEY,
                    started_at BIGINT NOT NULL,
                    -- Database time (epoch ms) of the node's last heartbeat.
                    heartbeat_at BIGINT NOT NULL
                )
                """,
                """
                CREATE TABLE presence_sessions (
                    app_id TEXT NOT NULL,
                    uid TEXT NOT NULL,
                    node_id TEXT NOT NULL,
                    PRIMARY KEY (app_id, uid, node_id)
                )
                """,
                "CREATE INDEX presence_sessions_by_node ON presence_sessions (node_id)",
                """
                CREATE TABLE cluster_signals (
                    id BIGSERIAL PRIMARY KEY,
                    body TEXT NOT NULL,
                    created_at BIGINT NOT NULL
                )
                """,
            ]
        ),
        PostgresMigration(
            version: 3, name: "push devices",
            statements: [
                // One row per device of a user; a platform token belongs to at most one device of an app.
                """
                CREATE TABLE devices (
                    app_id TEXT NOT NULL,
                    uid TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    platform TEXT NOT NULL,
                    token TEXT NOT NULL,
                    environment TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    updated_at BIGINT NOT NULL,
                    PRIMARY KEY (app_id, uid, device_id),
                    UNIQUE (app_id, platform, token),
                    FOREIGN KEY (app_id, uid) REFERENCES users(app_id, uid)
                )
                """
            ]
        ),
        PostgresMigration(
            version: 4, name: "push queue",
            statements: [
                // Messages written with push on, in the message's transaction.
                """
                CREATE TABLE push_outbox (
                    id BIGSERIAL PRIMARY KEY,
                    app_id TEXT NOT NULL,
                    conversation_pk BIGINT NOT NULL REFERENCES conversations(pk),
                    seq BIGINT NOT NULL,
                    created_at BIGINT NOT NULL
                )
                """,
                // One notification per device; a node leases the jobs it sends (FOR UPDATE SKIP LOCKED).
                """
                CREATE TABLE push_jobs (
                    id BIGSERIAL PRIMARY KEY,
                    app_id TEXT NOT NULL,
                    uid TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    platform TEXT NOT NULL,
                    token TEXT NOT NULL,
                    environment TEXT NOT NULL,
                    collapse_id TEXT NOT NULL,
                    payload BYTEA NOT NULL,
                    created_at BIGINT NOT NULL,
                    attempts INTEGER NOT NULL,
                    not_before BIGINT NOT NULL,
                    lease_owner TEXT,
                    lease_until BIGINT NOT NULL DEFAULT 0
                )
                """,
                "CREATE INDEX push_jobs_by_token ON push_jobs(app_id, token)",
            ]
        ),
        PostgresMigration(
            version: 5, name: "message lifecycle",
            statements: [
                // What each role may do (JSON); NULL for the defaults.
                "ALTER TABLE conversations ADD COLUMN roles TEXT",
                "ALTER TABLE conversations ADD COLUMN deleted_message_count BIGINT NOT NULL DEFAULT 0",
                // The message a sent, update or delete event carries (to find and rewrite them), and a reply's
                // parent (its seq).
                "ALTER TABLE events ADD COLUMN message_id TEXT",
                "ALTER TABLE events ADD COLUMN thread_seq BIGINT",
                """
                UPDATE events SET message_id = convert_from(body, 'UTF8')::jsonb -> 'payload' ->> 'id'
                WHERE message_index IS NOT NULL
                """,
                "CREATE INDEX events_by_message ON events(conversation_pk, message_id) WHERE message_id IS NOT NULL",
                "CREATE INDEX events_by_thread ON events(conversation_pk, thread_seq, seq) WHERE thread_seq IS NOT NULL",
                // Deleted messages by index: unread counts leave them out.
                """
                CREATE TABLE deleted_messages (
                    conversation_pk BIGINT NOT NULL REFERENCES conversations(pk),
                    message_index BIGINT NOT NULL,
                    PRIMARY KEY (conversation_pk, message_index)
                )
                """,
                """
                CREATE TABLE reactions (
                    conversation_pk BIGINT NOT NULL REFERENCES conversations(pk),
                    message_seq BIGINT NOT NULL,
                    key TEXT NOT NULL,
                    uid TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    PRIMARY KEY (conversation_pk, message_seq, key, uid)
                )
                """,
                // Unread mentions only: a row goes when its user reads past it, leaves, or the message goes.
                """
                CREATE TABLE mentions (
                    app_id TEXT NOT NULL,
                    uid TEXT NOT NULL,
                    conversation_pk BIGINT NOT NULL REFERENCES conversations(pk),
                    seq BIGINT NOT NULL,
                    sent_at BIGINT NOT NULL,
                    PRIMARY KEY (app_id, uid, conversation_pk, seq)
                )
                """,
                "CREATE INDEX mentions_by_message ON mentions(conversation_pk, seq)",
            ]
        ),
        PostgresMigration(
            version: 6, name: "safety",
            statements: [
                """
                CREATE TABLE blocks (
                    app_id TEXT NOT NULL,
                    blocker TEXT NOT NULL,
                    blocked TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    PRIMARY KEY (app_id, blocker, blocked)
                )
                """,
                "CREATE INDEX blocks_by_blocked ON blocks(app_id, blocked)",
                // A report keeps a copy of the reported message (JSON) as it was when reported.
                """
                CREATE TABLE reports (
                    pk BIGSERIAL PRIMARY KEY,
                    id TEXT NOT NULL UNIQUE,
                    app_id TEXT NOT NULL,
                    reporter TEXT NOT NULL,
                    uid TEXT NOT NULL,
                    conversation_id TEXT,
                    message_id TEXT,
                    message TEXT,
                    reason TEXT NOT NULL,
                    details TEXT,
                    state TEXT NOT NULL,
                    resolution TEXT,
                    created_at BIGINT NOT NULL,
                    resolved_at BIGINT
                )
                """,
                "CREATE INDEX reports_by_state ON reports(app_id, state, pk)",
                """
                CREATE UNIQUE INDEX reports_open_once ON reports(app_id, reporter, uid, coalesce(message_id, ''))
                WHERE state = 'open'
                """,
            ]
        ),
        PostgresMigration(
            version: 7, name: "mutes",
            statements: [
                // A muted participant reads but does not write: until `muted_until`, or until unmuted when it is NULL.
                "ALTER TABLE participants ADD COLUMN muted BOOLEAN NOT NULL DEFAULT false",
                "ALTER TABLE participants ADD COLUMN muted_until BIGINT",
            ]
        ),
        PostgresMigration(
            version: 8, name: "bans",
            statements: [
                // A user banned from a group cannot join, be added or read it: until `until`, or until unbanned when
                // it is NULL (a row whose `until` passed counts as no ban). `banned_by` is NULL when the app's server
                // banned.
                """
                CREATE TABLE bans (
                    conversation_pk BIGINT NOT NULL REFERENCES conversations(pk),
                    uid TEXT NOT NULL,
                    banned_by TEXT,
                    reason TEXT,
                    until BIGINT,
                    created_at BIGINT NOT NULL,
                    PRIMARY KEY (conversation_pk, uid)
                )
                """
            ]
        ),
        PostgresMigration(
            version: 9, name: "webhooks",
            statements: [
                // Endpoints of the apps' backends; `event_names` is `,name,name,` so that SQL finds one with position().
                """
                CREATE TABLE webhook_endpoints (
                    id TEXT PRIMARY KEY,
                    app_id TEXT NOT NULL,
                    url TEXT NOT NULL,
                    events TEXT NOT NULL,
                    event_names TEXT NOT NULL,
                    description TEXT,
                    secret TEXT NOT NULL,
                    enabled BOOLEAN NOT NULL,
                    disabled_reason TEXT,
                    disabled_at BIGINT,
                    consecutive_failures INTEGER NOT NULL DEFAULT 0,
                    last_success_at BIGINT,
                    last_failure_at BIGINT,
                    created_at BIGINT NOT NULL,
                    updated_at BIGINT NOT NULL
                )
                """,
                "CREATE INDEX webhook_endpoints_by_app ON webhook_endpoints(app_id, created_at)",
                // Filled in the transaction of each event: by the trigger below for conversation events (pointing at
                // the stored event), by the store for reports and users (with the body).
                """
                CREATE TABLE webhook_outbox (
                    id BIGSERIAL PRIMARY KEY,
                    app_id TEXT NOT NULL,
                    ordering_key TEXT NOT NULL,
                    name TEXT NOT NULL,
                    conversation_id TEXT,
                    conversation_pk BIGINT,
                    seq BIGINT,
                    body BYTEA,
                    created_at BIGINT NOT NULL
                )
                """,
                // One per endpoint; delivered ones are deleted, failed ones stay visible.
                """
                CREATE TABLE webhook_deliveries (
                    id BIGSERIAL PRIMARY KEY,
                    delivery_id TEXT NOT NULL UNIQUE,
                    app_id TEXT NOT NULL,
                    endpoint_id TEXT NOT NULL,
                    ordering_key TEXT NOT NULL,
                    position BIGINT NOT NULL,
                    name TEXT NOT NULL,
                    conversation_id TEXT,
                    body BYTEA NOT NULL,
                    created_at BIGINT NOT NULL,
                    state TEXT NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    not_before BIGINT NOT NULL,
                    lease_owner TEXT,
                    lease_until BIGINT NOT NULL DEFAULT 0,
                    last_status INTEGER,
                    last_error TEXT,
                    last_attempt_at BIGINT
                )
                """,
                """
                CREATE INDEX webhook_deliveries_chain ON webhook_deliveries(endpoint_id, ordering_key, position)
                WHERE state = 'pending'
                """,
                "CREATE INDEX webhook_deliveries_due ON webhook_deliveries(position) WHERE state = 'pending'",
                "CREATE INDEX webhook_deliveries_listed ON webhook_deliveries(endpoint_id, id)",
                """
                CREATE FUNCTION parley_webhook_outbox_of_event() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    INSERT INTO webhook_outbox (app_id, ordering_key, name, conversation_id, conversation_pk, seq,
                        created_at)
                    SELECT c.app_id, 'c:' || c.id, NEW.name, c.id, NEW.conversation_pk, NEW.seq, NEW.created_at
                    FROM conversations c
                    WHERE c.pk = NEW.conversation_pk AND EXISTS (
                        SELECT 1 FROM webhook_endpoints w
                        WHERE w.app_id = c.app_id AND w.enabled AND position(',' || NEW.name || ',' in w.event_names) > 0
                    );
                    RETURN NULL;
                END
                $$
                """,
                """
                CREATE TRIGGER webhook_outbox_of_events AFTER INSERT ON events
                FOR EACH ROW EXECUTE FUNCTION parley_webhook_outbox_of_event()
                """,
            ]
        ),
        PostgresMigration(
            version: 10, name: "allowed origins",
            statements: [
                // The web origins (CORS) whose pages may call the REST API, one per line.
                "ALTER TABLE apps ADD COLUMN allowed_origins TEXT NOT NULL DEFAULT ''"
            ]
        ),
        PostgresMigration(
            version: 11, name: "attachments",
            statements: [
                // Uploads: their bytes are in the blob store under `<app_id>/<id>`; `message_id` once a message
                // carries one.
                """
                CREATE TABLE attachments (
                    id TEXT PRIMARY KEY,
                    app_id TEXT NOT NULL,
                    conversation_id TEXT NOT NULL,
                    uploader TEXT NOT NULL,
                    name TEXT NOT NULL,
                    content_type TEXT NOT NULL,
                    size BIGINT NOT NULL,
                    sha256 TEXT NOT NULL,
                    width INTEGER,
                    height INTEGER,
                    created_at BIGINT NOT NULL,
                    message_id TEXT
                )
                """,
                "CREATE INDEX attachments_unattached ON attachments(created_at) WHERE message_id IS NULL",
                """
                CREATE INDEX attachments_of_messages ON attachments(app_id, conversation_id, message_id)
                WHERE message_id IS NOT NULL
                """,
            ]
        ),
        PostgresMigration(
            version: 12, name: "removed attachments, app file limits",
            statements: [
                // When an edit dropped the upload or its message was deleted: no link serves it, the sweeper deletes
                // it.
                "ALTER TABLE attachments ADD COLUMN removed_at BIGINT",
                // An app's own upload limit (NULL: the server's).
                "ALTER TABLE apps ADD COLUMN max_file_bytes BIGINT",
            ]
        ),
        PostgresMigration(
            version: 13, name: "sockets closed during the presence grace",
            statements: [
                // When the user's last socket on that node closed (the node's epoch ms), while the node still counts
                // them online for its grace; NULL while a socket is open.
                "ALTER TABLE presence_sessions ADD COLUMN sockets_closed_at BIGINT"
            ]
        ),
        PostgresMigration(
            version: 14, name: "nodes meet on NATS",
            statements: [
                // Presence, heartbeats and signals moved to NATS (docs/ARCHITECTURE.md, "Several nodes").
                "DROP TABLE presence_sessions",
                "DROP TABLE cluster_signals",
                "DROP TABLE cluster_nodes",
                // The deployment's id, one row: its nodes' NATS subjects are named after it.
                """
                CREATE TABLE deployment (
                    id TEXT PRIMARY KEY,
                    created_at BIGINT NOT NULL
                )
                """,
                """
                INSERT INTO deployment (id, created_at)
                VALUES (substr(md5(random()::text || clock_timestamp()::text), 1, 16),
                    (extract(epoch from clock_timestamp()) * 1000)::bigint)
                """,
            ]
        ),
        PostgresMigration(
            version: 15, name: "webhook outbox per statement",
            statements: [
                // The outbox rows of a batch's events in one statement, not a trigger call per event (which cost
                // PostgreSQL ~10-20 µs per message under `parley-bench rooms`). Within a conversation in `seq` order,
                // as the outbox is read by id.
                "DROP TRIGGER webhook_outbox_of_events ON events",
                "DROP FUNCTION parley_webhook_outbox_of_event()",
                """
                CREATE FUNCTION parley_webhook_outbox_of_events() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    -- Most deployments have no endpoint: one probe, not a join per statement.
                    IF NOT EXISTS (SELECT 1 FROM webhook_endpoints WHERE enabled) THEN
                        RETURN NULL;
                    END IF;
                    INSERT INTO webhook_outbox (app_id, ordering_key, name, conversation_id, conversation_pk, seq,
                        created_at)
                    SELECT c.app_id, 'c:' || c.id, e.name, c.id, e.conversation_pk, e.seq, e.created_at
                    FROM new_events e CROSS JOIN LATERAL (
                        -- By key: a transition table has no statistics, and joined as a set the planner hashed every
                        -- conversation.
                        SELECT c.app_id, c.id FROM conversations c WHERE c.pk = e.conversation_pk OFFSET 0
                    ) c
                    WHERE EXISTS (
                        SELECT 1 FROM webhook_endpoints w
                        WHERE w.app_id = c.app_id AND w.enabled AND position(',' || e.name || ',' in w.event_names) > 0
                    )
                    ORDER BY e.conversation_pk, e.seq;
                    RETURN NULL;
                END
                $$
                """,
                """
                CREATE TRIGGER webhook_outbox_of_events AFTER INSERT ON events
                REFERENCING NEW TABLE AS new_events
                FOR EACH STATEMENT EXECUTE FUNCTION parley_webhook_outbox_of_events()
                """,
            ]
        ),
        PostgresMigration(
            version: 16, name: "id indexes led by the id",
            statements: [
                // The message-id and client-message-id indexes led by the id instead of the conversation: both ids
                // are made from a clock (the server's; the SDK's UUIDv7), so a new entry lands at the end of its
                // index, where the last ones did, instead of on a page of its own in the middle of the conversation's
                // entries. `events` itself is a heap (a log) with its (conversation, seq) key.
                "DROP INDEX events_by_client_message",
                """
                CREATE UNIQUE INDEX events_by_client_message
                    ON events(client_message_id, conversation_pk, actor) WHERE client_message_id IS NOT NULL
                """,
                "DROP INDEX events_by_message",
                "CREATE INDEX events_by_message ON events(message_id) WHERE message_id IS NOT NULL",
            ]
        ),
        PostgresMigration(
            version: 17, name: "message search",
            statements: [
                // Each message's search document (PostgresStore+Search.swift), written with it; the messages stored
                // before are NULL until the server files them, found by the partial index (empty once they are).
                "ALTER TABLE events ADD COLUMN search tsvector",
                "CREATE INDEX events_search ON events USING gin (search) WHERE search IS NOT NULL",
                """
                CREATE INDEX events_unsearched ON events (conversation_pk, seq)
                    WHERE search IS NULL AND message_index IS NOT NULL
                """,
            ]
        ),
        PostgresMigration(
            version: 18, name: "user directory",
            statements: [
                // The user directory (PostgresStore+UserDirectory.swift): each user's words, in byte order (`"C"`)
                // so that a prefix is a range of the index; filed here for the users there are, then with each user
                // written.
                "ALTER TABLE apps ADD COLUMN user_directory TEXT NOT NULL DEFAULT 'everyone'",
                """
                CREATE TABLE user_words (
                    app_id TEXT NOT NULL,
                    word TEXT COLLATE "C" NOT NULL,
                    uid TEXT NOT NULL,
                    PRIMARY KEY (app_id, word, uid)
                )
                """,
                "CREATE INDEX user_words_by_user ON user_words(app_id, uid, word)",
            ],
            then: { session in try await PostgresStore.fileEveryUsersWords(session) }
        ),
        PostgresMigration(
            version: 19, name: "archived conversations",
            statements: [
                // A user's archive of a conversation (PostgresStore+Inbox.swift): the conversation's message count
                // then; a later message brings it back.
                """
                CREATE TABLE conversation_archives (
                    conversation_pk BIGINT NOT NULL REFERENCES conversations(pk),
                    uid TEXT NOT NULL,
                    message_count BIGINT NOT NULL,
                    PRIMARY KEY (conversation_pk, uid)
                )
                """
            ]
        ),
        PostgresMigration(
            version: 20, name: "deactivated users",
            statements: ["ALTER TABLE users ADD COLUMN deactivated_at BIGINT"]
        ),
        PostgresMigration(
            version: 21, name: "pinned messages",
            statements: [
                // A conversation's pinned messages (`pinned_by` NULL: the app's server); a deleted message's pin goes
                // with it.
                """
                CREATE TABLE pins (
                    conversation_pk BIGINT NOT NULL REFERENCES conversations(pk),
                    message_seq BIGINT NOT NULL,
                    pinned_by TEXT,
                    pinned_at BIGINT NOT NULL,
                    PRIMARY KEY (conversation_pk, message_seq)
                )
                """
            ]
        ),
        PostgresMigration(
            version: 22, name: "deleted users' messages",
            statements: ["ALTER TABLE apps ADD COLUMN deleted_user_messages TEXT NOT NULL DEFAULT 'tombstone'"]
        ),
    ]

    /// The key of the advisory lock that serializes migrations of one database ("parley.schema").
    static let migrationLockKey: Int64 = 0x7061_726C_6579_5331

    /// Brings the schema up to date, on one connection, in one transaction.
    ///
    /// The transaction first takes a transaction-level advisory lock, so that nodes starting together migrate one
    /// after the other: the second waits, then finds every step recorded in `schema_migrations` and does nothing.
    /// PostgreSQL's DDL is transactional: a step that fails leaves no trace.
    ///
    /// - Parameter version: The last version to apply (a test builds an earlier release's schema with it).
    /// - Returns: The versions applied by this call (empty when the schema was current).
    @discardableResult
    static func migrate(_ connection: PostgresConnection, logger: Logger, through version: Int64 = .max) async throws
        -> [Int64]
    {
        let session = PostgresSession(connection: connection, logger: logger)
        return try await session.transaction {
            // A node stuck while holding the lock must not stop the others forever.
            try await session.execute("SET LOCAL lock_timeout = '60s'")
            try await session.execute("SELECT pg_advisory_xact_lock(\(migrationLockKey))")
            try await session.execute(
                """
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version BIGINT PRIMARY KEY,
                    name TEXT NOT NULL,
                    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
                )
                """
            )
            // Which release applied each step (none before this column): what a refusal of a newer schema names.
            try await session.execute("ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS release TEXT")
            let rows = try await session.rows("SELECT version, release FROM schema_migrations ORDER BY version")
            let steps = try rows.map { try $0.decode((Int64, String?).self) }
            let applied = Set(steps.map(\.0))
            if let (newest, release) = steps.last, newest > migrations.last!.version {
                throw PostgresStoreError.schemaTooNew(
                    version: newest, release: release, known: migrations.last!.version)
            }
            var done: [Int64] = []
            for migration in migrations where !applied.contains(migration.version) && migration.version <= version {
                logger.info("Migrating the PostgreSQL schema to version \(migration.version) (\(migration.name))")
                for statement in migration.statements {
                    try await session.execute(PostgresQuery(unsafeSQL: statement))
                }
                try await migration.then?(session)
                try await session.execute(
                    """
                    INSERT INTO schema_migrations (version, name, release)
                    VALUES (\(migration.version), \(migration.name), \(ParleyRelease.version))
                    """
                )
                done.append(migration.version)
            }
            return done
        }
    }
}
