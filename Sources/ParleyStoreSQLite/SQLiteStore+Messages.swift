import Foundation
import GRDB
import ParleyProtocol
import ParleyStore

// Edits, deletions, reactions and the reads that show them (see ``MessageLifecycle`` for the model).

extension SQLiteStore {
    // MARK: Rows

    static func fetchStoredMessage(_ db: Database, conversationPK: Int64, messageId: String) throws -> StoredMessage? {
        // Its `sent` event is the first that carries its id.
        for seq in try messageEventSeqs(db, conversationPK: conversationPK, messageId: messageId) {
            guard
                let row = try Row.fetchOne(
                    db.cachedStatement(
                        sql: """
                            SELECT message_index, body FROM events
                            WHERE conversation_pk = ? AND seq = ? AND message_index IS NOT NULL
                            """
                    ),
                    arguments: [conversationPK, seq]
                )
            else { continue }
            let body: Data = row[1]
            return StoredMessage(messageIndex: row[0], message: try MessageLifecycle.message(in: body))
        }
        return nil
    }

    /// Rewrites the bodies of the message's `sent`, `update` and `delete` events to `message`.
    static func rewriteMessageEvents(_ db: Database, conversationPK: Int64, to message: Message) throws {
        for seq in try messageEventSeqs(db, conversationPK: conversationPK, messageId: message.id) {
            guard
                let body = try Data.fetchOne(
                    db.cachedStatement(sql: "SELECT body FROM events WHERE conversation_pk = ? AND seq = ?"),
                    arguments: [conversationPK, seq]
                )
            else { continue }
            try db.cachedStatement(sql: "UPDATE events SET body = ? WHERE conversation_pk = ? AND seq = ?").execute(
                arguments: [Data(try MessageLifecycle.rewritten(body, to: message)), conversationPK, seq]
            )
        }
    }

    /// Records the message's mentions as unread for each mentioned participant who has not read that far.
    static func insertMentions(_ db: Database, appId: String, conversationPK: Int64, message: Message) throws {
        for uid in message.mentions ?? [] {
            try db.cachedStatement(
                sql: """
                    INSERT OR IGNORE INTO mentions (app_id, uid, conversation_pk, seq, sent_at)
                    SELECT ?, ?, ?, ?, ? FROM participants
                    WHERE conversation_pk = ? AND uid = ? AND read_seq < ?
                    """
            ).execute(
                arguments: [appId, uid, conversationPK, message.seq, message.sentAt, conversationPK, uid, message.seq]
            )
        }
    }

