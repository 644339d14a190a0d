import Foundation
import NIOCore
import ParleyProtocol
import ParleyStore
import PostgresNIO

extension BatchTransaction {
    /// Carries a command's plan out in the batch's transaction: the one place a ``StoreWrite`` becomes SQL.
    func perform(_ plan: CommandPlan) async throws -> CommandResult {
        for write in plan.writes { try await perform(write) }
        return plan.result
    }

    func perform(_ write: StoreWrite) async throws {
        switch write {
        case .insertParticipants(let pk, let participants):
            guard !participants.isEmpty else { return }
            try await execute(
                """
                INSERT INTO participants (conversation_pk, uid, role, joined_at, delivered_seq, read_seq, read_message_count)
                SELECT \(pk), m.uid, m.role, m.joined_at, m.delivered_seq, m.read_seq, c.message_count
                FROM unnest(\(participants.map(\.uid)), \(participants.map(\.role.rawValue)),
                    \(participants.map(\.joinedAt)), \(participants.map(\.deliveredSeq)), \(participants.map(\.readSeq)))
                    WITH ORDINALITY AS m(uid, role, joined_at, delivered_seq, read_seq, position)
                JOIN conversations c ON c.pk = \(pk)
                ORDER BY m.position
                """
            )
        case .deleteParticipant(let pk, let appId, let uid):
            try await execute("DELETE FROM participants WHERE conversation_pk = \(pk) AND uid = \(uid)")
            try await execute(
                "DELETE FROM mentions WHERE app_id = \(appId) AND uid = \(uid) AND conversation_pk = \(pk)")
            try await execute("DELETE FROM conversation_archives WHERE conversation_pk = \(pk) AND uid = \(uid)")
        case .updateParticipant(let pk, let participant):
            try await execute(
                """
                UPDATE participants SET role = \(participant.role.rawValue), muted = \(participant.muted == true),
                    muted_until = \(participant.mutedUntil)
                WHERE conversation_pk = \(pk) AND uid = \(participant.uid)
                """
            )
        case .moveReceipt(let pk, let appId, let uid, let delivered, let read, let readMoved):
            if readMoved {
                try await execute(
                    """
                    DELETE FROM mentions WHERE app_id = \(appId) AND uid = \(uid) AND conversation_pk = \(pk)
                    AND seq <= \(read)
                    """
                )
            }
            try await execute(
                """
                UPDATE participants SET delivered_seq = \(delivered), read_seq = \(read), read_message_count = COALESCE(
                    (SELECT message_index FROM events WHERE conversation_pk = \(pk) AND seq <= \(read)
                     AND message_index > 0 ORDER BY seq DESC LIMIT 1), 0)
                WHERE conversation_pk = \(pk) AND uid = \(uid)
                """
            )
        case .updateConversation(let pk, let conversation):
            let metadata = try PostgresStore.json(conversation.metadata)
            try await execute(
                """
                UPDATE conversations SET name = \(conversation.name), description = \(conversation.description),
                    is_public = \(conversation.isPublic), metadata = \(metadata)::jsonb,
                    roles = \(conversation.roles.storedJSON), deleted_at = \(conversation.deletedAt),
                    updated_at = \(conversation.updatedAt)
                WHERE pk = \(pk)
                """
            )
        case .appendEvents(let append):
            try await appendEvents(append)
        case .rewriteMessage(let pk, let message):
            try await rewriteMessageEvents(pk, to: message)
        case .replaceMentions(let pk, let appId, let message):
            try await execute("DELETE FROM mentions WHERE conversation_pk = \(pk) AND seq = \(message.seq)")
            try await insertMentions(appId: appId, conversationPK: pk, message: message)
        case .attachFiles(_, let ids, let messageId):
            try await attachFiles([(ids, messageId)])
        case .removeFiles(let appId, let ids, let now):
            try await removeFiles(appId: appId, ids: ids, now: now)
        case .forgetMessage(let pk, let appId, let seq, let messageId, let messageIndex):
            try await execute("DELETE FROM reactions WHERE conversation_pk = \(pk) AND message_seq = \(seq)")
            try await execute("DELETE FROM pins WHERE conversation_pk = \(pk) AND message_seq = \(seq)")
            try await execute("DELETE FROM mentions WHERE conversation_pk = \(pk) AND seq = \(seq)")
            try await execute("DELETE FROM push_outbox WHERE conversation_pk = \(pk) AND seq = \(seq)")
            try await execute("DELETE FROM push_jobs WHERE app_id = \(appId) AND collapse_id = \(messageId)")
            try await execute(
                "INSERT INTO deleted_messages (conversation_pk, message_index) VALUES (\(pk), \(messageIndex))")
            try await execute(
                "UPDATE conversations SET deleted_message_count = deleted_message_count + 1 WHERE pk = \(pk)")
        case .addReaction(let pk, let messageSeq, let key, let uid, let at):
            try await execute(
                """
                INSERT INTO reactions (conversation_pk, message_seq, key, uid, created_at)
                VALUES (\(pk), \(messageSeq), \(key), \(uid), \(at))
                """
            )
        case .removeReaction(let pk, let messageSeq, let key, let uid):
            try await execute(
                """
                DELETE FROM reactions WHERE conversation_pk = \(pk) AND message_seq = \(messageSeq)
                AND key = \(key) AND uid = \(uid)
                """
            )
        case .eraseSender(let pk, let messageId, let uid):
            for row in try await rows(
                "SELECT seq, body FROM events WHERE conversation_pk = \(pk) AND message_id = \(messageId)"
            ) {
                let (seq, body) = try row.decode((Int64, ByteBuffer).self)
                let erased = ByteBuffer(bytes: try MessageLifecycle.withoutCreator(body.readableBytesView, uid: uid))
                try await execute(
                    """
                    UPDATE events SET body = \(erased), actor = CASE WHEN actor = \(uid) THEN NULL ELSE actor END,
                        client_message_id = NULL
                    WHERE conversation_pk = \(pk) AND seq = \(seq)
                    """
                )
            }
        case .pinMessage(let pk, let pin):
            try await execute(
                """
                INSERT INTO pins (conversation_pk, message_seq, pinned_by, pinned_at)
                VALUES (\(pk), \(pin.messageSeq), \(pin.pinnedBy), \(pin.pinnedAt))
                """
            )
        case .unpinMessage(let pk, let messageSeq):
            try await execute("DELETE FROM pins WHERE conversation_pk = \(pk) AND message_seq = \(messageSeq)")
        case .putBan(let pk, let ban):
            try await execute(
                """
                INSERT INTO bans (conversation_pk, uid, banned_by, reason, until, created_at)
                VALUES (\(pk), \(ban.uid), \(ban.bannedBy), \(ban.reason), \(ban.until), \(ban.createdAt))
                ON CONFLICT (conversation_pk, uid) DO UPDATE SET banned_by = EXCLUDED.banned_by,
                    reason = EXCLUDED.reason, until = EXCLUDED.until, created_at = EXCLUDED.created_at
                """
            )
        case .liftBan(let pk, let uid):
            try await execute("DELETE FROM bans WHERE conversation_pk = \(pk) AND uid = \(uid)")
        }
    }

