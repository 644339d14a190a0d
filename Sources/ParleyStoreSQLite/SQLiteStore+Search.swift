import Foundation
import GRDB
import GRDBSQLite
import ParleyProtocol
import ParleyStore

// Message search on SQLite: an FTS5 index in a file of its own, filed from the log after the commit.
//
// `message_search` (in `<database>-search.sqlite`, attached to the store's readers as `search`) has one row per message:
// the rowid of its `sent` event in the log, its text parts and files' names as the view `message_text` reads them
// from the event's body (FTS5's `unicode61` tokenizer splits, lowercases and removes diacritics), and its facets
// (`c<conversation pk>`, and `file` when it carries one), which make the conversation and has-a-file filters part of
// the index's own search. `search_state.searched_through` is the last log position filed.
//
// The index is its own database so that filing it never holds the messages' writer: one SQLite file has one writer,
// and filing (FTS5's tokenizing, its segments and their merges) in the messages' file doubled p99 in `parley-bench
// rooms` (docs/BENCHMARKS.md, "Search"). It is filed in bulk after the commit (``fileSearchIndex(limit:)``, called by
// the server's `SearchIndexer`): a `sent` event files its message as its body is then; an `update` or `delete` event
// files its message again (its row is replaced, or removed once deleted). Edits and deletions reach the index with
// the same lag as new messages; a deleted message is never answered meanwhile (its tombstone is left out). The index
// is derived: made again from the log when it is missing, or made for another database (`log_state.search_key`).

extension SQLiteStore {
    /// Most conversations of a user whose facets a search names (more: the matches are walked and checked instead).
    static let searchFacetConversations = 64

    /// The search index's file beside the database at `path` (`parley.sqlite` → `parley-search.sqlite`).
    static func searchIndexPath(for path: String) -> String {
        let url = URL(fileURLWithPath: path)
        let name = url.deletingPathExtension().lastPathComponent + "-search.sqlite"
        return url.deletingLastPathComponent().appendingPathComponent(name).path
    }

