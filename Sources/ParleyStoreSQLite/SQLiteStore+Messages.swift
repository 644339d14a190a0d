import Foundation
import GRDB
import ParleyProtocol
import ParleyStore

// Edits, deletions, reactions and the reads that show them (see ``MessageLifecycle`` for the model).

extension SQLiteStore {
    // MARK: Commands

    static func editMessage(_ edit: Command.EditMessage, in db: Database) throws -> CommandResult {
        let (row, role) = try participation(db, appId: edit.appId, id: edit.conversationId, uid: edit.actor)
        guard let stored = try fetchStoredMessage(db, conversationPK: row.pk, messageId: edit.messageId) else {
            throw MessageLifecycle.notFound(edit.messageId)
        }
        let message = stored.message
        try MessageLifecycle.requireEdit(message, actor: edit.actor, role: role, roles: row.conversation.roles)
        let participants = try participantUIDs(db, conversationPK: row.pk)
        let members = Set(participants)
        let mentions = edit.mentions.map {
            MessageLifecycle.keptMentions($0, sender: message.sender, isParticipant: members.contains)
        }
        let files = MessageLifecycle.FileChange(from: message.parts, to: edit.parts)
        var parts = edit.parts
        if !files.named.isEmpty {
            parts = try Attachments.resolve(
                parts, records: try fetchAttachments(db, appId: row.appId, ids: files.named), appId: row.appId,
                conversationId: row.conversation.id, actor: edit.actor, keeping: files.kept
            )
        }
        guard
            let edited = MessageLifecycle.edited(
                message, parts: parts, metadata: edit.metadata, mentions: mentions, at: edit.now
            )
        else {
            return CommandResult(outcome: .message(message, duplicate: true), events: [], recipients: participants)
        }
        try MessageLifecycle.requireWithinLimits(edited, edit.limits)
        // After the repeat's answer: an edit made before a block or a mute and retried after it is the edit made then.
        try requireNotMuted(db, conversationPK: row.pk, uid: edit.actor, now: edit.now)
        if row.conversation.type == .direct {
            try requireNoBlock(db, appId: row.appId, actor: edit.actor, direct: participants)
        }
        try rewriteMessageEvents(db, conversationPK: row.pk, to: edited)
        try attachFiles(db, appId: row.appId, ids: files.added, messageId: message.id)
        try removeFiles(db, appId: row.appId, ids: files.dropped, now: edit.now)
        if edited.mentions != message.mentions {
            try db.execute(
                sql: "DELETE FROM mentions WHERE conversation_pk = ? AND seq = ?", arguments: [row.pk, message.seq]
            )
            try insertMentions(db, appId: row.appId, conversationPK: row.pk, message: edited)
        }
        var writer = EventWriter(db: db, row: row, now: edit.now, actor: edit.actor)
        try writer.append(.messageUpdate, .messageUpdated(edited))
        try writer.finish(participantCount: nil, activity: false)
        return CommandResult(
            outcome: .message(edited, duplicate: false), events: writer.events, recipients: participants
        )
    }

    static func deleteMessage(_ action: Command.MessageAction, in db: Database) throws -> CommandResult {
        let (row, role) = try acting(db, appId: action.appId, id: action.conversationId, actor: action.actor)
        guard let stored = try fetchStoredMessage(db, conversationPK: row.pk, messageId: action.messageId) else {
            throw MessageLifecycle.notFound(action.messageId)
        }
        let message = stored.message
        let participants = try participantUIDs(db, conversationPK: row.pk)
        // Who may not delete it is refused even when it is gone already: the answer does not depend on timing.
        if let actor = action.actor, let role {
            try MessageLifecycle.requireDelete(message, actor: actor, role: role, roles: row.conversation.roles)
        }
        guard !message.isDeleted else {
            return CommandResult(outcome: .message(message, duplicate: true), events: [], recipients: participants)
        }
        let tombstone = MessageLifecycle.tombstone(of: message, by: action.actor, at: action.now)
        try rewriteMessageEvents(db, conversationPK: row.pk, to: tombstone)
        try removeFiles(db, appId: row.appId, ids: Attachments.ids(in: message.parts), now: action.now)
        // What hung on the message goes with it: reactions, unread mentions, pushes not sent yet.
        try db.execute(
            sql: """
                DELETE FROM reactions WHERE conversation_pk = ? AND message_seq = ?;
                DELETE FROM mentions WHERE conversation_pk = ? AND seq = ?;
                DELETE FROM push_outbox WHERE conversation_pk = ? AND seq = ?;
                DELETE FROM push_jobs WHERE app_id = ? AND collapse_id = ?;
                INSERT INTO deleted_messages (conversation_pk, message_index) VALUES (?, ?);
                UPDATE conversations SET deleted_message_count = deleted_message_count + 1 WHERE pk = ?;
                """,
            arguments: [
                row.pk, message.seq, row.pk, message.seq, row.pk, message.seq, row.appId, message.id, row.pk,
                stored.messageIndex, row.pk,
            ]
        )
        var writer = EventWriter(db: db, row: row, now: action.now, actor: action.actor)
        try writer.append(.messageDelete, .messageDeleted(tombstone))
        try writer.finish(participantCount: nil, activity: false)
        return CommandResult(
            outcome: .message(tombstone, duplicate: false), events: writer.events, recipients: participants
        )
    }

