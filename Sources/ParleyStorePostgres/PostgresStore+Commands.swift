import Foundation
import Logging
import NIOCore
import ParleyProtocol
import ParleyStore
import PostgresNIO

// How several writers stay correct
// --------------------------------
// A batch is one READ COMMITTED transaction. Before any command runs, it locks the rows of every conversation the
// batch names (`FOR NO KEY UPDATE`, in primary-key order), then the rows of every user whose membership stream it may
// extend (in (app_id, uid) order). Every transaction takes its locks in that one global order, so two nodes do not
// deadlock over them (a deadlock PostgreSQL still detects, e.g. two nodes racing to create the same direct
// conversation, aborts one transaction, which is retried as a whole).
//
// Holding a conversation's row lock, the transaction reads `last_seq` (after the wait, READ COMMITTED reads the
// latest committed row) and numbers its events from there; the lock is released only when it commits. A second
// writer of the same conversation waits for that commit, so seq N+1 is committed after seq N, and since PostgreSQL
// makes a transaction visible before it releases its locks, no reader can see N+1 without N. `users.last_user_seq`
// works the same way under the user's row lock. The same lock makes the client-message-id check race-free: a second
// node sending the same (sender, clientMessageId) waits, then finds the first message.
//
// That check is optimistic: a batch first assumes that its client message ids are new (repeats within the batch are
// found in memory) and lets the unique index `events_by_client_message` refuse a repeat of an earlier batch's. The
// violation aborts the transaction, and the batch is retried with the ids looked up before anything is written,
// which then finds the first message. Repeats are rare (a client resending after a lost ack), so most batches save
// that lookup.

extension PostgresStore {
    /// How many times a batch is retried after a deadlock, a serialization failure or a lost dedupe race.
    static let maxAttempts = 5

    public func apply(_ commands: [Command]) async throws -> [Result<CommandResult, DomainError>] {
        guard !commands.isEmpty else { return [] }
        var attempt = 1
        var looksUpClientMessageIds = false
        while true {
            do {
                return try await withSession { [looksUpClientMessageIds] session in
                    try await session.transaction {
                        let batch = BatchTransaction(session: session, looksUpClientMessageIds: looksUpClientMessageIds)
                        return try await batch.apply(commands)
                    }
                }
            } catch let error as PSQLError where attempt < Self.maxAttempts && Self.isRetryable(error) {
                if Self.isRepeatedClientMessageId(error) && !looksUpClientMessageIds {
                    // The optimistic check lost: expected now and then (a client resending), not worth a notice.
                    looksUpClientMessageIds = true
                    logger.debug(
                        "Retrying a batch of \(commands.count) command(s) with its client message ids looked up")
                } else {
                    logger.notice(
                        "Retrying a batch of \(commands.count) command(s) (attempt \(attempt + 1))",
                        metadata: ["reason": "\(Self.describe(error))"]
                    )
                }
                attempt += 1
            } catch let error as PSQLError where error.sqlState == "53100" {
                // disk_full: a documented refusal, as SQLite's SQLITE_FULL is (the writer logs it once a minute).
                throw DomainError(.storageFull, "The server's storage is full: nothing was stored. Try again later.")
            } catch let error as PSQLError {
                // postgres-nio's description says nothing; give the SQLSTATE and message (never the SQL or values).
                throw PostgresStoreError(.database, Self.describe(error), sqlState: error.sqlState, underlying: error)
            }
        }
    }

    /// Failures that another attempt of the same batch can get past.
    static func isRetryable(_ error: PSQLError) -> Bool {
        switch error.sqlState {
        case "40P01", "40001": return true  // deadlock_detected, serialization_failure
        case "23505": return isRepeatedClientMessageId(error)
        default: return false
        }
    }

    /// A message stored again with a client message id its sender already used in the conversation.
    static func isRepeatedClientMessageId(_ error: PSQLError) -> Bool {
        error.sqlState == "23505" && error.serverInfo?[.constraintName] == "events_by_client_message"
    }
}

/// One batch of commands in one transaction.
struct BatchTransaction {
    let session: PostgresSession
    /// Whether sends look their client message ids up before writing (see the top of this file); when false, a
    /// repeat of an earlier batch's id is left to the unique index.
    var looksUpClientMessageIds = false

    func rows(_ query: PostgresQuery) async throws -> [PostgresRow] { try await session.rows(query) }
    func execute(_ query: PostgresQuery) async throws { try await session.execute(query) }