    /// Writes a command's durable events, extends the users' streams, and records the conversation's new position.
    func appendEvents(_ append: EventAppend) async throws {
        var columns = EventColumns()
        for event in append.events {
            columns.append(
                conversationPK: append.conversationPK, seq: event.seq, name: event.name, actor: event.actor ?? "",
                createdAt: event.createdAt, clientMessageId: nil, messageIndex: nil, messageId: event.messageId,
                threadSeq: nil, body: event.json
            )
        }
        if !columns.isEmpty {
            try await execute(
                PostgresQuery(unsafeSQL: EventColumns.insertSQL(binds: EventColumns.binds(from: 1)) + " RETURNING 1")
                    .withBinds { columns.bind(into: &$0) }
            )
        }
        let memberships = append.memberships
        if !memberships.isEmpty {
            // Each user's next position, under the user's row lock (taken in order by the batch): the UPDATE bumps
            // last_user_seq, and the change is recorded at that position. A command changes a user at most once.
            var positions: [String: Int64] = [:]
            for row in try await rows(
                """
                UPDATE users SET last_user_seq = last_user_seq + 1
                WHERE app_id = \(append.appId) AND uid = ANY(\(memberships.map(\.uid)))
                RETURNING uid, last_user_seq
                """
            ) {
                let (uid, position) = try row.decode((String, Int64).self)
                positions[uid] = position
            }
            if let missing = memberships.first(where: { positions[$0.uid] == nil }) {
                throw DomainError.uidNotFound(missing.uid)
            }
            try await execute(
                """
                INSERT INTO memberships (app_id, uid, user_seq, conversation_pk, joined, seq)
                SELECT \(append.appId), uid, user_seq, \(append.conversationPK), joined, seq
                FROM unnest(\(memberships.map(\.uid)), \(memberships.map { positions[$0.uid]! }), \(memberships.map(\.joined)),
                    \(memberships.map(\.seq))) AS m(uid, user_seq, joined, seq)
                """
            )
        }
        try await execute(
            """
            UPDATE conversations SET last_seq = \(append.lastSeq),
                last_activity_at = COALESCE(\(append.activityAt)::bigint, last_activity_at),
                participant_count = COALESCE(\(append.participantCount.map { Int64($0) })::bigint, participant_count)
            WHERE pk = \(append.conversationPK)
            """
        )
    }
}
