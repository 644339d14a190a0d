import Foundation
import GRDB

// Finding messages in the log by id and by client message id.
//
// `events` is a log (rowid order) with one (conversation, seq) index. A message is also found by its id (edits,
// deletions, reactions, replies, reads by id) and by its sender's client message id (repeats of a send). Those two
// lookups are tables filed from the log in bulk, every `logIndexInterval` events, rather than two index entries written
// with every message: with a message or two per transaction each entry is a page of its own in the WAL, ~20-30 µs a
// message (docs/BENCHMARKS.md, "The storage floor by layout"). `log_state.indexed_through` is the last log position
// filed; what is past it, the tail, is read from the log itself: by readers with a scan of the tail (at most
// `logIndexInterval` rows), by the writer's sends from the tail's client ids kept in memory (`SendBatch.Known`).
// The filing commits with a batch's transaction, so the tables and `indexed_through` always agree; after a crash the
// tail is filed when the store opens, and the first open after the migration files the whole log.

extension SQLiteStore {
    /// Log positions past the last filed after which a batch files the tail (see above). Also the most rows a lookup
    /// by id reads from the log.
    static let logIndexInterval: Int64 = 256

    /// The last log position filed in `message_ids` and `client_message_ids`.
    static func indexedThrough(_ db: Database) throws -> Int64 {
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT indexed_through FROM log_state WHERE id = 1")) ?? 0
    }

    /// The last position in the log (0 when it is empty).
    static func lastLogPosition(_ db: Database) throws -> Int64 {
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT coalesce(max(position), 0) FROM events")) ?? 0
    }

    /// Files the log's rows past `indexed_through` in the id tables and moves it to the end; returns the new end.
    /// A client message id already filed keeps its first message (the sends never store a second one).
    @discardableResult
    static func indexLogTail(_ db: Database) throws -> Int64 {
        let through = try indexedThrough(db)
        let last = try lastLogPosition(db)
        guard last > through else { return through }
        try db.cachedStatement(
            sql: """
                INSERT OR IGNORE INTO message_ids (message_id, conversation_pk, seq)
                SELECT message_id, conversation_pk, seq FROM events
                WHERE position > ? AND message_id IS NOT NULL ORDER BY message_id
                """
        ).execute(arguments: [through])
        try db.cachedStatement(
            sql: """
                INSERT OR IGNORE INTO client_message_ids (client_message_id, conversation_pk, actor, seq)
                SELECT client_message_id, conversation_pk, actor, seq FROM events
                WHERE position > ? AND client_message_id IS NOT NULL AND actor IS NOT NULL ORDER BY position
                """
        ).execute(arguments: [through])
        try db.cachedStatement(sql: "UPDATE log_state SET indexed_through = ? WHERE id = 1").execute(arguments: [last])
        return last
    }

    /// The sequence numbers of the events that carry `messageId` in the conversation (its `sent` event, then its
    /// updates and deletion), in order: filed ones, then the tail's.
    static func messageEventSeqs(_ db: Database, conversationPK: Int64, messageId: String) throws -> [Int64] {
        let filed = try Int64.fetchAll(
            db.cachedStatement(sql: "SELECT seq FROM message_ids WHERE message_id = ? AND conversation_pk = ?"),
            arguments: [messageId, conversationPK]
        )
        let tail = try Int64.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT seq FROM events
                    WHERE position > (SELECT indexed_through FROM log_state WHERE id = 1)
                    AND message_id = ? AND conversation_pk = ?
                    """
            ),
            arguments: [messageId, conversationPK]
        )
        return (filed + tail).sorted()
    }

    /// The sequence number of the message `sender` stored first with `clientMessageId` in the conversation, among the
    /// filed ones (the tail's are the writer's to know, ``SendBatch``).
    static func filedClientMessageSeq(
        _ db: Database, conversationPK: Int64, sender: String, clientMessageId: String
    ) throws -> Int64? {
        try Int64.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT seq FROM client_message_ids
                    WHERE client_message_id = ? AND conversation_pk = ? AND actor = ?
                    """
            ),
            arguments: [clientMessageId, conversationPK, sender]
        )
    }

    /// The client message ids in the log's tail, with their messages' sequence numbers, and where the tail begins.
    static func clientIdsInTail(_ db: Database) throws -> (through: Int64, ids: [ClientMessageKey: Int64]) {
        let through = try indexedThrough(db)
        var ids: [ClientMessageKey: Int64] = [:]
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT client_message_id, conversation_pk, actor, seq FROM events
                    WHERE position > ? AND client_message_id IS NOT NULL AND actor IS NOT NULL ORDER BY position
                    """
            ),
            arguments: [through]
        )
        while let row = try rows.next() {
            let key = ClientMessageKey(clientMessageId: row[0], conversationPK: row[1], sender: row[2])
            if ids[key] == nil { ids[key] = row[3] }
        }
        return (through, ids)
    }
}

/// A sender's client message id in a conversation: what a repeat of a send is recognized by.
struct ClientMessageKey: Hashable, Sendable {
    var clientMessageId: String
    var conversationPK: Int64
    var sender: String
}