    func apply(_ commands: [Command]) async throws -> [Result<CommandResult, DomainError>] {
        let locked = try await lockConversations(Set(commands.compactMap(\.conversationId)))
        try await lockUsers(commands.flatMap(Self.membershipUsers))
        var results: [Result<CommandResult, DomainError>] = []
        results.reserveCapacity(commands.count)
        var index = commands.startIndex
        while index < commands.endIndex {
            // Consecutive sends take the batched path; anything else runs alone in a savepoint.
            var sends: [Command.SendMessage] = []
            while index < commands.endIndex, case .sendMessage(let send) = commands[index] {
                sends.append(send)
                index += 1
            }
            if !sends.isEmpty {
                // Sends that open the batch find their conversations as locked; later ones read them again, since
                // the commands before them may have changed them.
                results += try await sendMessages(sends, locked: sends.count == index ? locked : nil)
                continue
            }
            results.append(try await inSavepoint(commands[index]))
            index += 1
        }
        return results
    }

    /// A savepoint per command: a rule that refuses one command halfway undoes only that command.
    func inSavepoint(_ command: Command) async throws -> Result<CommandResult, DomainError> {
        try await execute("SAVEPOINT command")
        do {
            let result = try await apply(command)
            try await execute("RELEASE SAVEPOINT command")
            return .success(result)
        } catch let error as DomainError {
            try await execute("ROLLBACK TO SAVEPOINT command")
            try await execute("RELEASE SAVEPOINT command")
            return .failure(error)
        }
    }

