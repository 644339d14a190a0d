import Foundation
import GRDB
import ParleyProtocol
import ParleyStore

extension SQLiteStore: SynchronousBatches {
    public func apply(_ commands: [Command]) async throws -> [Result<CommandResult, DomainError>] {
        try await pool.writeWithoutTransaction { [writerMemory] db in
            try Self.writeBatch(db, memory: writerMemory) { sends in
                try Self.applyBatch(commands, in: db, sends: &sends)
            }
        }
    }

    public func apply(
        _ commands: [Command],
        readingUnread wanted: @escaping @Sendable ([Result<CommandResult, DomainError>]) -> [UnreadRequest]
    ) async throws -> BatchOutcome {
        try await pool.writeWithoutTransaction { [writerMemory] db in
            try Self.writeBatch(db, memory: writerMemory) { sends in
                try Self.applyBatch(commands, in: db, sends: &sends, readingUnread: wanted)
            }
        }
    }

    public func applySynchronously(
        _ commands: [Command], readingUnread wanted: ([Result<CommandResult, DomainError>]) -> [UnreadRequest]
    ) throws -> BatchOutcome {
        try pool.writeWithoutTransaction { db in
            try Self.writeBatch(db, memory: writerMemory) { sends in
                try Self.applyBatch(commands, in: db, sends: &sends, readingUnread: wanted)
            }
        }
    }

    /// The batch, then the unread counts `wanted` names for its results, in the batch's transaction.
    private static func applyBatch(
        _ commands: [Command], in db: Database, sends: inout SendBatch,
        readingUnread wanted: ([Result<CommandResult, DomainError>]) -> [UnreadRequest]
    ) throws -> BatchOutcome {
        let results = try applyBatch(commands, in: db, sends: &sends)
        // Counts in the conversations the sends read are known without a read (``SendBatch/unread(_:)``). A count that
        // cannot be read is left out: the batch is stored all the same, and the publication then records its user's
        // change like any other, to be pushed when the user's interval ends.
        let unread = wanted(results).compactMap { request in
            (sends.unread(request) ?? (try? fetchUnread(db, request)))
                .map { (request, $0) }
        }
        return BatchOutcome(results: results, unread: unread)
    }

    /// Applies the commands in the transaction open on `db`; `sends` carries what sends read (``SendBatch``).
    static func applyBatch(_ commands: [Command], in db: Database, sends: inout SendBatch) throws
        -> [Result<CommandResult, DomainError>]
    {
        var results: [Result<CommandResult, DomainError>] = []
        results.reserveCapacity(commands.count)
        for command in commands {
            if case .sendMessage(let send) = command {
                // Decided before anything is written: no savepoint needed.
                results.append(try sends.send(send, in: db))
                continue
            }
            // Other commands read the tables: first write what the sends kept in memory.
            try sends.flush(db)
            // A savepoint per command: a rule that refuses one command halfway undoes only that command.
            var result: Result<CommandResult, DomainError>!
            try db.inSavepoint {
                do {
                    result = .success(try Self.apply(command, in: db))
                    return .commit
                } catch let error as DomainError {
                    result = .failure(error)
                    return .rollback
                }
            }
            results.append(result)
            // A receipt moves one participant's read position; anything else may have changed any conversation.
            if case .markReceipt(let mark) = command { sends.forget(mark.conversationId) } else { sends.forget() }
            // An erased message's client message id is free again: the tail is read from the log next time.
            if case .deleteMessage(let action) = command, action.erasesSender { sends.forgetClientIds() }
        }
        try sends.flush(db)
        return results
    }