    static func react(_ react: Command.React, in db: Database) throws -> CommandResult {
        let (row, _) = try participation(db, appId: react.appId, id: react.conversationId, uid: react.actor)
        guard let stored = try fetchStoredMessage(db, conversationPK: row.pk, messageId: react.messageId) else {
            throw MessageLifecycle.notFound(react.messageId)
        }
        let message = stored.message
        let participants = try participantUIDs(db, conversationPK: row.pk)
        let keys = try Row.fetchAll(
            db, sql: "SELECT key, uid = ? FROM reactions WHERE conversation_pk = ? AND message_seq = ?",
            arguments: [react.actor, row.pk, message.seq]
        )
        let mine = Set(keys.filter { $0[1] as Bool }.map { $0[0] as String })
        func answer(duplicate: Bool, events: [StoredEvent]) throws -> CommandResult {
            let reactions =
                try fetchReactions(
                    db, conversationPK: row.pk, fromSeq: message.seq, throughSeq: message.seq, viewer: react.actor
                )[message.seq] ?? []
            return CommandResult(
                outcome: .reactions(ReactionList(messageId: message.id, reactions: reactions), duplicate: duplicate),
                events: events, recipients: participants
            )
        }
        guard mine.contains(react.key) != react.add else { return try answer(duplicate: true, events: []) }
        // Taking a reaction back is always possible; giving one is writing (a repeat of one given before a block or a
        // mute is answered above, as it was).
        if react.add { try requireNotMuted(db, conversationPK: row.pk, uid: react.actor, now: react.now) }
        if react.add && row.conversation.type == .direct {
            try requireNoBlock(db, appId: row.appId, actor: react.actor, direct: participants)
        }
        if react.add {
            try MessageLifecycle.requireReactionRoom(
                message, key: react.key, keys: Set(keys.map { $0[0] as String }), own: mine.count
            )
            try db.execute(
                sql:
                    "INSERT INTO reactions (conversation_pk, message_seq, key, uid, created_at) VALUES (?, ?, ?, ?, ?)",
                arguments: [row.pk, message.seq, react.key, react.actor, react.now]
            )
        } else {
            try db.execute(
                sql: "DELETE FROM reactions WHERE conversation_pk = ? AND message_seq = ? AND key = ? AND uid = ?",
                arguments: [row.pk, message.seq, react.key, react.actor]
            )
        }
        let count =
            try Int.fetchOne(
                db, sql: "SELECT COUNT(*) FROM reactions WHERE conversation_pk = ? AND message_seq = ? AND key = ?",
                arguments: [row.pk, message.seq, react.key]
            ) ?? 0
        let reaction = MessageReaction(
            messageId: message.id, messageSeq: message.seq, key: react.key, uid: react.actor, count: count
        )
        var writer = EventWriter(db: db, row: row, now: react.now, actor: react.actor)
        if react.add {
            try writer.append(.reactionAdded, .reactionAdded(reaction))
        } else {
            try writer.append(.reactionRemoved, .reactionRemoved(reaction))
        }
        try writer.finish(participantCount: nil, activity: false)
        return try answer(duplicate: false, events: writer.events)
    }

    // MARK: Rows

    /// A message's `sent` event: its sequence number, its index among the conversation's messages, and the message
    /// in its latest state.
    struct StoredMessage {
        var messageIndex: Int64
        var message: Message
    }

