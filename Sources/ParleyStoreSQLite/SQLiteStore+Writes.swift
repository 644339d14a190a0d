import Foundation
import GRDB
import ParleyProtocol
import ParleyStore

extension SQLiteStore {
    /// Carries a command's plan out in the transaction open on `db`: the one place a ``StoreWrite`` becomes SQL.
    static func perform(_ plan: CommandPlan, in db: Database) throws -> CommandResult {
        for write in plan.writes { try perform(write, in: db) }
        return plan.result
    }

    static func perform(_ write: StoreWrite, in db: Database) throws {
        switch write {
        case .insertParticipants(let pk, let participants):
            // Cached: adding a thousand members runs it a thousand times in one transaction.
            let statement = try db.cachedStatement(
                sql: """
                    INSERT INTO participants (conversation_pk, uid, role, joined_at, delivered_seq, read_seq, read_message_count)
                    VALUES (?, ?, ?, ?, ?, ?, (SELECT message_count FROM conversations WHERE pk = ?))
                    """
            )
            for participant in participants {
                try statement.execute(arguments: [
                    pk, participant.uid, participant.role.rawValue, participant.joinedAt, participant.deliveredSeq,
                    participant.readSeq, pk,
                ])
            }
        case .deleteParticipant(let pk, let appId, let uid):
            try db.execute(sql: "DELETE FROM participants WHERE conversation_pk = ? AND uid = ?", arguments: [pk, uid])
            try db.execute(
                sql: "DELETE FROM mentions WHERE app_id = ? AND uid = ? AND conversation_pk = ?",
                arguments: [appId, uid, pk]
            )
            try db.execute(
                sql: "DELETE FROM conversation_archives WHERE conversation_pk = ? AND uid = ?", arguments: [pk, uid]
            )
        case .updateParticipant(let pk, let participant):
            try db.execute(
                sql:
                    "UPDATE participants SET role = ?, muted = ?, muted_until = ? WHERE conversation_pk = ? AND uid = ?",
                arguments: [
                    participant.role.rawValue, participant.muted == true, participant.mutedUntil, pk, participant.uid,
                ]
            )
        case .moveReceipt(let pk, let appId, let uid, let delivered, let read, let readMoved):
            try db.cachedStatement(
                sql: """
                    UPDATE participants SET delivered_seq = ?, read_seq = ?, read_message_count = COALESCE(
                        (SELECT message_index FROM events WHERE conversation_pk = ? AND seq <= ?
                         AND message_index > 0 ORDER BY seq DESC LIMIT 1), 0)
                    WHERE conversation_pk = ? AND uid = ?
                    """
            ).execute(arguments: [delivered, read, pk, read, pk, uid])
            if readMoved {
                try db.cachedStatement(
                    sql: "DELETE FROM mentions WHERE app_id = ? AND uid = ? AND conversation_pk = ? AND seq <= ?"
                ).execute(arguments: [appId, uid, pk, read])
            }
        case .updateConversation(let pk, let conversation):
            try db.execute(
                sql: """
                    UPDATE conversations SET name = ?, description = ?, is_public = ?, metadata = ?, roles = ?,
                        deleted_at = ?, updated_at = ?
                    WHERE pk = ?
                    """,
                arguments: [
                    conversation.name, conversation.description, conversation.isPublic, try json(conversation.metadata),
                    conversation.roles.storedJSON, conversation.deletedAt, conversation.updatedAt, pk,
                ]
            )
        case .appendEvents(let append):
            try appendEvents(append, in: db)
        case .rewriteMessage(let pk, let message):
            try rewriteMessageEvents(db, conversationPK: pk, to: message)
        case .replaceMentions(let pk, let appId, let message):
            try db.execute(
                sql: "DELETE FROM mentions WHERE conversation_pk = ? AND seq = ?", arguments: [pk, message.seq])
            try insertMentions(db, appId: appId, conversationPK: pk, message: message)
        case .attachFiles(let appId, let ids, let messageId):
            try attachFiles(db, appId: appId, ids: ids, messageId: messageId)
        case .removeFiles(let appId, let ids, let now):
            try removeFiles(db, appId: appId, ids: ids, now: now)
        case .forgetMessage(let pk, let appId, let seq, let messageId, let messageIndex):
            try db.execute(
                sql: """
                    DELETE FROM reactions WHERE conversation_pk = ? AND message_seq = ?;
                    DELETE FROM pins WHERE conversation_pk = ? AND message_seq = ?;
                    DELETE FROM mentions WHERE conversation_pk = ? AND seq = ?;
                    DELETE FROM push_outbox WHERE conversation_pk = ? AND seq = ?;
                    DELETE FROM push_jobs WHERE app_id = ? AND collapse_id = ?;
                    INSERT INTO deleted_messages (conversation_pk, message_index) VALUES (?, ?);
                    UPDATE conversations SET deleted_message_count = deleted_message_count + 1 WHERE pk = ?;
                    """,
                arguments: [pk, seq, pk, seq, pk, seq, pk, seq, appId, messageId, pk, messageIndex, pk]
            )
        case .addReaction(let pk, let messageSeq, let key, let uid, let at):
            try db.execute(
                sql:
                    "INSERT INTO reactions (conversation_pk, message_seq, key, uid, created_at) VALUES (?, ?, ?, ?, ?)",
                arguments: [pk, messageSeq, key, uid, at]
            )
        case .removeReaction(let pk, let messageSeq, let key, let uid):
            try db.execute(
                sql: "DELETE FROM reactions WHERE conversation_pk = ? AND message_seq = ? AND key = ? AND uid = ?",
                arguments: [pk, messageSeq, key, uid]
            )
        case .eraseSender(let pk, let messageId, let uid):
            for seq in try messageEventSeqs(db, conversationPK: pk, messageId: messageId) {
                guard
                    let body = try Data.fetchOne(
                        db, sql: "SELECT body FROM events WHERE conversation_pk = ? AND seq = ?", arguments: [pk, seq])
                else { continue }
                try db.execute(
                    sql: """
                        UPDATE events SET body = ?, actor = CASE WHEN actor = ? THEN NULL ELSE actor END,
                            client_message_id = NULL
                        WHERE conversation_pk = ? AND seq = ?;
                        DELETE FROM client_message_ids WHERE conversation_pk = ? AND actor = ? AND seq = ?;
                        """,
                    arguments: [Data(try MessageLifecycle.withoutCreator(body, uid: uid)), uid, pk, seq, pk, uid, seq]
                )
            }
        case .pinMessage(let pk, let pin):
            try db.execute(
                sql: "INSERT INTO pins (conversation_pk, message_seq, pinned_by, pinned_at) VALUES (?, ?, ?, ?)",
                arguments: [pk, pin.messageSeq, pin.pinnedBy, pin.pinnedAt]
            )
        case .unpinMessage(let pk, let messageSeq):
            try db.execute(
                sql: "DELETE FROM pins WHERE conversation_pk = ? AND message_seq = ?", arguments: [pk, messageSeq])
        case .putBan(let pk, let ban):
            try db.execute(
                sql: """
                    INSERT INTO bans (conversation_pk, uid, banned_by, reason, until, created_at)
                    VALUES (?, ?, ?, ?, ?, ?)
                    ON CONFLICT (conversation_pk, uid) DO UPDATE SET banned_by = excluded.banned_by,
                        reason = excluded.reason, until = excluded.until, created_at = excluded.created_at
                    """,
                arguments: [pk, ban.uid, ban.bannedBy, ban.reason, ban.until, ban.createdAt]
            )
        case .liftBan(let pk, let uid):
            try db.execute(sql: "DELETE FROM bans WHERE conversation_pk = ? AND uid = ?", arguments: [pk, uid])
        }
    }

