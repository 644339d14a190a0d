import Foundation
import NIOCore
import ParleyProtocol
import ParleyStore
import PostgresNIO

// Edits, deletions, reactions and the reads that show them (see ``MessageLifecycle`` for the model). The commands
// run in the batch's transaction, holding the conversation's row lock (taken by the batch), like every command.

extension BatchTransaction {
    // MARK: Commands

    func editMessage(_ edit: Command.EditMessage) async throws -> CommandResult {
        let (row, role) = try await participation(appId: edit.appId, id: edit.conversationId, uid: edit.actor)
        guard let stored = try await fetchStoredMessage(row.pk, messageId: edit.messageId) else {
            throw MessageLifecycle.notFound(edit.messageId)
        }
        let message = stored.message
        try MessageLifecycle.requireEdit(message, actor: edit.actor, role: role, roles: row.conversation.roles)
        let participants = try await participantUIDs(row.pk)
        let members = Set(participants)
        let mentions = edit.mentions.map {
            MessageLifecycle.keptMentions($0, sender: message.sender, isParticipant: members.contains)
        }
        let files = MessageLifecycle.FileChange(from: message.parts, to: edit.parts)
        var parts = edit.parts
        if !files.named.isEmpty {
            parts = try Attachments.resolve(
                parts, records: try await lockAttachments(appId: row.appId, ids: files.named), appId: row.appId,
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
        try await requireNotMuted(conversationPK: row.pk, uid: edit.actor, now: edit.now)
        if row.conversation.type == .direct {
            try await requireNoBlock(appId: row.appId, actor: edit.actor, direct: participants)
        }
        try await rewriteMessageEvents(row.pk, to: edited)
        try await attachFiles([(files.added, message.id)])
        try await removeFiles(appId: row.appId, ids: files.dropped, now: edit.now)
        if edited.mentions != message.mentions {
            try await execute("DELETE FROM mentions WHERE conversation_pk = \(row.pk) AND seq = \(message.seq)")
            try await insertMentions(appId: row.appId, conversationPK: row.pk, message: edited)
        }
        var writer = EventBuffer(row: row, now: edit.now, actor: edit.actor)
        try writer.append(.messageUpdate, .messageUpdated(edited))
        try await writer.finish(participantCount: nil, activity: false, in: self)
        return CommandResult(
            outcome: .message(edited, duplicate: false), events: writer.events, recipients: participants
        )
    }

    func deleteMessage(_ action: Command.MessageAction) async throws -> CommandResult {
        // A user acts as a participant; the app's server (no actor) on any conversation of the app.
        let (row, role) = try await acting(appId: action.appId, id: action.conversationId, actor: action.actor)
        guard let stored = try await fetchStoredMessage(row.pk, messageId: action.messageId) else {
            throw MessageLifecycle.notFound(action.messageId)
        }
        let message = stored.message
        let participants = try await participantUIDs(row.pk)
        // Who may not delete it is refused even when it is gone already: the answer does not depend on timing.
        if let actor = action.actor, let role {
            try MessageLifecycle.requireDelete(message, actor: actor, role: role, roles: row.conversation.roles)
        }
        guard !message.isDeleted else {
            return CommandResult(outcome: .message(message, duplicate: true), events: [], recipients: participants)
        }
        let tombstone = MessageLifecycle.tombstone(of: message, by: action.actor, at: action.now)
        try await rewriteMessageEvents(row.pk, to: tombstone)
        try await removeFiles(appId: row.appId, ids: Attachments.ids(in: message.parts), now: action.now)
        // What hung on the message goes with it: reactions, unread mentions, pushes not sent yet.
        try await execute("DELETE FROM reactions WHERE conversation_pk = \(row.pk) AND message_seq = \(message.seq)")
        try await execute("DELETE FROM mentions WHERE conversation_pk = \(row.pk) AND seq = \(message.seq)")
        try await execute("DELETE FROM push_outbox WHERE conversation_pk = \(row.pk) AND seq = \(message.seq)")
        try await execute("DELETE FROM push_jobs WHERE app_id = \(row.appId) AND collapse_id = \(message.id)")
        try await execute(
            """
            INSERT INTO deleted_messages (conversation_pk, message_index) VALUES (\(row.pk), \(stored.messageIndex))
            """
        )
        try await execute(
            "UPDATE conversations SET deleted_message_count = deleted_message_count + 1 WHERE pk = \(row.pk)"
        )
        var writer = EventBuffer(row: row, now: action.now, actor: action.actor)
        try writer.append(.messageDelete, .messageDeleted(tombstone))
        try await writer.finish(participantCount: nil, activity: false, in: self)
        return CommandResult(
            outcome: .message(tombstone, duplicate: false), events: writer.events, recipients: participants
        )
    }

    func react(_ react: Command.React) async throws -> CommandResult {
        let (row, _) = try await participation(appId: react.appId, id: react.conversationId, uid: react.actor)
        guard let stored = try await fetchStoredMessage(row.pk, messageId: react.messageId) else {
            throw MessageLifecycle.notFound(react.messageId)
        }
        let message = stored.message
        let participants = try await participantUIDs(row.pk)
        var keys = Set<String>()
        var mine = Set<String>()
        for row in try await rows(
            """
            SELECT key, uid = \(react.actor) FROM reactions
            WHERE conversation_pk = \(row.pk) AND message_seq = \(message.seq)
            """
        ) {
            let (key, isMine) = try row.decode((String, Bool).self)
            keys.insert(key)
            if isMine { mine.insert(key) }
        }
        func answer(duplicate: Bool, events: [StoredEvent]) async throws -> CommandResult {
            let reactions =
                try await PostgresStore.fetchReactions(
                    session, conversationPK: row.pk, fromSeq: message.seq, throughSeq: message.seq, viewer: react.actor
                )[message.seq] ?? []
            return CommandResult(
                outcome: .reactions(ReactionList(messageId: message.id, reactions: reactions), duplicate: duplicate),
                events: events, recipients: participants
            )
        }
        guard mine.contains(react.key) != react.add else { return try await answer(duplicate: true, events: []) }
        // Taking a reaction back is always possible; giving one is writing (a repeat of one given before a block or a
        // mute is answered above, as it was).
        if react.add { try await requireNotMuted(conversationPK: row.pk, uid: react.actor, now: react.now) }
        if react.add && row.conversation.type == .direct {
            try await requireNoBlock(appId: row.appId, actor: react.actor, direct: participants)
        }
        if react.add {
            try MessageLifecycle.requireReactionRoom(message, key: react.key, keys: keys, own: mine.count)
            try await execute(
                """
                INSERT INTO reactions (conversation_pk, message_seq, key, uid, created_at)
                VALUES (\(row.pk), \(message.seq), \(react.key), \(react.actor), \(react.now))
                """
            )
        } else {
            try await execute(
                """
                DELETE FROM reactions WHERE conversation_pk = \(row.pk) AND message_seq = \(message.seq)
                AND key = \(react.key) AND uid = \(react.actor)
                """
            )
        }
        let count =
            try await session.value(
                """
                SELECT count(*) FROM reactions WHERE conversation_pk = \(row.pk) AND message_seq = \(message.seq)
                AND key = \(react.key)
                """,
                as: Int64.self
            ) ?? 0
        let reaction = MessageReaction(
            messageId: message.id, messageSeq: message.seq, key: react.key, uid: react.actor, count: Int(count)
        )
        var writer = EventBuffer(row: row, now: react.now, actor: react.actor)
        if react.add {
            try writer.append(.reactionAdded, .reactionAdded(reaction))
        } else {
            try writer.append(.reactionRemoved, .reactionRemoved(reaction))
        }
        try await writer.finish(participantCount: nil, activity: false, in: self)
        return try await answer(duplicate: false, events: writer.events)
    }

    // MARK: Rows

    func fetchStoredMessage(_ conversationPK: Int64, messageId: String) async throws -> PostgresStore.StoredMessage? {
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

    /// Rewrites the bodies of the message's `sent`, `update` and `delete` events to `message`.
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
            UPDATE events e SET body = u.body FROM unnest(\(seqs), \(bodies)) AS u(seq, body)
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
    /// A message's `sent` event: its index among the conversation's messages, and the message in its latest state.
    struct StoredMessage {
        var messageIndex: Int64
        var message: Message
    }

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

    /// The reactions on the messages with `fromSeq...throughSeq`, by message, as `viewer` sees them.
    static func fetchReactions(
        _ session: PostgresSession, conversationPK: Int64, fromSeq: Int64, throughSeq: Int64, viewer: String?
    ) async throws -> [Int64: [ReactionSummary]] {
        let rows = try await session.rows(
            """
            SELECT message_seq, key, count(*), bool_or(uid = \(viewer ?? "")), min(created_at) FROM reactions
            WHERE conversation_pk = \(conversationPK) AND message_seq >= \(fromSeq) AND message_seq <= \(throughSeq)
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

    /// The thread summaries of the messages with `fromSeq...throughSeq`, by message.
    static func fetchThreads(_ session: PostgresSession, conversationPK: Int64, fromSeq: Int64, throughSeq: Int64)
        async throws -> [Int64: ThreadSummary]
    {
        var threads: [Int64: ThreadSummary] = [:]
        for row in try await session.rows(
            """
            SELECT e.thread_seq, count(*) - count(d.message_index), max(e.created_at)
            FROM events e LEFT JOIN deleted_messages d
                ON d.conversation_pk = e.conversation_pk AND d.message_index = e.message_index
            WHERE e.conversation_pk = \(conversationPK) AND e.thread_seq >= \(fromSeq) AND e.thread_seq <= \(throughSeq)
            GROUP BY e.thread_seq
            """
        ) {
            let (seq, count, last) = try row.decode((Int64, Int64, Int64).self)
            threads[seq] = ThreadSummary(replyCount: Int(count), lastReplyAt: last)
        }
        return threads
    }

    /// The messages (of one conversation) as `viewer` reads them: with thread summaries and reactions.
    static func reading(_ messages: [Message], _ session: PostgresSession, conversationPK: Int64, viewer: String?)
        async throws -> [Message]
    {
        guard let low = messages.map(\.seq).min(), let high = messages.map(\.seq).max() else { return messages }
        let threads = try await fetchThreads(session, conversationPK: conversationPK, fromSeq: low, throughSeq: high)
        let reactions = try await fetchReactions(
            session, conversationPK: conversationPK, fromSeq: low, throughSeq: high, viewer: viewer
        )
        return messages.map { $0.reading(thread: threads[$0.seq], reactions: reactions[$0.seq]) }
    }

    // MARK: Reads

    public func messages(appId: String, conversationId: String, query: HistoryQuery) async throws -> MessageHistory {
        try await withSession { session in
            // One snapshot: the page, its reactions and threads, and the position they are at agree.
            try await session.transaction(isolation: .repeatableReadOnly) {
                guard
                    let found = try await session.rows(
                        """
                        SELECT \(unescaped: Self.conversationColumns()) FROM conversations
                        WHERE id = \(conversationId) AND app_id = \(appId)
                        """
                    ).first
                else { return MessageHistory(messages: [], lastSeq: 0) }
                let row = try Self.conversationRow(found)
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
                        AND seq < \(query.beforeSeq ?? Int64.max) ORDER BY seq DESC LIMIT \(query.limit)
                        """
                    )
                } else {
                    bodies = try await session.rows(
                        """
                        SELECT body FROM events WHERE conversation_pk = \(row.pk) AND seq < \(query.beforeSeq ?? Int64.max)
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
