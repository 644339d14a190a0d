import GRDB
import ParleyProtocol

extension SQLiteStore {
    /// The schema, as migrations: a migration once shipped is never edited, only followed by new ones.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE apps (
                        id TEXT PRIMARY KEY NOT NULL,
                        name TEXT NOT NULL,
                        auth_key_hash BLOB NOT NULL,
                        rest_api_key_hash BLOB NOT NULL UNIQUE,
                        created_at INTEGER NOT NULL
                    );
                    CREATE TABLE users (
                        app_id TEXT NOT NULL REFERENCES apps(id),
                        uid TEXT NOT NULL,
                        name TEXT NOT NULL,
                        avatar_url TEXT,
                        metadata TEXT,
                        created_at INTEGER NOT NULL,
                        updated_at INTEGER NOT NULL,
                        PRIMARY KEY (app_id, uid)
                    ) WITHOUT ROWID;
                    CREATE TABLE auth_tokens (
                        hash BLOB PRIMARY KEY NOT NULL,
                        id TEXT NOT NULL UNIQUE,
                        app_id TEXT NOT NULL,
                        uid TEXT NOT NULL,
                        created_at INTEGER NOT NULL,
                        expires_at INTEGER,
                        revoked_at INTEGER,
                        FOREIGN KEY (app_id, uid) REFERENCES users(app_id, uid)
                    );
                    CREATE INDEX auth_tokens_by_user ON auth_tokens(app_id, uid);
                    CREATE TABLE conversations (
                        pk INTEGER PRIMARY KEY,
                        id TEXT NOT NULL UNIQUE,
                        app_id TEXT NOT NULL REFERENCES apps(id),
                        type TEXT NOT NULL,
                        direct_key TEXT,
                        name TEXT,
                        description TEXT,
                        is_public INTEGER NOT NULL,
                        metadata TEXT,
                        created_by TEXT NOT NULL,
                        created_at INTEGER NOT NULL,
                        updated_at INTEGER NOT NULL,
                        last_seq INTEGER NOT NULL,
                        last_activity_at INTEGER NOT NULL,
                        participant_count INTEGER NOT NULL,
                        deleted_at INTEGER,
                        UNIQUE (app_id, direct_key)
                    );
                    CREATE TABLE participants (
                        conversation_pk INTEGER NOT NULL REFERENCES conversations(pk),
                        uid TEXT NOT NULL,
                        role TEXT NOT NULL,
                        joined_at INTEGER NOT NULL,
                        delivered_seq INTEGER NOT NULL DEFAULT 0,
                        read_seq INTEGER NOT NULL DEFAULT 0,
                        PRIMARY KEY (conversation_pk, uid)
                    ) WITHOUT ROWID;
                    CREATE INDEX participants_by_user ON participants(uid, conversation_pk);
                    CREATE TABLE events (
                        conversation_pk INTEGER NOT NULL REFERENCES conversations(pk),
                        seq INTEGER NOT NULL,
                        name TEXT NOT NULL,
                        actor TEXT,
                        created_at INTEGER NOT NULL,
                        client_message_id TEXT,
                        body BLOB NOT NULL,
                        PRIMARY KEY (conversation_pk, seq)
                    ) WITHOUT ROWID;
                    CREATE UNIQUE INDEX events_by_client_message
                        ON events(conversation_pk, actor, client_message_id) WHERE client_message_id IS NOT NULL;
                    """
            )
        }
        migrator.registerMigration("v2: unread counts") { db in
            // Unread counts in constant time: each message event records its index among the conversation's
            // messages, and each participant how many messages their read position covers.
            try db.execute(
                sql: """
                    ALTER TABLE conversations ADD COLUMN message_count INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE events ADD COLUMN message_index INTEGER;
                    ALTER TABLE participants ADD COLUMN read_message_count INTEGER NOT NULL DEFAULT 0;
                    UPDATE conversations SET message_count =
                        (SELECT COUNT(*) FROM events e WHERE e.conversation_pk = conversations.pk
                         AND e.name = 'conversationMessage.sent');
                    UPDATE events SET message_index =
                        (SELECT COUNT(*) FROM events e WHERE e.conversation_pk = events.conversation_pk
                         AND e.name = 'conversationMessage.sent' AND e.seq <= events.seq)
                        WHERE name = 'conversationMessage.sent';
                    UPDATE participants SET read_message_count =
                        (SELECT COUNT(*) FROM events e WHERE e.conversation_pk = participants.conversation_pk
                         AND e.name = 'conversationMessage.sent' AND e.seq <= participants.read_seq);
                    """
            )
        }
        migrator.registerMigration("v3: membership streams") { db in
            // Each user's own stream: the conversations they joined and left, numbered per user in commit order.
            // Existing participations become joins at the conversation's current end.
            try db.execute(
                sql: """
                    ALTER TABLE users ADD COLUMN last_user_seq INTEGER NOT NULL DEFAULT 0;
                    CREATE TABLE memberships (
                        app_id TEXT NOT NULL,
                        uid TEXT NOT NULL,
                        user_seq INTEGER NOT NULL,
                        conversation_pk INTEGER NOT NULL REFERENCES conversations(pk),
                        joined INTEGER NOT NULL,
                        seq INTEGER NOT NULL,
                        PRIMARY KEY (app_id, uid, user_seq)
                    ) WITHOUT ROWID;
                    INSERT INTO memberships (app_id, uid, user_seq, conversation_pk, joined, seq)
                        SELECT c.app_id, p.uid,
                            ROW_NUMBER() OVER (PARTITION BY c.app_id, p.uid ORDER BY p.joined_at, c.pk),
                            c.pk, 1, c.last_seq
                        FROM participants p JOIN conversations c ON c.pk = p.conversation_pk;
                    UPDATE users SET last_user_seq =
                        (SELECT COUNT(*) FROM memberships m WHERE m.app_id = users.app_id AND m.uid = users.uid);
                    """
            )
        }
        migrator.registerMigration("v4: push devices") { db in
            // One row per device of a user; a platform token belongs to at most one device of an app.
            try db.execute(
                sql: """
                    CREATE TABLE devices (
                        app_id TEXT NOT NULL,
                        uid TEXT NOT NULL,
                        device_id TEXT NOT NULL,
                        platform TEXT NOT NULL,
                        token TEXT NOT NULL,
                        environment TEXT NOT NULL,
                        created_at INTEGER NOT NULL,
                        updated_at INTEGER NOT NULL,
                        PRIMARY KEY (app_id, uid, device_id),
                        UNIQUE (app_id, platform, token),
                        FOREIGN KEY (app_id, uid) REFERENCES users(app_id, uid)
                    ) WITHOUT ROWID;
                    """
            )
        }
        migrator.registerMigration("v5: push queue") { db in
            // push_outbox: messages written with push on, in the message's transaction; push_jobs: one notification
            // per device, leased while being sent.
            try db.execute(
                sql: """
                    CREATE TABLE push_outbox (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        app_id TEXT NOT NULL,
                        conversation_pk INTEGER NOT NULL REFERENCES conversations(pk),
                        seq INTEGER NOT NULL,
                        created_at INTEGER NOT NULL
                    );
                    CREATE TABLE push_jobs (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        app_id TEXT NOT NULL,
                        uid TEXT NOT NULL,
                        device_id TEXT NOT NULL,
                        platform TEXT NOT NULL,
                        token TEXT NOT NULL,
                        environment TEXT NOT NULL,
                        collapse_id TEXT NOT NULL,
                        payload BLOB NOT NULL,
                        created_at INTEGER NOT NULL,
                        attempts INTEGER NOT NULL,
                        not_before INTEGER NOT NULL,
                        lease_owner TEXT,
                        lease_until INTEGER NOT NULL DEFAULT 0
                    );
                    CREATE INDEX push_jobs_by_token ON push_jobs(app_id, token);
                    """
            )
        }
        migrator.registerMigration("v6: message lifecycle") { db in
            // Messages change after they are sent. `events.message_id` finds a message's events (sent, update,
            // delete) to rewrite them; `thread_seq` is a reply's parent; `deleted_messages` lets unread counts skip
            // deleted messages; `reactions` and `mentions` (unread mentions only) are rows of their own.
            try db.execute(
                sql: """
                    ALTER TABLE conversations ADD COLUMN roles TEXT;
                    ALTER TABLE conversations ADD COLUMN deleted_message_count INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE events ADD COLUMN message_id TEXT;
                    ALTER TABLE events ADD COLUMN thread_seq INTEGER;
                    UPDATE events SET message_id = json_extract(CAST(body AS TEXT), '$.payload.id')
                        WHERE message_index IS NOT NULL;
                    CREATE INDEX events_by_message ON events(conversation_pk, message_id) WHERE message_id IS NOT NULL;
                    CREATE INDEX events_by_thread ON events(conversation_pk, thread_seq, seq) WHERE thread_seq IS NOT NULL;
                    CREATE TABLE deleted_messages (
                        conversation_pk INTEGER NOT NULL REFERENCES conversations(pk),
                        message_index INTEGER NOT NULL,
                        PRIMARY KEY (conversation_pk, message_index)
                    ) WITHOUT ROWID;
                    CREATE TABLE reactions (
                        conversation_pk INTEGER NOT NULL REFERENCES conversations(pk),
                        message_seq INTEGER NOT NULL,
                        key TEXT NOT NULL,
                        uid TEXT NOT NULL,
                        created_at INTEGER NOT NULL,
                        PRIMARY KEY (conversation_pk, message_seq, key, uid)
                    ) WITHOUT ROWID;
                    CREATE TABLE mentions (
                        app_id TEXT NOT NULL,
                        uid TEXT NOT NULL,
                        conversation_pk INTEGER NOT NULL REFERENCES conversations(pk),
                        seq INTEGER NOT NULL,
                        sent_at INTEGER NOT NULL,
                        PRIMARY KEY (app_id, uid, conversation_pk, seq)
                    ) WITHOUT ROWID;
                    CREATE INDEX mentions_by_message ON mentions(conversation_pk, seq);
                    """
            )
        }
        migrator.registerMigration("v7: safety") { db in
            // Blocks between users of an app, and reports of messages and users for the app's moderators. A report
            // keeps a copy of the reported message (`message`, JSON) as it was when reported.
            try db.execute(
                sql: """
                    CREATE TABLE blocks (
                        app_id TEXT NOT NULL,
                        blocker TEXT NOT NULL,
                        blocked TEXT NOT NULL,
                        created_at INTEGER NOT NULL,
                        PRIMARY KEY (app_id, blocker, blocked)
                    ) WITHOUT ROWID;
                    CREATE INDEX blocks_by_blocked ON blocks(app_id, blocked);
                    CREATE TABLE reports (
                        pk INTEGER PRIMARY KEY,
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
                        created_at INTEGER NOT NULL,
                        resolved_at INTEGER
                    );
                    CREATE INDEX reports_by_state ON reports(app_id, state, pk);
                    CREATE UNIQUE INDEX reports_open_once ON reports(app_id, reporter, uid, coalesce(message_id, ''))
                        WHERE state = 'open';
                    """
            )
        }
        migrator.registerMigration("v8: mutes") { db in
            // A muted participant reads but does not write: until `muted_until`, or until unmuted when it is NULL.
            try db.execute(
                sql: """
                    ALTER TABLE participants ADD COLUMN muted INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE participants ADD COLUMN muted_until INTEGER;
                    """
            )
        }
        migrator.registerMigration("v9: bans") { db in
            // A user banned from a group cannot join, be added or read it: until `until`, or until unbanned when it
            // is NULL (a row whose `until` passed counts as no ban). `banned_by` is NULL when the app's server banned.
            try db.execute(
                sql: """
                    CREATE TABLE bans (
                        conversation_pk INTEGER NOT NULL REFERENCES conversations(pk),
                        uid TEXT NOT NULL,
                        banned_by TEXT,
                        reason TEXT,
                        until INTEGER,
                        created_at INTEGER NOT NULL,
                        PRIMARY KEY (conversation_pk, uid)
                    ) WITHOUT ROWID;
                    """
            )
        }
        migrator.registerMigration("v10: webhooks") { db in
            // Endpoints of the apps' backends; `event_names` is `,name,name,` so that SQL finds one with instr().
            // The outbox is filled in the transaction of each event: by the trigger for conversation events (pointing
            // at the stored event), by the store for reports and users (with the body). Deliveries are one per
            // endpoint; delivered ones are deleted, failed ones stay visible. The trigger exists only while an enabled
            // endpoint does (SQLiteStore.syncWebhookTrigger): it costs ~14 µs per stored event even when its WHEN is
            // false, a third of the send path (parley-bench persist, 38k/s -> 28k/s).
            try db.execute(
                sql: """
                    CREATE TABLE webhook_endpoints (
                        id TEXT PRIMARY KEY,
                        app_id TEXT NOT NULL,
                        url TEXT NOT NULL,
                        events TEXT NOT NULL,
                        event_names TEXT NOT NULL,
                        description TEXT,
                        secret TEXT NOT NULL,
                        enabled INTEGER NOT NULL,
                        disabled_reason TEXT,
                        disabled_at INTEGER,
                        consecutive_failures INTEGER NOT NULL DEFAULT 0,
                        last_success_at INTEGER,
                        last_failure_at INTEGER,
                        created_at INTEGER NOT NULL,
                        updated_at INTEGER NOT NULL
                    );
                    CREATE INDEX webhook_endpoints_by_app ON webhook_endpoints(app_id, created_at);
                    CREATE TABLE webhook_outbox (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        app_id TEXT NOT NULL,
                        ordering_key TEXT NOT NULL,
                        name TEXT NOT NULL,
                        conversation_id TEXT,
                        conversation_pk INTEGER,
                        seq INTEGER,
                        body BLOB,
                        created_at INTEGER NOT NULL
                    );
                    CREATE TABLE webhook_deliveries (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        delivery_id TEXT NOT NULL UNIQUE,
                        app_id TEXT NOT NULL,
                        endpoint_id TEXT NOT NULL,
                        ordering_key TEXT NOT NULL,
                        position INTEGER NOT NULL,
                        name TEXT NOT NULL,
                        conversation_id TEXT,
                        body BLOB NOT NULL,
                        created_at INTEGER NOT NULL,
                        state TEXT NOT NULL,
                        attempts INTEGER NOT NULL DEFAULT 0,
                        not_before INTEGER NOT NULL,
                        lease_owner TEXT,
                        lease_until INTEGER NOT NULL DEFAULT 0,
                        last_status INTEGER,
                        last_error TEXT,
                        last_attempt_at INTEGER
                    );
                    CREATE INDEX webhook_deliveries_chain ON webhook_deliveries(endpoint_id, ordering_key, position)
                        WHERE state = 'pending';
                    CREATE INDEX webhook_deliveries_due ON webhook_deliveries(position) WHERE state = 'pending';
                    CREATE INDEX webhook_deliveries_listed ON webhook_deliveries(endpoint_id, id);
                    """
            )
        }
        migrator.registerMigration("v11: allowed origins") { db in
            // The web origins (CORS) whose pages may call the REST API, one per line.
            try db.execute(sql: "ALTER TABLE apps ADD COLUMN allowed_origins TEXT NOT NULL DEFAULT ''")
        }
        migrator.registerMigration("v12: attachments") { db in
            // Uploads: their bytes are in the blob store under `<app_id>/<id>`; `message_id` once a message carries one.
            try db.execute(
                sql: """
                    CREATE TABLE attachments (
                        id TEXT PRIMARY KEY,
                        app_id TEXT NOT NULL,
                        conversation_id TEXT NOT NULL,
                        uploader TEXT NOT NULL,
                        name TEXT NOT NULL,
                        content_type TEXT NOT NULL,
                        size INTEGER NOT NULL,
                        sha256 TEXT NOT NULL,
                        width INTEGER,
                        height INTEGER,
                        created_at INTEGER NOT NULL,
                        message_id TEXT
                    );
                    CREATE INDEX attachments_unattached ON attachments(created_at) WHERE message_id IS NULL;
                    CREATE INDEX attachments_of_messages ON attachments(app_id, conversation_id, message_id)
                        WHERE message_id IS NOT NULL;
                    """
            )
        }
        migrator.registerMigration("v13: removed attachments, app file limits") { db in
            // When an edit dropped the upload or its message was deleted: no link serves it, the sweeper deletes it.
            try db.execute(sql: "ALTER TABLE attachments ADD COLUMN removed_at INTEGER")
            // An app's own upload limit (nil: the server's).
            try db.execute(sql: "ALTER TABLE apps ADD COLUMN max_file_bytes INTEGER")
        }
        migrator.registerMigration("v14: events as a log") { db in
            // Events in the order they were stored (rowid), no longer clustered by conversation: a new event is
            // written at the end of the table instead of in the middle of its conversation's pages, and the one
            // (conversation, seq) index is what history and resume read. Messages are found by id and by client
            // message id through two tables filed in bulk from the log (`SQLiteStore.indexLogTail`), every
            // `SQLiteStore.logIndexInterval` events, instead of two index entries per message: what is past
            // `log_state.indexed_through` is read from the log itself. The store files the whole log when it opens
            // after this migration, as it files the tail after a crash. Events are copied in the order they were
            // stored; the webhook trigger goes with the old table and is made again when the store opens
            // (`SQLiteStore.syncWebhookTrigger`).
            try db.execute(
                sql: """
                    CREATE TABLE events_log (
                        position INTEGER PRIMARY KEY,
                        conversation_pk INTEGER NOT NULL REFERENCES conversations(pk),
                        seq INTEGER NOT NULL,
                        name TEXT NOT NULL,
                        actor TEXT,
                        created_at INTEGER NOT NULL,
                        client_message_id TEXT,
                        message_index INTEGER,
                        message_id TEXT,
                        thread_seq INTEGER,
                        body BLOB NOT NULL
                    );
                    INSERT INTO events_log (conversation_pk, seq, name, actor, created_at, client_message_id,
                        message_index, message_id, thread_seq, body)
                        SELECT conversation_pk, seq, name, actor, created_at, client_message_id, message_index,
                            message_id, thread_seq, body
                        FROM events ORDER BY created_at, conversation_pk, seq;
                    DROP TABLE events;
                    ALTER TABLE events_log RENAME TO events;
                    CREATE UNIQUE INDEX events_by_conversation ON events(conversation_pk, seq);
                    CREATE INDEX events_by_thread ON events(conversation_pk, thread_seq, seq) WHERE thread_seq IS NOT NULL;
                    CREATE TABLE message_ids (
                        message_id TEXT NOT NULL,
                        conversation_pk INTEGER NOT NULL,
                        seq INTEGER NOT NULL,
                        PRIMARY KEY (message_id, conversation_pk, seq)
                    ) WITHOUT ROWID;
                    CREATE TABLE client_message_ids (
                        client_message_id TEXT NOT NULL,
                        conversation_pk INTEGER NOT NULL,
                        actor TEXT NOT NULL,
                        seq INTEGER NOT NULL,
                        PRIMARY KEY (client_message_id, conversation_pk, actor)
                    ) WITHOUT ROWID;
                    CREATE TABLE log_state (
                        id INTEGER PRIMARY KEY CHECK (id = 1),
                        indexed_through INTEGER NOT NULL
                    );
                    INSERT INTO log_state (id, indexed_through) VALUES (1, 0);
                    """
            )
        }
        migrator.registerMigration("v15: message search") { db in
            // Message search (`SQLiteStore+Search.swift`): `message_text` is what a message is found by, its text parts
            // and files' names (read from the `sent` event's body by SQLite's JSON functions) and its facets; the
            // index itself is a file of its own, filed from the log after the commit. `search_key` names this database
            // to that file: an index made for another database (or a copy of this one) is made again.
            try db.execute(
                sql: """
                    CREATE VIEW message_text (position, words, facets) AS
                        SELECT e.position,
                            group_concat(coalesce(p.value ->> '$.text', p.value ->> '$.file.name'), char(10)),
                            'c' || e.conversation_pk
                                || CASE WHEN max(p.value ->> '$.type' = 'file') THEN ' file' ELSE '' END
                        FROM events e JOIN json_each(CAST(e.body AS TEXT), '$.payload.parts') p
                        WHERE e.message_index IS NOT NULL
                        GROUP BY e.position
                        HAVING group_concat(coalesce(p.value ->> '$.text', p.value ->> '$.file.name')) IS NOT NULL
                            OR max(p.value ->> '$.type' = 'file');
                    ALTER TABLE log_state ADD COLUMN search_key TEXT;
                    UPDATE log_state SET search_key = lower(hex(randomblob(16)));
                    """
            )
        }
        migrator.registerMigration("v16: user directory") { db in
            // The user directory (`SQLiteStore+UserDirectory.swift`): each user's words, filed here for the users
            // there are, then with each user written.
            try db.execute(
                sql: """
                    ALTER TABLE apps ADD COLUMN user_directory TEXT NOT NULL DEFAULT 'everyone';
                    CREATE TABLE user_words (
                        app_id TEXT NOT NULL,
                        word TEXT NOT NULL,
                        uid TEXT NOT NULL,
                        PRIMARY KEY (app_id, word, uid)
                    ) WITHOUT ROWID;
                    CREATE INDEX user_words_by_user ON user_words(app_id, uid, word);
                    """
            )
            let users = try Row.fetchCursor(db, sql: "SELECT app_id, uid, name FROM users")
            while let user = try users.next() {
                try SQLiteStore.fileUserWords(db, appId: user[0], uid: user[1], name: user[2])
            }
        }
        migrator.registerMigration("v17: archived conversations") { db in
            // A user's archive of a conversation (`SQLiteStore+Inbox.swift`): the conversation's message count then;
            // a later message brings it back.
            try db.execute(
                sql: """
                    CREATE TABLE conversation_archives (
                        conversation_pk INTEGER NOT NULL REFERENCES conversations(pk),
                        uid TEXT NOT NULL,
                        message_count INTEGER NOT NULL,
                        PRIMARY KEY (conversation_pk, uid)
                    ) WITHOUT ROWID;
                    """
            )
        }
        migrator.registerMigration("v18: deactivated users") { db in
            try db.execute(sql: "ALTER TABLE users ADD COLUMN deactivated_at INTEGER")
        }
        migrator.registerMigration("v19: pinned messages") { db in
            // A conversation's pinned messages (`pinned_by` NULL: the app's server); a deleted message's pin goes
            // with it.
            try db.execute(
                sql: """
                    CREATE TABLE pins (
                        conversation_pk INTEGER NOT NULL REFERENCES conversations(pk),
                        message_seq INTEGER NOT NULL,
                        pinned_by TEXT,
                        pinned_at INTEGER NOT NULL,
                        PRIMARY KEY (conversation_pk, message_seq)
                    ) WITHOUT ROWID;
                    """
            )
        }
        migrator.registerMigration("v20: deleted users' messages") { db in
            try db.execute(sql: "ALTER TABLE apps ADD COLUMN deleted_user_messages TEXT NOT NULL DEFAULT 'tombstone'")
        }
        migrator.registerMigration("v21: schema releases") { db in
            // The release that applied each step (`recordRelease`): an older server that finds a step it does not
            // know names it when it refuses the database.
            try db.execute(
                sql: "CREATE TABLE schema_releases (migration TEXT PRIMARY KEY, release TEXT NOT NULL) WITHOUT ROWID")
        }
        return migrator
    }

    /// Records this release as the one that applied the steps not in `before` (what the open just migrated).
    static func recordRelease(_ db: Database, after before: Set<String>) throws {
        for step in migrator.migrations where !before.contains(step) {
            try db.execute(
                sql: "INSERT OR REPLACE INTO schema_releases (migration, release) VALUES (?, ?)",
                arguments: [step, ParleyRelease.version])
        }
    }
}