    /// One command: read what its decision needs, decide (``CommandDecisions``), carry the plan out.
    func apply(_ command: Command) async throws -> CommandResult {
        typealias Decide = CommandDecisions
        switch command {
        case .createConversation(let create):
            switch try Decide.createConversation(create, try await createReads(create)) {
            case .existing(let result): return result
            case .insert(let new):
                guard let row = try await insertConversation(new) else {
                    // The pair's direct conversation, created by another node at the same moment.
                    guard let directKey = create.directKey,
                        let (snapshot, participants) = try await directConversation(
                            create.appId, directKey)
                    else { throw DomainError(.internalError, "The conversation \(create.newId) could not be created.") }
                    return Decide.existingDirect(snapshot, participants)
                }
                return try await perform(Decide.created(create, row: row))
            }
        case .updateConversation(let update):
            let snapshot = try await snapshot(update.appId, update.conversationId, actor: update.actor)
            return try await perform(Decide.updateConversation(update, snapshot))
        case .deleteConversation(let action), .undeleteConversation(let action):
            let snapshot = try await snapshot(action.appId, action.conversationId, actor: action.actor)
            let deleted: Bool
            if case .deleteConversation = command { deleted = true } else { deleted = false }
            return try await perform(Decide.setDeleted(deleted, action, snapshot))
        case .join(let action):
            let snapshot = try await snapshot(action.appId, action.conversationId, actor: action.actor)
            var ban: ConversationBan?
            // Read for one who is not a participant yet.
            if let snapshot, snapshot.actor == nil {
                ban = try await activeBans(row: snapshot.row, uids: [action.actor], now: action.now)[action.actor]
            }
            return try await perform(Decide.join(action, snapshot, ban: ban))
        case .addParticipants(let add):
            let snapshot = try await snapshot(add.appId, add.conversationId, actor: add.actor)
            var reads = CommandReads.Add(participants: [], knownUsers: [], bans: [:])
            if let snapshot {
                let uids = Array(Set(add.entries.map(\.uid)))
                reads = CommandReads.Add(
                    participants: try await fetchParticipants(snapshot.row.pk),
                    knownUsers: try await knownUsers(add.appId, uids),
                    bans: try await activeBans(row: snapshot.row, uids: uids, now: add.now)
                )
            }
            return try await perform(Decide.addParticipants(add, snapshot, reads))
        case .updateParticipant(let update):
            let snapshot = try await snapshot(update.appId, update.conversationId, actor: update.actor)
            let target = try await participant(update.uid, of: snapshot)
            return try await perform(Decide.updateParticipant(update, snapshot, target: target))
        case .removeParticipant(let remove):
            let snapshot = try await snapshot(remove.appId, remove.conversationId, actor: remove.actor)
            let target = try await participant(remove.uid, of: snapshot)
            return try await perform(Decide.removeParticipant(remove, snapshot, target: target))
        case .sendMessage(let send): return try await sendMessages([send], locked: nil)[0].get()
        case .markReceipt(let mark):
            let snapshot = try await snapshot(mark.appId, mark.conversationId, actor: mark.uid)
            let move = try Decide.receiptMove(mark, snapshot)
            var newest: [Int64: MessagePlace] = [:]
            for seq in move.named {
                newest[seq] = try await newestMessage(move.snapshot.row.pk, atOrBefore: seq)
            }
            return try await perform(Decide.markReceipt(mark, move, newest: newest))
        case .editMessage(let edit):
            let snapshot = try await snapshot(edit.appId, edit.conversationId, actor: edit.actor)
            var reads = try await messageReads(edit.messageId, of: snapshot, actor: edit.actor)
            if let row = snapshot?.row {
                reads.attachments = try await lockAttachments(appId: row.appId, ids: Attachments.ids(in: edit.parts))
            }
            return try await perform(Decide.editMessage(edit, snapshot, reads))
        case .deleteMessage(let action):
            let snapshot = try await snapshot(action.appId, action.conversationId, actor: action.actor)
            let reads = try await messageReads(action.messageId, of: snapshot, actor: nil)
            return try await perform(Decide.deleteMessage(action, snapshot, reads))
        case .react(let react):
            let snapshot = try await snapshot(react.appId, react.conversationId, actor: react.actor)
            var reads = try await messageReads(react.messageId, of: snapshot, actor: react.actor)
            if let row = snapshot?.row, let message = reads.stored?.message {
                reads.reactions = try await reactionTallies(row.pk, seq: message.seq, actor: react.actor)
            }
            return try await perform(Decide.react(react, snapshot, reads))
        case .removeDeletedUser(let remove):
            let snapshot = try await snapshot(remove.appId, remove.conversationId, actor: nil)
            var participants: [Participant] = []
            if let snapshot { participants = try await fetchParticipants(snapshot.row.pk) }
            return try await perform(Decide.removeDeletedUser(remove, snapshot, participants: participants))
        case .pin(let pin):
            let snapshot = try await snapshot(pin.appId, pin.conversationId, actor: pin.actor)
            var reads = try await messageReads(pin.messageId, of: snapshot, actor: pin.actor)
            if let row = snapshot?.row, let message = reads.stored?.message {
                (reads.pin, reads.pinCount) = try await pinReads(row.pk, message: message)
            }
            return try await perform(Decide.pin(pin, snapshot, reads))
        case .muteParticipant(let mute):
            let snapshot = try await snapshot(mute.appId, mute.conversationId, actor: mute.actor)
            let target = try await participant(mute.uid, of: snapshot)
            return try await perform(Decide.muteParticipant(mute, snapshot, target: target))
        case .banParticipant(let ban):
            let snapshot = try await snapshot(ban.appId, ban.conversationId, actor: ban.actor)
            var reads = CommandReads.Ban(participant: nil, isUser: false, current: nil)
            if let snapshot {
                reads = CommandReads.Ban(
                    participant: try await fetchParticipant(snapshot.row.pk, uid: ban.uid),
                    isUser: !(try await knownUsers(ban.appId, [ban.uid]).isEmpty),
                    current: try await activeBans(row: snapshot.row, uids: [ban.uid], now: ban.now)[ban.uid]
                )
            }
            return try await perform(Decide.banParticipant(ban, snapshot, reads))
        }
    }

    // MARK: Locks

    /// Locks the rows of the named conversations, in primary-key order; returns them by id.
    ///
    /// A row that another transaction changed while this one waited for its lock is returned as that transaction
    /// committed it (READ COMMITTED re-reads a locked row): these are the rows as they are now.
    func lockConversations(_ ids: Set<String>) async throws -> [String: ConversationRow] {
        guard !ids.isEmpty else { return [:] }
        var locked: [String: ConversationRow] = [:]
        for row in try await session.rows(Self.lockConversationsQuery(Array(ids)), as: LockConversations.self) {
            let conversation = try PostgresStore.conversationRow(row)
            locked[conversation.conversation.id] = conversation
        }
        return locked
    }

    static func lockConversationsQuery(_ ids: [String]) -> PostgresQuery {
        """
        SELECT \(unescaped: PostgresStore.conversationColumns()) FROM conversations
        WHERE id = ANY(\(ids)) ORDER BY pk FOR NO KEY UPDATE
        """
    }

    enum LockConversations: PreparedSQL { static let sql = lockConversationsQuery([]).sql }