    /// The reactions on the messages with the sequence numbers `seqs` (a JSON array), by message, as `viewer` sees
    /// them.
    static func fetchReactions(_ db: Database, conversationPK: Int64, seqs: String, viewer: String?) throws
        -> [Int64: [ReactionSummary]]
    {
        let rows = try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT message_seq, key, COUNT(*), MAX(uid = ?), MIN(created_at) FROM reactions
                    WHERE conversation_pk = ? AND message_seq IN (SELECT value FROM json_each(?))
                    GROUP BY message_seq, key
                    """
            ),
            arguments: [viewer ?? "", conversationPK, seqs]
        )
        return ReactionRow.summaries(
            rows.map { ReactionRow(messageSeq: $0[0], key: $0[1], count: $0[2], reacted: $0[3], firstAt: $0[4]) }
        )
    }

    /// The thread summaries of the messages with the sequence numbers `seqs` (a JSON array), by message.
    static func fetchThreads(_ db: Database, conversationPK: Int64, seqs: String) throws -> [Int64: ThreadSummary] {
        let rows = try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT e.thread_seq, COUNT(*) - COUNT(d.message_index), MAX(e.created_at)
                    FROM events e LEFT JOIN deleted_messages d
                        ON d.conversation_pk = e.conversation_pk AND d.message_index = e.message_index
                    WHERE e.conversation_pk = ? AND e.thread_seq IS NOT NULL
                        AND e.thread_seq IN (SELECT value FROM json_each(?))
                    GROUP BY e.thread_seq
                    """
            ),
            arguments: [conversationPK, seqs]
        )
        var threads: [Int64: ThreadSummary] = [:]
        for row in rows { threads[row[0]] = ThreadSummary(replyCount: row[1], lastReplyAt: row[2]) }
        return threads
    }

    /// The pins of the messages with the sequence numbers `seqs` (a JSON array), by message.
    static func fetchPins(_ db: Database, conversationPK: Int64, seqs: String) throws -> [Int64: PinRow] {
        var pins: [Int64: PinRow] = [:]
        for row in try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT message_seq, pinned_by, pinned_at FROM pins
                    WHERE conversation_pk = ? AND message_seq IN (SELECT value FROM json_each(?))
                    """
            ),
            arguments: [conversationPK, seqs]
        ) {
            pins[row[0]] = PinRow(pinnedBy: row[1], pinnedAt: row[2])
        }
        return pins
    }

    /// The messages (of one conversation) as `viewer` reads them: with thread summaries, reactions and pins, read for
    /// exactly their sequence numbers (a page of a thread, or of pins, is spread over the conversation).
    static func reading(_ messages: [Message], _ db: Database, conversationPK: Int64, viewer: String?) throws
        -> [Message]
    {
        guard !messages.isEmpty else { return messages }
        let seqs = "[" + messages.map { String($0.seq) }.joined(separator: ",") + "]"
        let threads = try fetchThreads(db, conversationPK: conversationPK, seqs: seqs)
        let reactions = try fetchReactions(db, conversationPK: conversationPK, seqs: seqs, viewer: viewer)
        let pins = try fetchPins(db, conversationPK: conversationPK, seqs: seqs)
        return messages.map {
            $0.reading(thread: threads[$0.seq], reactions: reactions[$0.seq], pin: pins[$0.seq])
        }
    }

    // MARK: Reads

    /// A history page's range and order, with two parameters (the position, the limit): newest first before a
    /// position, oldest first after one (``HistoryQuery/afterSeq``).
    static func range(_ query: HistoryQuery) -> String {
        query.afterSeq == nil ? "seq < ? ORDER BY seq DESC LIMIT ?" : "seq > ? ORDER BY seq ASC LIMIT ?"
    }

    public func messages(appId: String, conversationId: String, query: HistoryQuery) async throws -> MessageHistory {
        try await pool.read { db in
            guard let row = try Self.fetchConversation(db, appId: appId, id: conversationId) else {
                return MessageHistory(messages: [], lastSeq: 0)
            }
            let decoder = JSONDecoder()
            var parent: Message?
            let bodies: [Data]
            if let thread = query.thread {
                guard let stored = try Self.fetchStoredMessage(db, conversationPK: row.pk, messageId: thread) else {
                    throw MessageLifecycle.notFound(thread)
                }
                parent = try Self.reading([stored.message], db, conversationPK: row.pk, viewer: query.viewer).first
                bodies = try Data.fetchAll(
                    db,
                    sql: """
                        SELECT body FROM events WHERE conversation_pk = ? AND thread_seq = ? AND \(Self.range(query))
                        """,
                    arguments: [
                        row.pk, stored.message.seq, query.afterSeq ?? query.beforeSeq ?? Int64.max, query.limit,
                    ]
                )
            } else {
                bodies = try Data.fetchAll(
                    db,
                    sql: """
                        SELECT body FROM events WHERE conversation_pk = ? AND message_index IS NOT NULL
                        AND \(Self.range(query))
                        """,
                    arguments: [row.pk, query.afterSeq ?? query.beforeSeq ?? Int64.max, query.limit]
                )
            }
            let messages = try bodies.map { try MessageLifecycle.message(in: $0, decoder: decoder) }
            return MessageHistory(
                messages: try Self.reading(messages, db, conversationPK: row.pk, viewer: query.viewer),
                lastSeq: row.conversation.lastSeq, parent: parent
            )
        }
    }

    public func message(appId: String, conversationId: String, messageId: String, viewer: String?) async throws
        -> Message?
    {
        try await pool.read { db in
            guard let row = try Self.fetchConversation(db, appId: appId, id: conversationId),
                let stored = try Self.fetchStoredMessage(db, conversationPK: row.pk, messageId: messageId)
            else { return nil }
            return try Self.reading([stored.message], db, conversationPK: row.pk, viewer: viewer).first
        }
    }

    public func pinnedMessages(appId: String, conversationId: String, viewer: String?) async throws -> MessageHistory {
        try await pool.read { db in
            guard let row = try Self.fetchConversation(db, appId: appId, id: conversationId) else {
                return MessageHistory(messages: [], lastSeq: 0)
            }
            let bodies = try Data.fetchAll(
                db,
                sql: """
                    SELECT e.body FROM pins p
                    JOIN events e ON e.conversation_pk = p.conversation_pk AND e.seq = p.message_seq
                    WHERE p.conversation_pk = ? ORDER BY p.pinned_at DESC, p.message_seq DESC
                    """,
                arguments: [row.pk]
            )
            let decoder = JSONDecoder()
            let messages = try bodies.map { try MessageLifecycle.message(in: $0, decoder: decoder) }
            return MessageHistory(
                messages: try Self.reading(messages, db, conversationPK: row.pk, viewer: viewer),
                lastSeq: row.conversation.lastSeq
            )
        }
    }

    public func unreadMentions(appId: String, uid: String, after: MentionPosition?, limit: Int) async throws
        -> [MentionRow]
    {
        try await pool.read { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT m.sent_at, m.conversation_pk, m.seq, e.body FROM mentions m
                    JOIN participants p ON p.conversation_pk = m.conversation_pk AND p.uid = m.uid
                    JOIN conversations c ON c.pk = m.conversation_pk AND c.deleted_at IS NULL
                    JOIN events e ON e.conversation_pk = m.conversation_pk AND e.seq = m.seq
                    WHERE m.app_id = ? AND m.uid = ? AND m.seq > p.read_seq
                    AND (? IS NULL OR (m.sent_at, m.conversation_pk, m.seq) < (?, ?, ?))
                    ORDER BY m.sent_at DESC, m.conversation_pk DESC, m.seq DESC LIMIT ?
                    """,
                arguments: [
                    appId, uid, after?.sentAt, after?.sentAt, after?.conversationPK, after?.seq, limit,
                ]
            )
            let decoder = JSONDecoder()
            return try rows.map { row in
                let position = MentionPosition(sentAt: row[0], conversationPK: row[1], seq: row[2])
                let body: Data = row[3]
                let message = try MessageLifecycle.message(in: body, decoder: decoder)
                return MentionRow(
                    message: try Self.reading([message], db, conversationPK: position.conversationPK, viewer: uid)[0],
                    position: position
                )
            }
        }
    }
}
