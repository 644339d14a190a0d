import Foundation
import NIOCore
import ParleyProtocol
import ParleyStore
import PostgresNIO

// Edits, deletions, reactions and the reads that show them (see ``MessageLifecycle`` for the model). The commands
// run in the batch's transaction, holding the conversation's row lock (taken by the batch), like every command.

extension BatchTransaction {
    // MARK: Rows

    func fetchStoredMessage(_ conversationPK: Int64, messageId: String) async throws -> StoredMessage? {
        try await PostgresStore.fetchStoredMessage(session, conversationPK: conversationPK, messageId: messageId)
    }

    /// The message this sender stored first with this client message id.
    func storedMessage(_ conversationPK: Int64, _ sender: String, _ clientMessageId: String) async throws -> Message? {
        guard
            let body = try await session.value(
                """
                SELECT body FROM events WHERE conversation_pk = \(conversationPK) AND actor = \(sender)
                AND client_message_id = \(clientMessageId) AND client_message_id IS NOT NULL
                """,
                as: ByteBuffer.self
            )
        else { return nil }
        return try MessageLifecycle.message(in: body.readableBytesView)
    }

    /// Rewrites the bodies of the message's `sent`, `update` and `delete` events to `message`, and its search document.
    func rewriteMessageEvents(_ conversationPK: Int64, to message: Message) async throws {
        var seqs: [Int64] = []
        var bodies: [ByteBuffer] = []
        for row in try await rows(
            "SELECT seq, body FROM events WHERE conversation_pk = \(conversationPK) AND message_id = \(message.id)"
        ) {
            let (seq, body) = try row.decode((Int64, ByteBuffer).self)
            seqs.append(seq)
            bodies.append(ByteBuffer(bytes: try MessageLifecycle.rewritten(body.readableBytesView, to: message)))
        }
        guard !seqs.isEmpty else { return }
        try await execute(
            """
            UPDATE events e SET body = u.body, search = CASE WHEN e.message_index IS NOT NULL
                THEN \(unescaped: PostgresStore.searchDocumentSQL(words: "m.words", hasFile: "m.has_file")) END
            FROM unnest(\(seqs), \(bodies)) AS u(seq, body),
                (SELECT \(MessageSearch.words(of: message))::text AS words,
                    \(MessageSearch.hasFile(message))::boolean AS has_file) AS m
            WHERE e.conversation_pk = \(conversationPK) AND e.seq = u.seq
            """
        )
    }

    /// Records the message's mentions as unread for each mentioned participant who has not read that far.
    func insertMentions(appId: String, conversationPK: Int64, message: Message) async throws {
        guard let mentions = message.mentions, !mentions.isEmpty else { return }
        try await execute(
            """
            INSERT INTO mentions (app_id, uid, conversation_pk, seq, sent_at)
            SELECT \(appId), p.uid, p.conversation_pk, \(message.seq), \(message.sentAt) FROM participants p
            WHERE p.conversation_pk = \(conversationPK) AND p.uid = ANY(\(mentions)) AND p.read_seq < \(message.seq)
            ON CONFLICT DO NOTHING
            """
        )
    }
}

extension PostgresStore {
    static func fetchStoredMessage(_ session: PostgresSession, conversationPK: Int64, messageId: String) async throws
        -> StoredMessage?
    {
        guard
            let row = try await session.rows(
                """
                SELECT message_index, body FROM events
                WHERE conversation_pk = \(conversationPK) AND message_id = \(messageId) AND message_index IS NOT NULL
                """
            ).first
        else { return nil }
        let (index, body) = try row.decode((Int64, ByteBuffer).self)
        return StoredMessage(messageIndex: index, message: try MessageLifecycle.message(in: body.readableBytesView))
    }

    /// The reactions on the messages with the sequence numbers `seqs`, by message, as `viewer` sees them.
    static func fetchReactions(_ session: PostgresSession, conversationPK: Int64, seqs: [Int64], viewer: String?)
        async throws -> [Int64: [ReactionSummary]]
    {
        let rows = try await session.rows(
            """
            SELECT message_seq, key, count(*), bool_or(uid = \(viewer ?? "")), min(created_at) FROM reactions
            WHERE conversation_pk = \(conversationPK) AND message_seq = ANY(\(seqs))
            GROUP BY message_seq, key
            """
        )
        return ReactionRow.summaries(
            try rows.map { row in
                let (seq, key, count, reacted, firstAt) = try row.decode((Int64, String, Int64, Bool, Int64).self)
                return ReactionRow(messageSeq: seq, key: key, count: Int(count), reacted: reacted, firstAt: firstAt)
            }
        )
    }