    /// Locks the rows of users whose membership stream the batch may extend, in (app_id, uid) order.
    func lockUsers(_ users: [UserKey]) async throws {
        // One query per app (a batch nearly always has one), apps in order: `uid = ANY(...)` is an index scan.
        for (appId, keys) in Dictionary(grouping: users, by: \.appId).sorted(by: { $0.key < $1.key }) {
            try await execute(
                """
                SELECT 1 FROM users WHERE app_id = \(appId) AND uid = ANY(\(Array(Set(keys.map(\.uid)))))
                ORDER BY uid FOR NO KEY UPDATE
                """
            )
        }
    }

    struct UserKey: Hashable {
        var appId: String
        var uid: String
    }

    /// The users whose membership stream a command may extend (who may join or leave).
    static func membershipUsers(_ command: Command) -> [UserKey] {
        switch command {
        case .createConversation(let create):
            return ([create.creator] + create.participants).map { UserKey(appId: create.appId, uid: $0) }
        case .join(let action): return [UserKey(appId: action.appId, uid: action.actor)]
        case .addParticipants(let add): return add.entries.map { UserKey(appId: add.appId, uid: $0.uid) }
        case .removeParticipant(let remove): return [UserKey(appId: remove.appId, uid: remove.uid)]
        case .removeDeletedUser(let remove): return [UserKey(appId: remove.appId, uid: remove.uid)]
        // A ban removes the user when they are a participant; lifting one changes no membership.
        case .banParticipant(let ban): return ban.banned ? [UserKey(appId: ban.appId, uid: ban.uid)] : []
        case .updateConversation, .deleteConversation, .undeleteConversation, .updateParticipant, .sendMessage,
            .markReceipt, .editMessage, .deleteMessage, .react, .pin, .muteParticipant:
            return []
        }
    }

    func participantUIDs(_ conversationPK: Int64) async throws -> [String] {
        try await rows("SELECT uid FROM participants WHERE conversation_pk = \(conversationPK)").map {
            try $0.decode(String.self)
        }
    }

    func fetchParticipant(_ conversationPK: Int64, uid: String) async throws -> Participant? {
        try await rows(
            """
            SELECT \(unescaped: PostgresStore.participantColumns()) FROM participants
            WHERE conversation_pk = \(conversationPK) AND uid = \(uid)
            """
        ).first.map(PostgresStore.participant)
    }

    func fetchParticipants(_ conversationPK: Int64) async throws -> [Participant] {
        try await rows(
            """
            SELECT \(unescaped: PostgresStore.participantColumns()) FROM participants
            WHERE conversation_pk = \(conversationPK) ORDER BY joined_at, uid
            """
        ).map(PostgresStore.participant)
    }

    // MARK: Messages

