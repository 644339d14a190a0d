import Foundation
import NIOCore
import ParleyProtocol
import ParleyStore
import PostgresNIO

// Message search on PostgreSQL: a `tsvector` per message in `events.search`, with a GIN index.
//
// The document is written with the message, in its transaction (the INSERT of `EventColumns`), and rewritten with its
// bodies by an edit or a deletion: on PostgreSQL, GIN's pending list (`fastupdate`) already defers the index's work
// to a bulk merge. The words are ``MessageSearch/words(of:)`` (folded by Parley, so no extension such as `unaccent` is
// needed), read with the `simple` configuration; a message with a file also has the lexeme `#file`, which no word can
// be. Messages stored before the search existed have no document (NULL) until ``fileSearchIndex(limit:)`` writes it.

extension PostgresStore {
    /// The SQL of a message's search document, from the SQL expressions of its words and of whether it has a file.
    static func searchDocumentSQL(words: String, hasFile: String) -> String {
        "to_tsvector('simple', \(words)) || CASE WHEN \(hasFile) THEN '''#file'''::tsvector ELSE ''::tsvector END"
    }

    public func fileSearchIndex(limit: Int) async throws -> Int {
        try await withSession { session in
            try await session.transaction {
                let rows = try await session.rows(
                    """
                    SELECT conversation_pk, seq, body FROM events
                    WHERE search IS NULL AND message_index IS NOT NULL
                    ORDER BY conversation_pk, seq LIMIT \(limit) FOR UPDATE SKIP LOCKED
                    """
                )
                guard !rows.isEmpty else { return 0 }
                var pks: [Int64] = []
                var seqs: [Int64] = []
                var words: [String] = []
                var files: [Bool] = []
                let decoder = JSONDecoder()
                for row in rows {
                    let (pk, seq, body) = try row.decode((Int64, Int64, ByteBuffer).self)
                    let message = try MessageLifecycle.message(in: body.readableBytesView, decoder: decoder)
                    pks.append(pk)
                    seqs.append(seq)
                    words.append(MessageSearch.words(of: message))
                    files.append(MessageSearch.hasFile(message))
                }
                try await session.execute(
                    """
                    UPDATE events e SET search = \(unescaped: Self.searchDocumentSQL(words: "u.words", hasFile: "u.has_file"))
                    FROM unnest(\(pks), \(seqs), \(words), \(files)) AS u(pk, seq, words, has_file)
                    WHERE e.conversation_pk = u.pk AND e.seq = u.seq
                    """
                )
                return rows.count
            }
        }
    }

    public func searchMessages(_ request: MessageSearchRequest) async throws -> MessageSearchPage {
        let page = try SearchPagePlan(request, positionFields: 3)
        let terms = request.query.terms.isEmpty ? nil : request.query.tsqueryText
        guard terms != nil || request.hasFile else { return MessageSearchPage(messages: [], nextCursor: nil) }
        let relevance = request.order == .relevance
        // Only the conditions that apply, each value bound: with `$n IS NULL OR ...` the planner cannot pick the
        // conversations' index or the text index for the case at hand (seconds instead of milliseconds over 1,000,000
        // messages).
        var binds = PostgresBindings()
        func bind(_ value: some PostgresNonThrowingEncodable & Sendable) -> String {
            binds.append(value)
            return "$\(binds.count)"
        }
        var conditions = ["c.app_id = \(bind(request.appId))", "c.deleted_at IS NULL"]
        let match = terms.map { "to_tsquery('simple', \(bind($0)))" }
        if let match { conditions.append("e.search @@ \(match)") }
        if request.hasFile { conditions.append("e.search @@ '''#file'''::tsquery") }
        if let conversationId = request.conversationId {
            // By key, known when the statement is planned: the conversation's events newest first, the text checked
            // on each (or its index, when the planner expects few matches).
            guard
                let pk = try await withSession({ session in
                    try await session.value(
                        "SELECT pk FROM conversations WHERE id = \(conversationId) AND app_id = \(request.appId)",
                        as: Int64.self
                    )
                })
            else { return MessageSearchPage(messages: [], nextCursor: nil) }
            conditions.append("e.conversation_pk = \(bind(pk))")
        }
        if let viewer = request.viewer {
            conditions.append(
                "e.conversation_pk IN (SELECT conversation_pk FROM participants WHERE uid = \(bind(viewer)))")
            conditions.append(
                "NOT EXISTS (SELECT 1 FROM blocks b WHERE b.app_id = c.app_id AND b.blocker = \(bind(viewer)) "
                    + "AND b.blocked = e.actor)"
            )
        }
        if let sender = request.sender { conditions.append("e.actor = \(bind(sender))") }
        if let before = request.sentBefore { conditions.append("e.created_at < \(bind(before))") }
        if let after = request.sentAfter { conditions.append("e.created_at >= \(bind(after))") }
        if let position = page.before {
            conditions.append(
                "(e.created_at, e.conversation_pk, e.seq) < (\(bind(position[0])), \(bind(position[1])), "
                    + "\(bind(position[2])))"
            )
        }
        let newest = "e.created_at DESC, e.conversation_pk DESC, e.seq DESC"
        let order = relevance ? "ts_rank(e.search, \(match ?? "''::tsquery")) DESC, " + newest : newest
        let sql = """
            SELECT e.created_at, e.conversation_pk, e.seq, e.body FROM events e
            JOIN conversations c ON c.pk = e.conversation_pk
            WHERE \(conditions.joined(separator: " AND "))
            ORDER BY \(order) LIMIT \(bind(page.limit)) OFFSET \(bind(page.offset))
            """
        let query = PostgresQuery(unsafeSQL: sql, binds: binds)
        // The statement's own bound: PostgreSQL cancels it (57014) once the time is up.
        let milliseconds = max(
            1,
            request.timeLimit.components.seconds * 1_000
                + request.timeLimit.components.attoseconds / 1_000_000_000_000_000)
        return try await withSession { session in
            let rows: [PostgresRow]
            do {
                rows = try await session.transaction(isolation: .repeatableReadOnly) {
                    try await session.execute(PostgresQuery(unsafeSQL: "SET LOCAL statement_timeout = \(milliseconds)"))
                    return try await session.rows(query)
                }
            } catch let error as PSQLError where error.sqlState == "57014" {
                throw MessageSearch.timedOut(request.timeLimit)
            }
            let decoder = JSONDecoder()
            var messages: [Message] = []
            var last: [Int64]?
            for row in rows {
                let (sentAt, pk, seq, body) = try row.decode((Int64, Int64, Int64, ByteBuffer).self)
                messages.append(try MessageLifecycle.message(in: body.readableBytesView, decoder: decoder))
                last = [sentAt, pk, seq]
            }
            return MessageSearchPage(messages: messages, nextCursor: page.nextCursor(rows: rows.count, last: last))
        }
    }
}