    /// One command: read what its decision needs, decide (``CommandDecisions``), carry the plan out.
    static func apply(_ command: Command, in db: Database) throws -> CommandResult {
        typealias Decide = CommandDecisions
        switch command {
        case .createConversation(let create):
            switch try Decide.createConversation(create, try createReads(create, in: db)) {
            case .existing(let result): return result
            case .insert(let new):
                return try perform(Decide.created(create, row: try insertConversation(new, in: db)), in: db)
            }
        case .updateConversation(let update):
            let snapshot = try snapshot(update.appId, update.conversationId, actor: update.actor, in: db)
            return try perform(Decide.updateConversation(update, snapshot), in: db)
        case .deleteConversation(let action), .undeleteConversation(let action):
            let snapshot = try snapshot(action.appId, action.conversationId, actor: action.actor, in: db)
            let deleted: Bool
            if case .deleteConversation = command { deleted = true } else { deleted = false }
            return try perform(Decide.setDeleted(deleted, action, snapshot), in: db)
        case .join(let action):
            let snapshot = try snapshot(action.appId, action.conversationId, actor: action.actor, in: db)
            // Read for one who is not a participant yet.
            let ban = try snapshot.flatMap {
                $0.actor == nil ? try activeBan(db, row: $0.row, uid: action.actor, now: action.now) : nil
            }
            return try perform(Decide.join(action, snapshot, ban: ban), in: db)
        case .addParticipants(let add):
            let snapshot = try snapshot(add.appId, add.conversationId, actor: add.actor, in: db)
            let reads = try snapshot.map { snapshot in
                let uids = Array(Set(add.entries.map(\.uid)))
                return CommandReads.Add(
                    participants: try fetchParticipants(db, conversationPK: snapshot.row.pk),
                    knownUsers: try existingUsers(db, appId: add.appId, uids: uids),
                    bans: try activeBans(db, row: snapshot.row, uids: uids, now: add.now)
                )
            }
            return try perform(
                Decide.addParticipants(add, snapshot, reads ?? .init(participants: [], knownUsers: [], bans: [:])),
                in: db
            )
        case .updateParticipant(let update):
            let snapshot = try snapshot(update.appId, update.conversationId, actor: update.actor, in: db)
            let target = try participant(update.uid, of: snapshot, in: db)
            return try perform(Decide.updateParticipant(update, snapshot, target: target), in: db)
        case .removeParticipant(let remove):
            let snapshot = try snapshot(remove.appId, remove.conversationId, actor: remove.actor, in: db)
            let target = try participant(remove.uid, of: snapshot, in: db)
            return try perform(Decide.removeParticipant(remove, snapshot, target: target), in: db)
        case .sendMessage(let send):
            var sends = SendBatch()
            let result = try sends.send(send, in: db)
            try sends.flush(db)
            return try result.get()
        case .markReceipt(let mark):
            let snapshot = try snapshot(mark.appId, mark.conversationId, actor: mark.uid, in: db)
            let move = try Decide.receiptMove(mark, snapshot)
            var newest: [Int64: MessagePlace] = [:]
            for seq in move.named {
                newest[seq] = try newestMessage(db, conversationPK: move.snapshot.row.pk, atOrBefore: seq)
            }
            return try perform(Decide.markReceipt(mark, move, newest: newest), in: db)
        case .editMessage(let edit):
            let snapshot = try snapshot(edit.appId, edit.conversationId, actor: edit.actor, in: db)
            var reads = try messageReads(edit.messageId, of: snapshot, actor: edit.actor, in: db)
            if let row = snapshot?.row {
                reads.attachments = try fetchAttachments(db, appId: row.appId, ids: Attachments.ids(in: edit.parts))
            }
            return try perform(Decide.editMessage(edit, snapshot, reads), in: db)
        case .deleteMessage(let action):
            let snapshot = try snapshot(action.appId, action.conversationId, actor: action.actor, in: db)
            let reads = try messageReads(action.messageId, of: snapshot, actor: nil, in: db)
            return try perform(Decide.deleteMessage(action, snapshot, reads), in: db)
        case .react(let react):
            let snapshot = try snapshot(react.appId, react.conversationId, actor: react.actor, in: db)
            var reads = try messageReads(react.messageId, of: snapshot, actor: react.actor, in: db)
            if let row = snapshot?.row, let message = reads.stored?.message {
                reads.reactions = try reactionTallies(db, conversationPK: row.pk, seq: message.seq, actor: react.actor)
            }
            return try perform(Decide.react(react, snapshot, reads), in: db)
        case .removeDeletedUser(let remove):
            let snapshot = try snapshot(remove.appId, remove.conversationId, actor: nil, in: db)
            let participants = try snapshot.map { try fetchParticipants(db, conversationPK: $0.row.pk) } ?? []
            return try perform(Decide.removeDeletedUser(remove, snapshot, participants: participants), in: db)
        case .pin(let pin):
            let snapshot = try snapshot(pin.appId, pin.conversationId, actor: pin.actor, in: db)
            var reads = try messageReads(pin.messageId, of: snapshot, actor: pin.actor, in: db)
            if let row = snapshot?.row, let message = reads.stored?.message {
                (reads.pin, reads.pinCount) = try pinReads(db, conversationPK: row.pk, message: message)
            }
            return try perform(Decide.pin(pin, snapshot, reads), in: db)
        case .muteParticipant(let mute):
            let snapshot = try snapshot(mute.appId, mute.conversationId, actor: mute.actor, in: db)
            let target = try participant(mute.uid, of: snapshot, in: db)
            return try perform(Decide.muteParticipant(mute, snapshot, target: target), in: db)
        case .banParticipant(let ban):
            let snapshot = try snapshot(ban.appId, ban.conversationId, actor: ban.actor, in: db)
            let reads = try snapshot.map { snapshot in
                CommandReads.Ban(
                    participant: try fetchParticipant(db, conversationPK: snapshot.row.pk, uid: ban.uid),
                    isUser: try fetchUser(db, appId: ban.appId, uid: ban.uid) != nil,
                    current: try activeBan(db, row: snapshot.row, uid: ban.uid, now: ban.now)
                )
            }
            return try perform(
                Decide.banParticipant(ban, snapshot, reads ?? .init(participant: nil, isUser: false, current: nil)),
                in: db
            )
        }
    }