    /// Stores consecutive sends with a fixed number of round trips: read the conversations (locked), their
    /// participants and (when ``looksUpClientMessageIds``) any earlier messages with the same client ids, decide every
    /// send in memory, then write every event, conversation position and sender's read position in one statement.
    ///
    /// Refusals are decided before anything is written, so no savepoint is needed.
    ///
    /// - Parameter locked: The conversations as the batch locked them, when no command before these sends could
    ///   have changed them; nil to read them again.
    func sendMessages(_ sends: [Command.SendMessage], locked: [String: ConversationRow]?) async throws
        -> [Result<CommandResult, DomainError>]
    {
        // The conversations, locked (already, by the batch) and current.
        var conversations: [String: ConversationRow] = [:]
        if let locked {
            for send in sends { conversations[send.conversationId] = locked[send.conversationId] }
        } else {
            for row in try await session.rows(
                Self.lockConversationsQuery(Array(Set(sends.map(\.conversationId)))), as: LockConversations.self)
            {
                let conversation = try PostgresStore.conversationRow(row)
                conversations[conversation.conversation.id] = conversation
            }
        }
        let pks = Array(Set(conversations.values.map(\.pk)))
        var members: [Int64: [String]] = [:]
        var memberRoles: [Int64: [String: ParticipantRole]] = [:]
        var mutes: [Int64: [String: Int64?]] = [:]
        var messageCounts: [Int64: Int64] = [:]
        if !pks.isEmpty {
            for row in try await session.rows(Self.sendersQuery(pks), as: Senders.self) {
                let (pk, count, uid, role, muted, until) = try row.decode(
                    (Int64, Int64, String?, String?, Bool?, Int64?).self
                )
                messageCounts[pk] = count
                if let uid {
                    members[pk, default: []].append(uid)
                    memberRoles[pk, default: [:]][uid] = role.flatMap(ParticipantRole.init(rawValue:)) ?? .member
                    if muted == true { mutes[pk, default: [:]][uid] = until }
                }
            }
        }

        // The messages replied to: stored before, or sent earlier in these sends.
        struct MessageKey: Hashable {
            var conversationPK: Int64
            var messageId: String
        }
        var parents: [MessageKey: Message] = [:]
        let replyKeys = Set(
            sends.compactMap { send in
                send.replyTo.flatMap { id in
                    conversations[send.conversationId].map { MessageKey(conversationPK: $0.pk, messageId: id) }
                }
            }
        )
        if !replyKeys.isEmpty {
            for row in try await rows(
                """
                SELECT e.conversation_pk, e.body FROM unnest(\(replyKeys.map(\.conversationPK)), \(replyKeys.map(\.messageId)))
                    AS k(pk, message_id)
                JOIN events e ON e.conversation_pk = k.pk AND e.message_id = k.message_id AND e.message_index IS NOT NULL
                """
            ) {
                let (pk, body) = try row.decode((Int64, ByteBuffer).self)
                let message = try MessageLifecycle.message(in: body.readableBytesView)
                parents[MessageKey(conversationPK: pk, messageId: message.id)] = message
            }
        }

        // The blocks between the two participants of each direct conversation sent to, read once for these sends (a
        // block is written outside the batches, so none changes within them).
        var directBlockers: [Int64: [String]] = [:]
        let directs = Set(
            sends.compactMap { conversations[$0.conversationId] }.filter { $0.conversation.type == .direct }.map(\.pk)
        )
        if !directs.isEmpty {
            for row in try await rows(
                """
                SELECT p.conversation_pk, b.blocker FROM participants p
                JOIN participants q ON q.conversation_pk = p.conversation_pk AND q.uid <> p.uid
                JOIN conversations c ON c.pk = p.conversation_pk
                JOIN blocks b ON b.app_id = c.app_id AND b.blocker = p.uid AND b.blocked = q.uid
                WHERE p.conversation_pk = ANY(\(Array(directs)))
                """
            ) {
                let (pk, blocker) = try row.decode((Int64, String).self)
                directBlockers[pk, default: []].append(blocker)
            }
        }

        // The uploads the sends name, locked (Attachments).
        let uploads = try await lockAttachments(appId: nil, ids: Set(sends.flatMap { Attachments.ids(in: $0.parts) }))
        var taken: [(ids: [String], messageId: String)] = []
        var takenIds = Set<String>()

        // Earlier messages with the same client message ids.
        struct ClientKey: Hashable {
            var conversationPK: Int64
            var sender: String
            var clientMessageId: String
        }
        var asked: [ClientKey] = []
        for send in sends where looksUpClientMessageIds {
            if let clientMessageId = send.clientMessageId, let row = conversations[send.conversationId] {
                asked.append(ClientKey(conversationPK: row.pk, sender: send.sender, clientMessageId: clientMessageId))
            }
        }
        // Messages with these ids already stored; without the lookup, repeats within these sends only (a repeat of
        // an earlier batch's is refused by the unique index, and the batch comes back with the lookup on).
        var sent: [ClientKey: Message] = [:]
        if !asked.isEmpty {
            let decoder = JSONDecoder()
            for row in try await rows(
                """
                SELECT e.conversation_pk, e.actor, e.client_message_id, e.body
                FROM unnest(\(asked.map(\.conversationPK)), \(asked.map(\.sender)), \(asked.map(\.clientMessageId)))
                    AS k(pk, actor, client_message_id)
                CROSS JOIN LATERAL (
                    -- One probe of events_by_client_message per key: LIMIT 1 keeps the planner from hashing all events,
                    -- and IS NOT NULL lets the partial index serve.
                    SELECT * FROM events e WHERE e.conversation_pk = k.pk AND e.actor = k.actor
                        AND e.client_message_id = k.client_message_id AND e.client_message_id IS NOT NULL LIMIT 1
                ) e
                """
            ) {
                let (pk, actor, clientMessageId, body) = try row.decode((Int64, String, String, ByteBuffer).self)
                let stored = try decoder.decode(Event.self, from: Data(body.readableBytesView))
                guard case .messageSent(let message) = stored.payload else {
                    throw DomainError(.internalError, "Stored event \(stored.id) is not a message.")
                }
                sent[ClientKey(conversationPK: pk, sender: actor, clientMessageId: clientMessageId)] = message
            }
        }

        // Decide each send in order.
        var inserts = EventColumns()
        var positions: [Int64: (lastSeq: Int64, messageCount: Int64, lastActivityAt: Int64)] = [:]
        var readers: [ReaderKey: (seq: Int64, index: Int64)] = [:]
        var outbox: [(appId: String, pk: Int64, seq: Int64, now: Int64)] = []
        var mentions: [(appId: String, uid: String, pk: Int64, seq: Int64, sentAt: Int64)] = []
        var results: [Result<CommandResult, DomainError>] = []
        results.reserveCapacity(sends.count)
        for send in sends {
            let row = conversations[send.conversationId]
            let target = row.map { row in
                SendTarget(
                    appId: row.appId, id: row.conversation.id, isPublic: row.conversation.isPublic,
                    isDirect: row.conversation.type == .direct, isDeleted: row.deletedAt != nil,
                    lastSeq: positions[row.pk]?.lastSeq ?? row.conversation.lastSeq, roles: row.conversation.roles,
                    members: memberRoles[row.pk] ?? [:], mutes: mutes[row.pk] ?? [:]
                )
            }
            let access: (target: SendTarget, role: ParticipantRole?)
            do {
                access = try CommandDecisions.sendAccess(send, target)
            } catch let refusal as DomainError {
                results.append(.failure(refusal))
                continue
            }
            guard let row else {
                results.append(.failure(.conversationNotFound(send.conversationId)))
                continue
            }
            let recipients = members[row.pk] ?? []
            let key = send.clientMessageId.map {
                ClientKey(conversationPK: row.pk, sender: send.sender, clientMessageId: $0)
            }
            if let key, let original = sent[key] {
                results.append(
                    .success(
                        CommandResult(outcome: .message(original, duplicate: true), events: [], recipients: recipients))
                )
                continue
            }
            let parent = send.replyTo.flatMap { parents[MessageKey(conversationPK: row.pk, messageId: $0)] }
            let message: Message
            do {
                message = try CommandDecisions.sentMessage(
                    send, to: access.target, role: access.role,
                    SendReads(
                        blockers: directBlockers[row.pk] ?? [], parent: parent, attachments: uploads, taken: takenIds)
                )
            } catch let refusal as DomainError {
                // A repeat of a message stored before its parent was deleted (or the sender's role changed) is still
                // the message stored then.
                if let key, let original = try await storedMessage(key.conversationPK, key.sender, key.clientMessageId)
                {
                    results.append(
                        .success(
                            CommandResult(
                                outcome: .message(original, duplicate: true), events: [], recipients: recipients)
                        )
                    )
                } else {
                    results.append(.failure(refusal))
                }
                continue
            }
            var position =
                positions[row.pk]
                ?? (
                    lastSeq: row.conversation.lastSeq, messageCount: messageCounts[row.pk] ?? 0,
                    lastActivityAt: row.lastActivityAt
                )
            let effects = CommandDecisions.sentEffects(of: message, send, messageCount: position.messageCount)
            position.lastSeq = message.seq
            position.messageCount = effects.messageCount
            position.lastActivityAt = send.now
            positions[row.pk] = position
            let files = Attachments.ids(in: message.parts)
            if !files.isEmpty {
                taken.append((files, message.id))
                takenIds.formUnion(files)
            }
            parents[MessageKey(conversationPK: row.pk, messageId: message.id)] = message
            let stored = try CommandDecisions.sentEvent(message, appId: row.appId)
            let json = stored.json
            inserts.append(
                conversationPK: row.pk, seq: message.seq, name: .messageSent, actor: send.sender, createdAt: send.now,
                clientMessageId: send.clientMessageId, messageIndex: effects.messageIndex, messageId: message.id,
                threadSeq: parent?.seq, body: json, search: MessageSearch.words(of: message),
                searchHasFile: MessageSearch.hasFile(message)
            )
            for uid in effects.recordsMentions ? message.mentions ?? [] : [] {
                mentions.append((row.appId, uid, row.pk, message.seq, message.sentAt))
            }
            // Writing a message implies having read the conversation up to it.
            if effects.movesSenderRead {
                readers[ReaderKey(conversationPK: row.pk, uid: send.sender)] = (message.seq, position.messageCount)
            }
            if effects.queuesPush { outbox.append((row.appId, row.pk, message.seq, send.now)) }
            if let key { sent[key] = message }
            results.append(
                .success(
                    CommandResult(
                        outcome: .message(message, duplicate: false), events: [stored], recipients: recipients
                    )
                )
            )
        }
        guard !inserts.isEmpty else { return results }

        let updated = positions.map { (pk: $0.key, position: $0.value) }
        let readerRows = readers.map { (key: $0.key, value: $0.value) }
        _ = try await session.rows(
            WriteSends.sql.withBinds { binds in
                inserts.bind(into: &binds)
                binds.append(updated.map(\.pk))
                binds.append(updated.map(\.position.lastSeq))
                binds.append(updated.map(\.position.messageCount))
                binds.append(updated.map(\.position.lastActivityAt))
                binds.append(readerRows.map(\.key.uid))
                binds.append(readerRows.map(\.key.conversationPK))
                binds.append(readerRows.map(\.value.seq))
                binds.append(readerRows.map(\.value.index))
            },
            as: WriteSends.self
        )
        try await attachFiles(taken)
        if !mentions.isEmpty {
            // Unread for each mentioned participant (who has not read that far: the sender of a later message in
            // these sends has).
            try await execute(
                """
                INSERT INTO mentions (app_id, uid, conversation_pk, seq, sent_at)
                SELECT m.app_id, m.uid, m.pk, m.seq, m.sent_at
                FROM unnest(\(mentions.map(\.appId)), \(mentions.map(\.uid)), \(mentions.map(\.pk)), \(mentions.map(\.seq)),
                    \(mentions.map(\.sentAt))) AS m(app_id, uid, pk, seq, sent_at)
                JOIN participants p ON p.conversation_pk = m.pk AND p.uid = m.uid AND p.read_seq < m.seq
                ON CONFLICT DO NOTHING
                """
            )
        }
        if !outbox.isEmpty {
            try await execute(
                """
                INSERT INTO push_outbox (app_id, conversation_pk, seq, created_at)
                SELECT * FROM unnest(\(outbox.map(\.appId)), \(outbox.map(\.pk)), \(outbox.map(\.seq)), \(outbox.map(\.now)))
                """
            )
        }
        return results
    }