    /// Opens (or makes) the search index's file, in WAL mode so the store's readers search while it is filed.
    static func openSearchIndex(path: String) throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.busyMode = .polling(seconds: 10)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        try queue.write { db in
            try db.execute(
                sql: """
                    CREATE VIRTUAL TABLE IF NOT EXISTS message_search USING fts5(
                        words, facets, tokenize = 'unicode61 remove_diacritics 2'
                    );
                    CREATE TABLE IF NOT EXISTS search_state (
                        id INTEGER PRIMARY KEY CHECK (id = 1),
                        searched_through INTEGER NOT NULL,
                        search_key TEXT
                    );
                    INSERT OR IGNORE INTO search_state (id, searched_through, search_key) VALUES (1, 0, NULL);
                    """
            )
        }
        return queue
    }

    /// Opens the search index's file, or, when it cannot be opened as one (damaged, or not a database), removes it and
    /// makes it again: it is derived from the log, and must never keep the server from starting.
    static func openOrRemakeSearchIndex(path: String) throws -> DatabaseQueue {
        do {
            let index = try openSearchIndex(path: path)
            try index.read { db in _ = try Int64.fetchOne(db, sql: "SELECT count(*) FROM message_search LIMIT 1") }
            return index
        } catch {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            return try openSearchIndex(path: path)
        }
    }

    /// Empties the search index when it was made for another database, or for a later state of this one (a backup
    /// restored beside it): positions it holds may name other messages here.
    static func matchSearchIndex(_ index: DatabaseQueue, to pool: DatabasePool) throws {
        let (key, last) = try pool.read { db in
            (
                try String.fetchOne(db, sql: "SELECT search_key FROM log_state WHERE id = 1"),
                try lastLogPosition(db)
            )
        }
        try index.write { db in
            let row = try Row.fetchOne(db, sql: "SELECT searched_through, search_key FROM search_state WHERE id = 1")
            let through: Int64 = row?[0] ?? 0
            let filedFor: String? = row?[1]
            guard filedFor != key || through > last else { return }
            try db.execute(sql: "DELETE FROM message_search")
            try db.execute(
                sql: "UPDATE search_state SET searched_through = 0, search_key = ? WHERE id = 1", arguments: [key]
            )
        }
    }

    /// Files the log's next `limit` events past `searched_through` in the index; returns how many events it looked at
    /// (fewer than `limit`: it reached the log's end). Reads the log on a reader and writes the index's own file: the
    /// messages' writer never waits for it.
    public func fileSearchIndex(limit: Int) async throws -> Int {
        let through = try await searchIndex.read { db in
            try Int64.fetchOne(db, sql: "SELECT searched_through FROM search_state WHERE id = 1") ?? 0
        }
        let (count, end, rows, refiled) = try await pool.read { db in
            let events = try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT position, conversation_pk, message_index, message_id FROM events WHERE position > ?
                        ORDER BY position LIMIT ?
                        """
                ),
                arguments: [through, limit]
            )
            let end: Int64 = events.last?[0] ?? through
            // The messages stored in the range, as their bodies are now.
            let rows = try Row.fetchAll(
                db.cachedStatement(
                    sql: "SELECT position, words, facets FROM message_text WHERE position > ? AND position <= ?"
                ),
                arguments: [through, end]
            ).map { (position: $0[0] as Int64, words: $0[1] as String?, facets: $0[2] as String) }
            // Messages filed before the range that an event of the range changed (an edit, a deletion): filed again.
            var refiled: [Int64: (words: String?, facets: String)?] = [:]
            for event in events where event[2] as Int64? == nil {
                guard let messageId: String = event[3] else { continue }
                let conversationPK: Int64 = event[1]
                guard
                    let seq = try Self.messageEventSeqs(db, conversationPK: conversationPK, messageId: messageId).first,
                    let position = try Int64.fetchOne(
                        db.cachedStatement(sql: "SELECT position FROM events WHERE conversation_pk = ? AND seq = ?"),
                        arguments: [conversationPK, seq]
                    ),
                    position <= through
                else { continue }
                let now = try Row.fetchOne(
                    db.cachedStatement(sql: "SELECT words, facets FROM message_text WHERE position = ?"),
                    arguments: [position]
                )
                refiled[position] = now.map { (words: $0[0] as String?, facets: $0[1] as String) }
            }
            return (events.count, end, rows, refiled)
        }
        guard end > through else { return count }
        let filed = try await searchIndex.write { db in
            // Another call (the server's indexer, or an operator's) filed the range meanwhile: nothing to do here.
            guard try Int64.fetchOne(db, sql: "SELECT searched_through FROM search_state WHERE id = 1") == through
            else { return false }
            for (position, now) in refiled {
                try db.cachedStatement(sql: "DELETE FROM message_search WHERE rowid = ?").execute(arguments: [position])
                if let now {
                    try db.cachedStatement(sql: "INSERT INTO message_search (rowid, words, facets) VALUES (?, ?, ?)")
                        .execute(arguments: [position, now.words, now.facets])
                }
            }
            let insert = try db.cachedStatement(
                sql: "INSERT INTO message_search (rowid, words, facets) VALUES (?, ?, ?)"
            )
            for row in rows { try insert.execute(arguments: [row.position, row.words, row.facets]) }
            try db.cachedStatement(sql: "UPDATE search_state SET searched_through = ? WHERE id = 1")
                .execute(arguments: [end])
            return true
        }
        // Raced: asked again from where the other call ended.
        return filed ? count : limit
    }

    public func searchMessages(_ request: MessageSearchRequest) async throws -> MessageSearchPage {
        let page = try SearchPagePlan(request, positionFields: 1)
        return try await pool.read { db in
            try Self.within(request.timeLimit, on: db) {
                var match: [String] = []
                if !request.query.terms.isEmpty { match.append("words : (\(request.query.fts5Expression))") }
                if let conversationId = request.conversationId {
                    guard let row = try Self.fetchConversation(db, appId: request.appId, id: conversationId) else {
                        return MessageSearchPage(messages: [], nextCursor: nil)
                    }
                    match.append("facets : \"c\(row.pk)\"")
                } else if let viewer = request.viewer {
                    // A user in a few conversations: the index keeps to them itself (their facets' lists are merged with
                    // the words'), instead of walking every match in the app for the few that are theirs.
                    let conversations = try Int64.fetchAll(
                        db.cachedStatement(sql: "SELECT conversation_pk FROM participants WHERE uid = ? LIMIT ?"),
                        arguments: [viewer, Self.searchFacetConversations + 1]
                    )
                    if conversations.count <= Self.searchFacetConversations {
                        guard !conversations.isEmpty else { return MessageSearchPage(messages: [], nextCursor: nil) }
                        match.append("facets : (" + conversations.map { "\"c\($0)\"" }.joined(separator: " OR ") + ")")
                    }
                }
                if request.hasFile { match.append("facets : \"file\"") }
                guard !match.isEmpty else { return MessageSearchPage(messages: [], nextCursor: nil) }
                var sql = """
                    SELECT s.rowid, e.body FROM search.message_search s
                    JOIN events e ON e.position = s.rowid
                    JOIN conversations c ON c.pk = e.conversation_pk
                    WHERE s.message_search MATCH ? AND c.app_id = ? AND c.deleted_at IS NULL
                    """
                var arguments: StatementArguments = [match.joined(separator: " AND "), request.appId]
                if let viewer = request.viewer {
                    sql += """
                         AND EXISTS (SELECT 1 FROM participants p WHERE p.conversation_pk = e.conversation_pk AND p.uid = ?)
                         AND NOT EXISTS (SELECT 1 FROM blocks b WHERE b.app_id = ? AND b.blocker = ? AND b.blocked = e.actor)
                        """
                    arguments += [viewer, request.appId, viewer]
                }
                if let sender = request.sender {
                    sql += " AND e.actor = ?"
                    arguments += [sender]
                }
                if let before = request.sentBefore {
                    sql += " AND e.created_at < ?"
                    arguments += [before]
                }
                if let after = request.sentAfter {
                    sql += " AND e.created_at >= ?"
                    arguments += [after]
                }
                if let before = page.before {
                    sql += " AND s.rowid < ?"
                    arguments += [before[0]]
                }
                sql += request.order == .relevance ? " ORDER BY s.rank, s.rowid DESC" : " ORDER BY s.rowid DESC"
                sql += " LIMIT ? OFFSET ?"
                arguments += [page.limit, page.offset]
                let rows = try Row.fetchAll(db, sql: sql, arguments: arguments)
                let decoder = JSONDecoder()
                // A message deleted since it was filed waits for its refiling: its tombstone is left out meanwhile.
                let messages = try rows.map { row in
                    let body: Data = row[1]
                    return try MessageLifecycle.message(in: body, decoder: decoder)
                }.filter { !$0.isDeleted }
                return MessageSearchPage(
                    messages: messages, nextCursor: page.nextCursor(rows: rows.count, last: rows.last.map { [$0[0]] })
                )
            }
        }
    }

    /// Runs `body` on `db`, stopped (``MessageSearch/timedOut(_:)``) once `limit` has passed: SQLite asks a progress
    /// handler every 100 steps of its virtual machine, which interrupts the statement after the deadline.
    static func within<T>(_ limit: Duration, on db: Database, _ body: () throws -> T) throws -> T {
        let deadline = SearchDeadline(.now + limit)
        do {
            // The handler is installed and removed while the deadline it reads is alive.
            return try withExtendedLifetime(deadline) {
                sqlite3_progress_handler(
                    db.sqliteConnection, 100,
                    { context in
                        guard let context else { return 0 }
                        let deadline = Unmanaged<SearchDeadline>.fromOpaque(context).takeUnretainedValue()
                        return ContinuousClock.now >= deadline.at ? 1 : 0
                    }, Unmanaged.passUnretained(deadline).toOpaque()
                )
                defer { sqlite3_progress_handler(db.sqliteConnection, 0, nil, nil) }
                return try body()
            }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_INTERRUPT {
            throw MessageSearch.timedOut(limit)
        }
    }
}

/// The deadline a search's progress handler reads (``SQLiteStore/within(_:on:_:)``), alive until the handler is
/// removed; read on the connection's own thread only.
private final class SearchDeadline {
    let at: ContinuousClock.Instant
    init(_ at: ContinuousClock.Instant) { self.at = at }
}