    /// Appends a command's durable events (other than messages, see ``SendBatch``), extends the users' streams, and
    /// keeps the conversation row in step.
    static func appendEvents(_ append: EventAppend, in db: Database) throws {
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO events (conversation_pk, seq, name, actor, created_at, message_id, body)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """
        )
        for event in append.events {
            try insert.execute(arguments: [
                append.conversationPK, event.seq, event.name.rawValue, event.actor, event.createdAt, event.messageId,
                Data(event.json),
            ])
        }
        // Each change goes to the user's own stream at the user's next position.
        for membership in append.memberships {
            guard
                let userSeq = try Int64.fetchOne(
                    db.cachedStatement(
                        sql: """
                            UPDATE users SET last_user_seq = last_user_seq + 1 WHERE app_id = ? AND uid = ?
                            RETURNING last_user_seq
                            """
                    ),
                    arguments: [append.appId, membership.uid]
                )
            else { throw DomainError.uidNotFound(membership.uid) }
            try db.cachedStatement(
                sql: """
                    INSERT INTO memberships (app_id, uid, user_seq, conversation_pk, joined, seq) VALUES (?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [
                append.appId, membership.uid, userSeq, append.conversationPK, membership.joined, membership.seq,
            ])
        }
        try db.cachedStatement(
            sql: """
                UPDATE conversations SET last_seq = ?, last_activity_at = COALESCE(?, last_activity_at),
                    participant_count = COALESCE(?, participant_count)
                WHERE pk = ?
                """
        ).execute(arguments: [append.lastSeq, append.activityAt, append.participantCount, append.conversationPK])
    }
}