    /// The conversations' message counts and participants, for sends.
    static func sendersQuery(_ pks: [Int64]) -> PostgresQuery {
        """
        SELECT c.pk, c.message_count, p.uid, p.role, p.muted, p.muted_until FROM conversations c
        LEFT JOIN LATERAL (
            -- Each conversation's participants by key: joined as a set, the planner hashed the whole table.
            SELECT * FROM participants p WHERE p.conversation_pk = c.pk OFFSET 0
        ) p ON true
        WHERE c.pk = ANY(\(pks))
        """
    }

    enum Senders: PreparedSQL { static let sql = sendersQuery([]).sql }

    /// Writes a batch's messages, the conversations' positions, and the senders' read positions, in one statement.
    enum WriteSends: PreparedSQL {
        static let sql = """
            WITH new_events AS (
                \(EventColumns.insertSQL(binds: EventColumns.binds(from: 1)))
                RETURNING 1
            ), new_positions AS (
                UPDATE conversations c SET last_seq = u.last_seq, message_count = u.message_count,
                    last_activity_at = u.last_activity_at
                FROM unnest($14::bigint[], $15::bigint[], $16::bigint[], $17::bigint[])
                    AS u(pk, last_seq, message_count, last_activity_at)
                -- ANY lets the rows be found by key, not by a scan of the table hashed against the list.
                WHERE c.pk = u.pk AND c.pk = ANY($14::bigint[])
                RETURNING 1
            ), readers AS (
                UPDATE participants p SET delivered_seq = u.seq, read_seq = u.seq, read_message_count = u.message_index
                FROM unnest($18::text[], $19::bigint[], $20::bigint[], $21::bigint[]) AS u(uid, pk, seq, message_index)
                WHERE p.conversation_pk = u.pk AND p.uid = u.uid AND p.conversation_pk = ANY($19::bigint[])
                RETURNING 1
            )
            SELECT (SELECT count(*) FROM new_events), (SELECT count(*) FROM new_positions), (SELECT count(*) FROM readers)
            """
    }

