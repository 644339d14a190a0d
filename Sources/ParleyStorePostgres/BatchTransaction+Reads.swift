import Foundation
import NIOCore
import ParleyProtocol
import ParleyStore
import PostgresNIO

// What commands read for their decisions (``CommandDecisions``), in the batch's transaction.

extension BatchTransaction {
    /// The conversation as a command reads it (its row locked): the row, its participants, and `actor`'s
    /// participation.
    func snapshot(_ appId: String, _ id: String, actor: String?) async throws -> ConversationSnapshot? {
        guard let row = try await fetchConversation(appId: appId, id: id) else { return nil }
        var participant: Participant?
        if let actor { participant = try await fetchParticipant(row.pk, uid: actor) }
        return ConversationSnapshot(row: row, members: try await participantUIDs(row.pk), actor: participant)
    }

    /// `uid`'s participation in the conversation read.
    func participant(_ uid: String, of snapshot: ConversationSnapshot?) async throws -> Participant? {
        guard let snapshot else { return nil }
        return try await fetchParticipant(snapshot.row.pk, uid: uid)
    }

    /// Which of `uids` are users of the app.
    func knownUsers(_ appId: String, _ uids: [String]) async throws -> Set<String> {
        guard !uids.isEmpty else { return [] }
        return Set(
            try await rows("SELECT uid FROM users WHERE app_id = \(appId) AND uid = ANY(\(uids))")
                .map { try $0.decode(String.self) }
        )
    }

    func createReads(_ create: Command.CreateConversation) async throws -> CommandReads.Create {
        let others = Array(Set(create.participants.filter { $0 != create.creator }))
        var existing: (ConversationSnapshot, [Participant])?
        if let directKey = create.directKey { existing = try await directConversation(create.appId, directKey) }
        var blockers: [String] = []
        if create.type == .direct, existing == nil, others.count == 1 {
            blockers = try await blockersBetween(create.appId, create.creator, others[0])
        }
        return CommandReads.Create(
            knownUsers: try await knownUsers(create.appId, others), existing: existing, blockers: blockers)
    }

    /// The direct conversation of a pair, with its participants in the order they joined.
    func directConversation(_ appId: String, _ directKey: String) async throws
        -> (ConversationSnapshot, [Participant])?
    {
        guard
            let found = try await rows(
                """
                SELECT \(unescaped: PostgresStore.conversationColumns()) FROM conversations
                WHERE app_id = \(appId) AND direct_key = \(directKey)
                """
            ).first
        else { return nil }
        let row = try PostgresStore.conversationRow(found)
        return (
            ConversationSnapshot(row: row, members: try await participantUIDs(row.pk), actor: nil),
            try await fetchParticipants(row.pk)
        )
    }

    /// Inserts a new conversation; returns it as stored, or nil when it is a direct conversation that another node
    /// created at the same moment (ON CONFLICT waits for its commit, then inserts nothing).
    func insertConversation(_ new: CommandDecisions.NewConversation) async throws -> ConversationRow? {
        let conversation = new.conversation
        let metadata = try PostgresStore.json(conversation.metadata)
        return try await rows(
            """
            INSERT INTO conversations (id, app_id, type, direct_key, name, description, is_public, metadata,
                created_by, created_at, updated_at, last_seq, last_activity_at, participant_count, roles)
            VALUES (\(conversation.id), \(new.appId), \(conversation.type.rawValue), \(new.directKey),
                \(conversation.name), \(conversation.description), \(conversation.isPublic), \(metadata)::jsonb,
                \(conversation.createdBy), \(conversation.createdAt), \(conversation.updatedAt), \(conversation.lastSeq),
                \(conversation.createdAt), \(conversation.participantCount), \(conversation.roles.storedJSON))
            ON CONFLICT (app_id, direct_key) DO NOTHING
            RETURNING \(unescaped: PostgresStore.conversationColumns())
            """
        ).first.map(PostgresStore.conversationRow)
    }

    /// What a command on one message reads: the message, and the blocks between a direct conversation's pair when
    /// `actor` writes.
    func messageReads(_ messageId: String, of snapshot: ConversationSnapshot?, actor: String?) async throws
        -> CommandReads.OnMessage
    {
        guard let snapshot else { return CommandReads.OnMessage(stored: nil) }
        let row = snapshot.row
        var reads = CommandReads.OnMessage(stored: try await fetchStoredMessage(row.pk, messageId: messageId))
        if let actor, let other = snapshot.other(than: actor) {
            reads.blockers = try await blockersBetween(row.appId, actor, other)
        }
        return reads
    }

    /// The message's pin, and how many messages its conversation has pinned.
    func pinReads(_ conversationPK: Int64, message: Message) async throws -> (MessagePin?, Int) {
        guard
            let row = try await rows(
                """
                SELECT count(*), bool_or(message_seq = \(message.seq)),
                    max(pinned_by) FILTER (WHERE message_seq = \(message.seq)),
                    max(pinned_at) FILTER (WHERE message_seq = \(message.seq))
                FROM pins WHERE conversation_pk = \(conversationPK)
                """
            ).first
        else { return (nil, 0) }
        let (count, pinned, pinnedBy, pinnedAt) = try row.decode((Int64, Bool?, String?, Int64?).self)
        let pin =
            pinned == true
            ? pinnedAt.map {
                MessagePin(messageId: message.id, messageSeq: message.seq, pinnedBy: pinnedBy, pinnedAt: $0)
            } : nil
        return (pin, Int(count))
    }

    /// The newest message at or before `seq`; nil when there is none.
    func newestMessage(_ conversationPK: Int64, atOrBefore seq: Int64) async throws -> MessagePlace? {
        try await rows(
            """
            SELECT message_id, created_at FROM events WHERE conversation_pk = \(conversationPK) AND seq <= \(seq)
            AND message_index IS NOT NULL ORDER BY seq DESC LIMIT 1
            """
        ).first.map { row in
            let (messageId, sentAt) = try row.decode((String, Int64).self)
            return MessagePlace(messageId: messageId, sentAt: sentAt)
        }
    }

    /// The reactions on a message, key by key, as a reaction by `actor` reads them.
    func reactionTallies(_ conversationPK: Int64, seq: Int64, actor: String) async throws -> [ReactionTally] {
        try await rows(
            """
            SELECT key, count(*), bool_or(uid = \(actor)), min(created_at), min(created_at) FILTER (WHERE uid <> \(actor))
            FROM reactions WHERE conversation_pk = \(conversationPK) AND message_seq = \(seq) GROUP BY key
            """
        ).map { row in
            let (key, count, byActor, firstAt, firstByOthersAt) = try row.decode(
                (String, Int64, Bool, Int64, Int64?).self)
            return ReactionTally(
                key: key, count: Int(count), byActor: byActor, firstAt: firstAt, firstByOthersAt: firstByOthersAt)
        }
    }
}
