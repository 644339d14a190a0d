import Foundation
import GRDB
import ParleyProtocol
import ParleyStore

// Message search on SQLite: an FTS5 index filed from the log after the commit.
//
// `message_search` is a contentless FTS5 table (it keeps the index, not a copy of the text): a message's row has the
// rowid of its `sent` event in the log, its words (``MessageSearch/words(of:)``) and its facets (`c<conversation pk>`,
// and `file` when it carries one), which make the conversation and has-a-file filters part of the index's own search.
// New messages are filed in bulk after their commit (``fileSearchIndex(limit:)``, called by the server's
// `SearchIndexer`): filed with every message, each commit would write an FTS segment of its own, several pages a
// message on the send path. `log_state.searched_through` is the last log position filed. An edit or a deletion of a
// message already filed takes its old words out of the index in its own transaction (a contentless table is told the
// exact words to remove, and only the writer knows them before the rewrite) and files the new ones, so the index never
// finds a message by words it no longer has.

extension SQLiteStore {
    /// The words and facets of a message's row in `message_search`; nil when it has none (a deleted message, or one
    /// with neither words nor a file).
    static func searchRow(of message: Message, conversationPK: Int64) -> (words: String, facets: String)? {
        let words = MessageSearch.words(of: message)
        let hasFile = MessageSearch.hasFile(message)
        guard !words.isEmpty || hasFile else { return nil }
        return (words, "c\(conversationPK)" + (hasFile ? " file" : ""))
    }

    /// The last log position filed in `message_search`.
    static func searchedThrough(_ db: Database) throws -> Int64 {
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT searched_through FROM log_state WHERE id = 1")) ?? 0
    }

    static func insertSearchRow(_ db: Database, position: Int64, message: Message, conversationPK: Int64) throws {
        guard let row = searchRow(of: message, conversationPK: conversationPK) else { return }
        try db.cachedStatement(sql: "INSERT INTO message_search (rowid, words, facets) VALUES (?, ?, ?)")
            .execute(arguments: [position, row.words, row.facets])
    }

    /// A message at `position` changes from `old` to `new` (an edit or a deletion, in the writer's transaction): when
    /// it is filed already, its old row leaves the index and its new one (if any) is filed.
    static func refileSearchRow(
        _ db: Database, position: Int64, conversationPK: Int64, old: Message, new: Message
    ) throws {
        guard position <= (try searchedThrough(db)) else { return }  // filed later, as it is then
        if let row = searchRow(of: old, conversationPK: conversationPK) {
            try db.cachedStatement(
                sql: "INSERT INTO message_search (message_search, rowid, words, facets) VALUES ('delete', ?, ?, ?)"
            ).execute(arguments: [position, row.words, row.facets])
        }
        try insertSearchRow(db, position: position, message: new, conversationPK: conversationPK)
    }

    public func fileSearchIndex(limit: Int) async throws -> Int {
        try await pool.write { db in
            let through = try Self.searchedThrough(db)
            let rows = try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT position, conversation_pk, body FROM events
                        WHERE position > ? AND message_index IS NOT NULL ORDER BY position LIMIT ?
                        """
                ),
                arguments: [through, limit]
            )
            let decoder = JSONDecoder()
            for row in rows {
                let body: Data = row[2]
                try Self.insertSearchRow(
                    db, position: row[0], message: try MessageLifecycle.message(in: body, decoder: decoder),
                    conversationPK: row[1]
                )
            }
            // A short page filed everything there was: the position moves to the log's end (past the events that are
            // not messages).
            let end = rows.count < limit ? try Self.lastLogPosition(db) : rows.last.map { $0[0] as Int64 } ?? through
            if end > through {
                try db.cachedStatement(sql: "UPDATE log_state SET searched_through = ? WHERE id = 1")
                    .execute(arguments: [end])
            }
            return rows.count
        }
    }

    public func searchMessages(_ request: MessageSearchRequest) async throws -> MessageSearchPage {
        let cursor = try request.cursor.map { try SearchCursor.parse($0, order: request.order, fields: 1) }
        return try await pool.read { db in
            var match: [String] = []
            if !request.query.terms.isEmpty { match.append("words : (\(request.query.fts5Expression))") }
            if let conversationId = request.conversationId {
                guard let row = try Self.fetchConversation(db, appId: request.appId, id: conversationId) else {
                    return MessageSearchPage(messages: [], nextCursor: nil)
                }
                match.append("facets : \"c\(row.pk)\"")
            }
            if request.hasFile { match.append("facets : \"file\"") }
            guard !match.isEmpty else { return MessageSearchPage(messages: [], nextCursor: nil) }
            var sql = """
                SELECT s.rowid, e.body FROM message_search s
                JOIN events e ON e.position = s.rowid
                JOIN conversations c ON c.pk = e.conversation_pk
                WHERE message_search MATCH ? AND c.app_id = ? AND c.deleted_at IS NULL
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
            var offset = 0
            switch (request.order, cursor) {
            case (.newest, let cursor):
                if case .position(let values) = cursor {
                    sql += " AND s.rowid < ?"
                    arguments += [values[0]]
                }
                sql += " ORDER BY s.rowid DESC LIMIT ?"
                arguments += [request.limit]
            case (.relevance, let cursor):
                if case .offset(let count) = cursor { offset = count }
                sql += " ORDER BY s.rank, s.rowid DESC LIMIT ? OFFSET ?"
                arguments += [min(request.limit, MessageSearch.maxRelevanceResults - offset), offset]
            }
            let rows = try Row.fetchAll(db, sql: sql, arguments: arguments)
            let decoder = JSONDecoder()
            let messages = try rows.map { row in
                let body: Data = row[1]
                return try MessageLifecycle.message(in: body, decoder: decoder)
            }
            var next: SearchCursor?
            if rows.count == request.limit, let last = rows.last {
                switch request.order {
                case .newest: next = .position([last[0]])
                case .relevance:
                    let shown = offset + rows.count
                    next = shown < MessageSearch.maxRelevanceResults ? .offset(shown) : nil
                }
            }
            return MessageSearchPage(messages: messages, nextCursor: next?.string)
        }
    }
}