    struct ReaderKey: Hashable {
        var conversationPK: Int64
        var uid: String
    }

    // MARK: Rules

    func fetchConversation(appId: String, id: String) async throws -> ConversationRow? {
        try await rows(
            """
            SELECT \(unescaped: PostgresStore.conversationColumns()) FROM conversations
            WHERE id = \(id) AND app_id = \(appId) FOR NO KEY UPDATE
            """
        ).first.map(PostgresStore.conversationRow)
    }
}

/// Events to insert, column by column, for one multi-row `INSERT ... SELECT FROM unnest(...)`.
struct EventColumns {
    var conversationPKs: [Int64] = []
    var seqs: [Int64] = []
    var names: [String] = []
    var actors: [String] = []
    var createdAts: [Int64] = []
    /// Arrays cannot carry NULL here: a flag says whether the client message id is present.
    var hasClientMessageIds: [Bool] = []
    var clientMessageIds: [String] = []
    /// 0 for events that are not messages (stored as NULL).
    var messageIndexes: [Int64] = []
    /// "" for events that carry no message (stored as NULL).
    var messageIds: [String] = []
    /// 0 for events that are not replies (stored as NULL).
    var threadSeqs: [Int64] = []
    var bodies: [ByteBuffer] = []
    /// A message's search words (``MessageSearch/words(of:)``; "" for other events, whose `search` is NULL).
    var searchWords: [String] = []
    var searchHasFiles: [Bool] = []