    // MARK: Reads

    /// The conversation as a command reads it: the row, its participants, and `actor`'s participation.
    static func snapshot(_ appId: String, _ id: String, actor: String?, in db: Database) throws
        -> ConversationSnapshot?
    {
        guard let row = try fetchConversation(db, appId: appId, id: id) else { return nil }
        return ConversationSnapshot(
            row: row, members: try participantUIDs(db, conversationPK: row.pk),
            actor: try actor.flatMap { try fetchParticipant(db, conversationPK: row.pk, uid: $0) }
        )
    }

    /// `uid`'s participation in the conversation read.
    static func participant(_ uid: String, of snapshot: ConversationSnapshot?, in db: Database) throws
        -> Participant?
    {
        guard let snapshot else { return nil }
        return try fetchParticipant(db, conversationPK: snapshot.row.pk, uid: uid)
    }

    static func createReads(_ create: Command.CreateConversation, in db: Database) throws -> CommandReads.Create {
        let others = Array(Set(create.participants.filter { $0 != create.creator }))
        var existing: (ConversationSnapshot, [Participant])?
        if let directKey = create.directKey,
            let found = try Row.fetchOne(
                db, sql: "SELECT * FROM conversations WHERE app_id = ? AND direct_key = ?",
                arguments: [create.appId, directKey]
            )
        {
            let row = try conversationRow(found)
            existing = (
                ConversationSnapshot(row: row, members: try participantUIDs(db, conversationPK: row.pk), actor: nil),
                try fetchParticipants(db, conversationPK: row.pk)
            )
        }
        let blockers =
            create.type == .direct && existing == nil && others.count == 1
            ? try blockersBetween(db, appId: create.appId, create.creator, others[0]) : []
        return CommandReads.Create(
            knownUsers: try existingUsers(db, appId: create.appId, uids: others), existing: existing,
            blockers: blockers
        )
    }