    /// The thread summaries of the messages with the sequence numbers `seqs`, by message.
    static func fetchThreads(_ session: PostgresSession, conversationPK: Int64, seqs: [Int64]) async throws
        -> [Int64: ThreadSummary]
    {
        var threads: [Int64: ThreadSummary] = [:]
        for row in try await session.rows(
            """
            SELECT e.thread_seq, count(*) - count(d.message_index), max(e.created_at)
            FROM events e LEFT JOIN deleted_messages d
                ON d.conversation_pk = e.conversation_pk AND d.message_index = e.message_index
            WHERE e.conversation_pk = \(conversationPK) AND e.thread_seq IS NOT NULL AND e.thread_seq = ANY(\(seqs))
            GROUP BY e.thread_seq
            """
        ) {
            let (seq, count, last) = try row.decode((Int64, Int64, Int64).self)
            threads[seq] = ThreadSummary(replyCount: Int(count), lastReplyAt: last)
        }
        return threads
    }

    /// The pins of the messages with the sequence numbers `seqs`, by message.
    static func fetchPins(_ session: PostgresSession, conversationPK: Int64, seqs: [Int64]) async throws
        -> [Int64: PinRow]
    {
        var pins: [Int64: PinRow] = [:]
        for row in try await session.rows(
            """
            SELECT message_seq, pinned_by, pinned_at FROM pins
            WHERE conversation_pk = \(conversationPK) AND message_seq = ANY(\(seqs))
            """
        ) {
            let (seq, pinnedBy, pinnedAt) = try row.decode((Int64, String?, Int64).self)
            pins[seq] = PinRow(pinnedBy: pinnedBy, pinnedAt: pinnedAt)
        }
        return pins
    }

    /// The messages (of one conversation) as `viewer` reads them: with thread summaries, reactions and pins, read for
    /// exactly their sequence numbers (a page of a thread, or of pins, is spread over the conversation).
    static func reading(_ messages: [Message], _ session: PostgresSession, conversationPK: Int64, viewer: String?)
        async throws -> [Message]
    {
        guard !messages.isEmpty else { return messages }
        let seqs = messages.map(\.seq)
        let threads = try await fetchThreads(session, conversationPK: conversationPK, seqs: seqs)
        let reactions = try await fetchReactions(session, conversationPK: conversationPK, seqs: seqs, viewer: viewer)
        let pins = try await fetchPins(session, conversationPK: conversationPK, seqs: seqs)
        return messages.map {
            $0.reading(thread: threads[$0.seq], reactions: reactions[$0.seq], pin: pins[$0.seq])
        }
    }

    // MARK: Reads

    /// A conversation as a read sees it (no lock); nil when the app has none with this id.
    static func readConversation(_ session: PostgresSession, appId: String, id: String) async throws
        -> ConversationRow?
    {
        try await session.rows(
            """
            SELECT \(unescaped: conversationColumns()) FROM conversations WHERE id = \(id) AND app_id = \(appId)
            """
        ).first.map(conversationRow)
    }

    public func messages(appId: String, conversationId: String, query: HistoryQuery) async throws -> MessageHistory {
        try await withSession { session in
            // One snapshot: the page, its reactions and threads, and the position they are at agree.
            try await session.transaction(isolation: .repeatableReadOnly) {
                guard let row = try await Self.readConversation(session, appId: appId, id: conversationId) else {
                    return MessageHistory(messages: [], lastSeq: 0)
                }
                var parent: Message?
                let bodies: [PostgresRow]
                if let thread = query.thread {
                    guard
                        let stored = try await Self.fetchStoredMessage(
                            session, conversationPK: row.pk, messageId: thread
                        )
                    else { throw MessageLifecycle.notFound(thread) }
                    parent = try await Self.reading(
                        [stored.message], session, conversationPK: row.pk, viewer: query.viewer
                    ).first
                    bodies = try await session.rows(
                        """
                        SELECT body FROM events WHERE conversation_pk = \(row.pk) AND thread_seq = \(stored.message.seq)
                        AND ((\(query.afterSeq == nil) AND seq < \(query.beforeSeq ?? Int64.max))
                            OR seq > \(query.afterSeq ?? Int64.max))
                        ORDER BY CASE WHEN \(query.afterSeq == nil) THEN -seq ELSE seq END LIMIT \(query.limit)
                        """
                    )
                } else {
                    bodies = try await session.rows(
                        query.afterSeq.map { after in
                            """
                            SELECT body FROM events WHERE conversation_pk = \(row.pk) AND seq > \(after)
                            AND message_index IS NOT NULL ORDER BY seq ASC LIMIT \(query.limit)
                            """
                        }
                            ?? """
                            SELECT body FROM events WHERE conversation_pk = \(row.pk)
                            AND seq < \(query.beforeSeq ?? Int64.max)
                            AND message_index IS NOT NULL ORDER BY seq DESC LIMIT \(query.limit)
                            """
                    )
                }
                let decoder = JSONDecoder()
                let messages = try bodies.map {
                    try MessageLifecycle.message(in: try $0.decode(ByteBuffer.self).readableBytesView, decoder: decoder)
                }
                return MessageHistory(
                    messages: try await Self.reading(messages, session, conversationPK: row.pk, viewer: query.viewer),
                    lastSeq: row.conversation.lastSeq, parent: parent
                )
            }
        }
    }