    var isEmpty: Bool { seqs.isEmpty }

    mutating func append(
        conversationPK: Int64, seq: Int64, name: EventName, actor: String, createdAt: Int64, clientMessageId: String?,
        messageIndex: Int64?, messageId: String?, threadSeq: Int64?, body: [UInt8], search: String = "",
        searchHasFile: Bool = false
    ) {
        searchWords.append(search)
        searchHasFiles.append(searchHasFile)
        messageIds.append(messageId ?? "")
        threadSeqs.append(threadSeq ?? 0)
        conversationPKs.append(conversationPK)
        seqs.append(seq)
        names.append(name.rawValue)
        actors.append(actor)
        createdAts.append(createdAt)
        hasClientMessageIds.append(clientMessageId != nil)
        clientMessageIds.append(clientMessageId ?? "")
        messageIndexes.append(messageIndex ?? 0)
        bodies.append(ByteBuffer(bytes: body))
    }

    /// Appends the eleven arrays, in the order of ``insertSQL(binds:)``.
    func bind(into binds: inout PostgresBindings) {
        binds.append(conversationPKs)
        binds.append(seqs)
        binds.append(names)
        binds.append(actors)
        binds.append(createdAts)
        binds.append(hasClientMessageIds)
        binds.append(clientMessageIds)
        binds.append(messageIndexes)
        binds.append(messageIds)
        binds.append(threadSeqs)
        binds.append(bodies)
        binds.append(searchWords)
        binds.append(searchHasFiles)
    }

    /// The parameter numbers of the thirteen arrays, from `first` on.
    static func binds(from first: Int) -> [Int] { Array(first..<first + 13) }

    /// The INSERT, reading its thirteen arrays from the given parameter numbers. A message (its `sent` event) gets its
    /// search document (``PostgresStore/searchDocumentSQL(words:hasFile:)``), other events none. An empty actor is
    /// the app's server (NULL), but for a message: a system message's sender is the empty string, so that a retry of
    /// it finds it by (conversation, sender, client message id) as any other.
    static func insertSQL(binds p: [Int]) -> String {
        """
        INSERT INTO events (conversation_pk, seq, name, actor, created_at, client_message_id, message_index, message_id,
            thread_seq, body, search)
        SELECT pk, seq, name, CASE WHEN message_index <> 0 THEN actor ELSE NULLIF(actor, '') END, created_at,
            CASE WHEN has_client_message_id THEN client_message_id END,
            NULLIF(message_index, 0), NULLIF(message_id, ''), NULLIF(thread_seq, 0), body,
            CASE WHEN message_index <> 0 THEN \(PostgresStore.searchDocumentSQL(words: "words", hasFile: "has_file")) END
        FROM unnest($\(p[0])::bigint[], $\(p[1])::bigint[], $\(p[2])::text[], $\(p[3])::text[], $\(p[4])::bigint[],
            $\(p[5])::boolean[], $\(p[6])::text[], $\(p[7])::bigint[], $\(p[8])::text[], $\(p[9])::bigint[],
            $\(p[10])::bytea[], $\(p[11])::text[], $\(p[12])::boolean[])
            AS e(pk, seq, name, actor, created_at, has_client_message_id, client_message_id, message_index, message_id,
                thread_seq, body, words, has_file)
        """
    }
}

extension PostgresQuery {
    /// The query with parameters appended by `bind` (for SQL that numbers its own `$n`).
    func withBinds(_ bind: (inout PostgresBindings) -> Void) -> PostgresQuery {
        var query = self
        bind(&query.binds)
        return query
    }
}

extension String {
    /// SQL text that numbers its own `$n`, with parameters appended by `bind`.
    func withBinds(_ bind: (inout PostgresBindings) -> Void) -> PostgresQuery {
        PostgresQuery(unsafeSQL: self).withBinds(bind)
    }
}