    /// Inserts a new conversation; returns it as stored.
    static func insertConversation(_ new: CommandDecisions.NewConversation, in db: Database) throws
        -> ConversationRow
    {
        let conversation = new.conversation
        try db.execute(
            sql: """
                INSERT INTO conversations (id, app_id, type, direct_key, name, description, is_public, metadata,
                    created_by, created_at, updated_at, last_seq, last_activity_at, participant_count, roles)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                conversation.id, new.appId, conversation.type.rawValue, new.directKey, conversation.name,
                conversation.description, conversation.isPublic, try json(conversation.metadata),
                conversation.createdBy, conversation.createdAt, conversation.updatedAt, conversation.lastSeq,
                conversation.createdAt, conversation.participantCount, conversation.roles.storedJSON,
            ]
        )
        guard let row = try fetchConversation(db, appId: new.appId, id: conversation.id) else {
            throw DomainError(.internalError, "The conversation \(conversation.id) could not be created.")
        }
        return row
    }

    /// What a command on one message reads: the message, and the blocks between a direct conversation's pair when
    /// `actor` writes.
    static func messageReads(_ messageId: String, of snapshot: ConversationSnapshot?, actor: String?, in db: Database)
        throws -> CommandReads.OnMessage
    {
        guard let snapshot else { return CommandReads.OnMessage(stored: nil) }
        let row = snapshot.row
        var reads = CommandReads.OnMessage(
            stored: try fetchStoredMessage(db, conversationPK: row.pk, messageId: messageId))
        if let actor, let other = snapshot.other(than: actor) {
            reads.blockers = try blockersBetween(db, appId: row.appId, actor, other)
        }
        return reads
    }

    /// The newest message at or before `seq`; nil when there is none.
    static func newestMessage(_ db: Database, conversationPK: Int64, atOrBefore seq: Int64) throws -> MessagePlace? {
        try Row.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT message_id, created_at FROM events WHERE conversation_pk = ? AND seq <= ?
                    AND message_index IS NOT NULL ORDER BY seq DESC LIMIT 1
                    """
            ),
            arguments: [conversationPK, seq]
        ).map { MessagePlace(messageId: $0[0], sentAt: $0[1]) }
    }

    /// The reactions on a message, key by key, as a reaction by `actor` reads them.
    static func reactionTallies(_ db: Database, conversationPK: Int64, seq: Int64, actor: String) throws
        -> [ReactionTally]
    {
        try Row.fetchAll(
            db,
            sql: """
                SELECT key, COUNT(*), MAX(uid = ?), MIN(created_at), MIN(CASE WHEN uid <> ? THEN created_at END)
                FROM reactions WHERE conversation_pk = ? AND message_seq = ? GROUP BY key
                """,
            arguments: [actor, actor, conversationPK, seq]
        ).map { ReactionTally(key: $0[0], count: $0[1], byActor: $0[2], firstAt: $0[3], firstByOthersAt: $0[4]) }
    }

    /// The message's pin, and how many messages its conversation has pinned.
    static func pinReads(_ db: Database, conversationPK: Int64, message: Message) throws -> (MessagePin?, Int) {
        guard
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT COUNT(*), MAX(message_seq = ?), MAX(CASE WHEN message_seq = ? THEN pinned_by END),
                        MAX(CASE WHEN message_seq = ? THEN pinned_at END)
                    FROM pins WHERE conversation_pk = ?
                    """,
                arguments: [message.seq, message.seq, message.seq, conversationPK]
            )
        else { return (nil, 0) }
        let pinned: Bool? = row[1]
        let pinnedAt: Int64? = row[3]
        let pin =
            pinned == true
            ? pinnedAt.map {
                MessagePin(messageId: message.id, messageSeq: message.seq, pinnedBy: row[2], pinnedAt: $0)
            } : nil
        return (pin, row[0])
    }

    /// Runs `body` on `uids` in chunks of 500 (SQLite binds at most 32,766 parameters), each with its `?, ?, ...`.
    static func inChunks<T>(_ uids: [String], _ body: (_ chunk: ArraySlice<String>, _ marks: String) throws -> T)
        rethrows -> [T]
    {
        var results: [T] = []
        for start in stride(from: 0, to: uids.count, by: 500) {
            let chunk = uids[start..<min(start + 500, uids.count)]
            results.append(try body(chunk, Array(repeating: "?", count: chunk.count).joined(separator: ",")))
        }
        return results
    }

    /// Which of `uids` are users of the app.
    static func existingUsers(_ db: Database, appId: String, uids: [String]) throws -> Set<String> {
        Set(
            try inChunks(uids) { chunk, marks in
                try String.fetchAll(
                    db, sql: "SELECT uid FROM users WHERE app_id = ? AND uid IN (\(marks))",
                    arguments: StatementArguments([appId] + Array(chunk))
                )
            }.joined())
    }

    static func participantUIDs(_ db: Database, conversationPK: Int64) throws -> [String] {
        try String.fetchAll(
            db.cachedStatement(sql: "SELECT uid FROM participants WHERE conversation_pk = ?"),
            arguments: [conversationPK]
        )
    }

    static func fetchParticipant(_ db: Database, conversationPK: Int64, uid: String) throws -> Participant? {
        try Row.fetchOne(
            db, sql: "SELECT * FROM participants WHERE conversation_pk = ? AND uid = ?",
            arguments: [conversationPK, uid]
        ).map(participant)
    }
}