    public func message(appId: String, conversationId: String, messageId: String, viewer: String?) async throws
        -> Message?
    {
        try await withSession { session in
            try await session.transaction(isolation: .repeatableReadOnly) {
                guard
                    let pk = try await session.value(
                        "SELECT pk FROM conversations WHERE id = \(conversationId) AND app_id = \(appId)",
                        as: Int64.self
                    ),
                    let stored = try await Self.fetchStoredMessage(session, conversationPK: pk, messageId: messageId)
                else { return nil }
                return try await Self.reading([stored.message], session, conversationPK: pk, viewer: viewer).first
            }
        }
    }

    public func pinnedMessages(appId: String, conversationId: String, viewer: String?) async throws -> MessageHistory {
        try await withSession { session in
            // One snapshot: the pins, their messages and the position they are at agree.
            try await session.transaction(isolation: .repeatableReadOnly) {
                guard let row = try await Self.readConversation(session, appId: appId, id: conversationId) else {
                    return MessageHistory(messages: [], lastSeq: 0)
                }
                let decoder = JSONDecoder()
                let messages = try await session.rows(
                    """
                    SELECT e.body FROM pins p
                    JOIN events e ON e.conversation_pk = p.conversation_pk AND e.seq = p.message_seq
                    WHERE p.conversation_pk = \(row.pk) ORDER BY p.pinned_at DESC, p.message_seq DESC
                    """
                ).map {
                    try MessageLifecycle.message(in: try $0.decode(ByteBuffer.self).readableBytesView, decoder: decoder)
                }
                return MessageHistory(
                    messages: try await Self.reading(messages, session, conversationPK: row.pk, viewer: viewer),
                    lastSeq: row.conversation.lastSeq
                )
            }
        }
    }

    public func unreadMentions(appId: String, uid: String, after: MentionPosition?, limit: Int) async throws
        -> [MentionRow]
    {
        try await withSession { session in
            try await session.transaction(isolation: .repeatableReadOnly) {
                let rows = try await session.rows(
                    """
                    SELECT m.sent_at, m.conversation_pk, m.seq, e.body FROM mentions m
                    JOIN participants p ON p.conversation_pk = m.conversation_pk AND p.uid = m.uid
                    JOIN conversations c ON c.pk = m.conversation_pk AND c.deleted_at IS NULL
                    JOIN events e ON e.conversation_pk = m.conversation_pk AND e.seq = m.seq
                    WHERE m.app_id = \(appId) AND m.uid = \(uid) AND m.seq > p.read_seq
                    AND (\(after == nil) OR (m.sent_at, m.conversation_pk, m.seq)
                        < (\(after?.sentAt ?? 0), \(after?.conversationPK ?? 0), \(after?.seq ?? 0)))
                    ORDER BY m.sent_at DESC, m.conversation_pk DESC, m.seq DESC LIMIT \(limit)
                    """
                )
                let decoder = JSONDecoder()
                var mentions: [MentionRow] = []
                for row in rows {
                    let (sentAt, pk, seq, body) = try row.decode((Int64, Int64, Int64, ByteBuffer).self)
                    let message = try MessageLifecycle.message(in: body.readableBytesView, decoder: decoder)
                    mentions.append(
                        MentionRow(
                            message: try await Self.reading([message], session, conversationPK: pk, viewer: uid)[0],
                            position: MentionPosition(sentAt: sentAt, conversationPK: pk, seq: seq)
                        )
                    )
                }
                return mentions
            }
        }
    }
}