    static func fetchStoredMessage(_ db: Database, conversationPK: Int64, messageId: String) throws -> StoredMessage? {
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT message_index, body FROM events
                        WHERE conversation_pk = ? AND message_id = ? AND message_index IS NOT NULL
                        """
                ),
                arguments: [conversationPK, messageId]
            )
        else { return nil }
        let body: Data = row[1]
        return StoredMessage(messageIndex: row[0], message: try MessageLifecycle.message(in: body))
    }

    /// Rewrites the bodies of the message's `sent`, `update` and `delete` events to `message`.
    static func rewriteMessageEvents(_ db: Database, conversationPK: Int64, to message: Message) throws {
        let rows = try Row.fetchAll(
            db, sql: "SELECT seq, body FROM events WHERE conversation_pk = ? AND message_id = ?",
            arguments: [conversationPK, message.id]
        )
        for row in rows {
            let body: Data = row[1]
            try db.execute(
                sql: "UPDATE events SET body = ? WHERE conversation_pk = ? AND seq = ?",
                arguments: [Data(try MessageLifecycle.rewritten(body, to: message)), conversationPK, row[0] as Int64]
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

    /// The reactions on the messages with `fromSeq...throughSeq`, by message, as `viewer` sees them.
    static func fetchReactions(
        _ db: Database, conversationPK: Int64, fromSeq: Int64, throughSeq: Int64, viewer: String?
    ) throws -> [Int64: [ReactionSummary]] {
        let rows = try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT message_seq, key, COUNT(*), MAX(uid = ?), MIN(created_at) FROM reactions
                    WHERE conversation_pk = ? AND message_seq >= ? AND message_seq <= ?
                    GROUP BY message_seq, key
                    """
            ),
            arguments: [viewer ?? "", conversationPK, fromSeq, throughSeq]
        )
        return ReactionRow.summaries(
            rows.map { ReactionRow(messageSeq: $0[0], key: $0[1], count: $0[2], reacted: $0[3], firstAt: $0[4]) }
        )
    }

    /// The thread summaries of the messages with `fromSeq...throughSeq`, by message.
    static func fetchThreads(_ db: Database, conversationPK: Int64, fromSeq: Int64, throughSeq: Int64) throws
        -> [Int64: ThreadSummary]
    {
        let rows = try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT e.thread_seq, COUNT(*) - COUNT(d.message_index), MAX(e.created_at)
                    FROM events e LEFT JOIN deleted_messages d
                        ON d.conversation_pk = e.conversation_pk AND d.message_index = e.message_index
                    WHERE e.conversation_pk = ? AND e.thread_seq >= ? AND e.thread_seq <= ?
                    GROUP BY e.thread_seq
                    """
            ),
            arguments: [conversationPK, fromSeq, throughSeq]
        )
        var threads: [Int64: ThreadSummary] = [:]
        for row in rows { threads[row[0]] = ThreadSummary(replyCount: row[1], lastReplyAt: row[2]) }
        return threads
    }

    /// The messages (of one conversation) as `viewer` reads them: with thread summaries and reactions.
    static func reading(_ messages: [Message], _ db: Database, conversationPK: Int64, viewer: String?) throws
        -> [Message]
    {
        guard let low = messages.map(\.seq).min(), let high = messages.map(\.seq).max() else { return messages }
        let threads = try fetchThreads(db, conversationPK: conversationPK, fromSeq: low, throughSeq: high)
        let reactions = try fetchReactions(
            db, conversationPK: conversationPK, fromSeq: low, throughSeq: high, viewer: viewer
        )
        return messages.map { $0.reading(thread: threads[$0.seq], reactions: reactions[$0.seq]) }
    }

    // MARK: Reads

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
                        SELECT body FROM events WHERE conversation_pk = ? AND thread_seq = ? AND seq < ?
                        ORDER BY seq DESC LIMIT ?
                        """,
                    arguments: [row.pk, stored.message.seq, query.beforeSeq ?? Int64.max, query.limit]
                )
            } else {
                bodies = try Data.fetchAll(
                    db,
                    sql: """
                        SELECT body FROM events WHERE conversation_pk = ? AND seq < ? AND message_index IS NOT NULL
                        ORDER BY seq DESC LIMIT ?
                        """,
                    arguments: [row.pk, query.beforeSeq ?? Int64.max, query.limit]
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
