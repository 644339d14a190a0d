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

    func apply(_ command: Command) async throws -> CommandResult {
        switch command {
        case .createConversation(let create): return try await createConversation(create)
        case .updateConversation(let update): return try await updateConversation(update)
        case .deleteConversation(let action): return try await setDeleted(true, action)
        case .undeleteConversation(let action): return try await setDeleted(false, action)
        case .join(let action): return try await join(action)
        case .addParticipants(let add): return try await addParticipants(add)
        case .updateParticipant(let update): return try await updateParticipant(update)
        case .removeParticipant(let remove): return try await removeParticipant(remove)
        case .sendMessage(let send): return try await sendMessages([send], locked: nil)[0].get()
        case .markReceipt(let mark): return try await markReceipt(mark)
        case .editMessage(let edit): return try await editMessage(edit)
        case .deleteMessage(let action): return try await deleteMessage(action)
        case .react(let react): return try await self.react(react)
        case .muteParticipant(let mute): return try await muteParticipant(mute)
        case .banParticipant(let ban): return try await banParticipant(ban)
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
        // A ban removes the user when they are a participant; lifting one changes no membership.
        case .banParticipant(let ban): return ban.banned ? [UserKey(appId: ban.appId, uid: ban.uid)] : []
        case .updateConversation, .deleteConversation, .undeleteConversation, .updateParticipant, .sendMessage,
            .markReceipt, .editMessage, .deleteMessage, .react, .muteParticipant:
            return []
        }
    }

    // MARK: Conversations

    func createConversation(_ create: Command.CreateConversation) async throws -> CommandResult {
        let others = Array(Set(create.participants.filter { $0 != create.creator })).sorted()
        if create.type == .direct {
            guard create.participants.count == 1, others.count == 1 else {
                throw DomainError(.badRequest, "A direct conversation has exactly one other participant.")
            }
        }
        let roles = try ConversationRules.initialRoles(type: create.type, change: create.roles)
        if !others.isEmpty {
            let known = Set(
                try await rows("SELECT uid FROM users WHERE app_id = \(create.appId) AND uid = ANY(\(others))")
                    .map { try $0.decode(String.self) }
            )
            if let missing = others.first(where: { !known.contains($0) }) { throw DomainError.uidNotFound(missing) }
        }
        if let directKey = create.directKey, let existing = try await directConversation(create.appId, directKey) {
            return existing
        }
        if create.type == .direct {
            try Safety.requireNoBlock(
                actor: create.creator, blockers: try await blockersBetween(create.appId, create.creator, others[0])
            )
        }
        // A direct conversation that another node creates at the same moment: ON CONFLICT waits for its commit,
        // then inserts nothing, and the existing one is returned as if it had been there all along.
        let metadata = try PostgresStore.json(create.metadata)
        let inserted = try await rows(
            """
            INSERT INTO conversations (id, app_id, type, direct_key, name, description, is_public, metadata,
                created_by, created_at, updated_at, last_seq, last_activity_at, participant_count, roles)
            VALUES (\(create.newId), \(create.appId), \(create.type.rawValue), \(create.directKey), \(create.name),
                \(create.description), \(create.type == .group && create.isPublic), \(metadata)::jsonb,
                \(create.creator), \(create.now), \(create.now), 0, \(create.now), 0, \(roles.storedJSON))
            ON CONFLICT (app_id, direct_key) DO NOTHING
            RETURNING \(unescaped: PostgresStore.conversationColumns())
            """
        )
        guard let insertedRow = inserted.first else {
            guard let directKey = create.directKey, let existing = try await directConversation(create.appId, directKey)
            else { throw DomainError(.internalError, "The conversation \(create.newId) could not be created.") }
            return existing
        }
        let row = try PostgresStore.conversationRow(insertedRow)
        var writer = EventBuffer(row: row, now: create.now, actor: create.creator)
        let creatorRole: ParticipantRole = create.type == .group ? .owner : .member
        let members = [(create.creator, creatorRole)] + others.map { ($0, ParticipantRole.member) }
        let participants = try await insertParticipants(members, row: row, now: create.now)
        var conversation = row.conversation
        conversation.participantCount = members.count
        conversation.lastSeq = Int64(1 + members.count)
        conversation.participants = participants
        try writer.append(.conversationCreate, .conversationCreated(conversation))
        // Its first members' streams start at the creation, so that a replay includes it.
        writer.joinSeq = writer.lastSeq
        for participant in participants { try writer.append(.participantAdded, .participantAdded(participant)) }
        try await writer.finish(participantCount: members.count, in: self)
        return CommandResult(
            outcome: .conversation(conversation, created: true), events: writer.events, recipients: members.map(\.0)
        )
    }

    /// The direct conversation of a pair, as the result of a create that found it.
    func directConversation(_ appId: String, _ directKey: String) async throws -> CommandResult? {
        guard
            let found = try await rows(
                """
                SELECT \(unescaped: PostgresStore.conversationColumns()) FROM conversations
                WHERE app_id = \(appId) AND direct_key = \(directKey)
                """
            ).first
        else { return nil }
        let row = try PostgresStore.conversationRow(found)
        var conversation = row.conversation
        conversation.participants = try await fetchParticipants(row.pk)
        return CommandResult(
            outcome: .conversation(conversation, created: false), events: [],
            recipients: try await participantUIDs(row.pk)
        )
    }

    func updateConversation(_ update: Command.UpdateConversation) async throws -> CommandResult {
        let (row, role) = try await participation(appId: update.appId, id: update.conversationId, uid: update.actor)
        try requireGroup(row, "A direct conversation has no details to change.")
        guard role.canUpdateConversation else {
            throw DomainError(.forbidden, "Only the owner or an admin can change the conversation.")
        }
        var conversation = row.conversation
        if let name = update.update.name { conversation.name = name }
        if let description = update.update.description { conversation.description = description }
        if let isPublic = update.update.isPublic { conversation.isPublic = isPublic }
        if let metadata = update.update.metadata { conversation.metadata = metadata }
        if let roles = update.update.roles {
            try ConversationRules.requireChangeRoles(role, type: row.conversation.type)
            conversation.roles = conversation.roles.applying(roles)
        }
        conversation.updatedAt = update.now
        let metadata = try PostgresStore.json(conversation.metadata)
        try await execute(
            """
            UPDATE conversations SET name = \(conversation.name), description = \(conversation.description),
                is_public = \(conversation.isPublic), metadata = \(metadata)::jsonb,
                roles = \(conversation.roles.storedJSON), updated_at = \(update.now)
            WHERE pk = \(row.pk)
            """
        )
        return try await publishConversation(
            conversation, .conversationUpdate, row: row, actor: update.actor, now: update.now)
    }

    func setDeleted(_ deleted: Bool, _ action: Command.ConversationAction) async throws -> CommandResult {
        guard let row = try await fetchConversation(appId: action.appId, id: action.conversationId),
            let role = try await role(row.pk, uid: action.actor)
        else { throw DomainError.conversationNotFound(action.conversationId) }
        // A deleted conversation is hidden from its participants, except from the owner who may restore it.
        if row.deletedAt != nil && !(role.canDeleteConversation && !deleted) {
            throw DomainError.conversationNotFound(action.conversationId)
        }
        try requireGroup(row, "A direct conversation cannot be deleted.")
        guard role.canDeleteConversation else {
            throw DomainError(.forbidden, "Only the owner can \(deleted ? "delete" : "restore") the conversation.")
        }
        guard (row.deletedAt != nil) != deleted else {
            return CommandResult(
                outcome: .conversation(row.conversation, created: false), events: [],
                recipients: try await participantUIDs(row.pk)
            )
        }
        var conversation = row.conversation
        conversation.deletedAt = deleted ? action.now : nil
        conversation.updatedAt = action.now
        try await execute(
            "UPDATE conversations SET deleted_at = \(conversation.deletedAt), updated_at = \(action.now) WHERE pk = \(row.pk)"
        )
        return try await publishConversation(
            conversation, deleted ? .conversationDelete : .conversationUndelete, row: row, actor: action.actor,
            now: action.now
        )
    }

    /// Appends one event carrying the conversation as it is now.
    func publishConversation(
        _ conversation: Conversation, _ name: EventName, row: ConversationRow, actor: String, now: Int64
    ) async throws -> CommandResult {
        var writer = EventBuffer(row: row, now: now, actor: actor)
        var published = conversation
        published.lastSeq = row.conversation.lastSeq + 1
        let payload: EventPayload
        switch name {
        case .conversationDelete: payload = .conversationDeleted(published)
        case .conversationUndelete: payload = .conversationUndeleted(published)
        default: payload = .conversationUpdated(published)
        }
        try writer.append(name, payload)
        try await writer.finish(participantCount: nil, in: self)
        return CommandResult(
            outcome: .conversation(published, created: false), events: writer.events,
            recipients: try await participantUIDs(row.pk)
        )
    }

    // MARK: Participants

    func join(_ action: Command.ConversationAction) async throws -> CommandResult {
        let (row, role) = try await visibleConversation(
            appId: action.appId, id: action.conversationId, viewer: action.actor)
        if role != nil {
            let participant = try await fetchParticipant(row.pk, uid: action.actor)!
            return CommandResult(
                outcome: .participant(participant), events: [], recipients: try await participantUIDs(row.pk)
            )
        }
        // Visible without being a participant means public: anyone in the app may join, but those banned from it.
        if let ban = try await activeBans(row: row, uids: [action.actor], now: action.now)[action.actor] {
            throw Safety.bannedRefusal(ban)
        }
        var writer = EventBuffer(row: row, now: action.now, actor: action.actor)
        let participant = try await insertParticipants([(action.actor, .member)], row: row, now: action.now)[0]
        try writer.append(.participantAdded, .participantAdded(participant))
        try await writer.finish(participantCount: row.conversation.participantCount + 1, in: self)
        return CommandResult(
            outcome: .participant(participant), events: writer.events, recipients: try await participantUIDs(row.pk)
        )
    }

    func addParticipants(_ add: Command.AddParticipants) async throws -> CommandResult {
        let (row, role) = try await participation(appId: add.appId, id: add.conversationId, uid: add.actor)
        try requireGroup(row, "A direct conversation keeps its two participants.")
        try ConversationRules.requireAdd(role, roles: row.conversation.roles)
        let uids = add.entries.map(\.uid)
        let known = Set(
            try await rows("SELECT uid FROM users WHERE app_id = \(add.appId) AND uid = ANY(\(uids))")
                .map { try $0.decode(String.self) }
        )
        let present = Set(try await participantUIDs(row.pk))
        let banned = try await activeBans(row: row, uids: uids, now: add.now)
        // Checked in the order given, as the SQLite store does: the first refusal wins.
        var seen = Set<String>()
        var newcomers: [(String, ParticipantRole)] = []
        for entry in add.entries where seen.insert(entry.uid).inserted {
            let newRole = entry.role ?? .member
            try ConversationRules.requireGrant(role, newRole)
            guard known.contains(entry.uid) else { throw DomainError.uidNotFound(entry.uid) }
            if let ban = banned[entry.uid] { throw Safety.bannedRefusal(ban, addedBy: true) }
            guard !present.contains(entry.uid) else { continue }
            newcomers.append((entry.uid, newRole))
        }
        var writer = EventBuffer(row: row, now: add.now, actor: add.actor)
        for participant in try await insertParticipants(newcomers, row: row, now: add.now) {
            try writer.append(.participantAdded, .participantAdded(participant))
        }
        try await writer.finish(participantCount: row.conversation.participantCount + newcomers.count, in: self)
        let participants = try await fetchParticipants(row.pk)
        return CommandResult(
            outcome: .participants(participants), events: writer.events, recipients: participants.map(\.uid)
        )
    }

    func updateParticipant(_ update: Command.UpdateParticipant) async throws -> CommandResult {
        let (row, role) = try await participation(appId: update.appId, id: update.conversationId, uid: update.actor)
        try requireGroup(row, "A direct conversation has no roles to change.")
        guard role.canChangeRoles else { throw DomainError(.forbidden, "Only the owner can change roles.") }
        guard var participant = try await fetchParticipant(row.pk, uid: update.uid) else {
            throw DomainError(.uidNotFound, "\(update.uid) is not a participant.")
        }
        guard participant.role != .owner, update.role != .owner else {
            throw DomainError(.forbidden, "The owner's role cannot be given or taken.")
        }
        let recipients = try await participantUIDs(row.pk)
        guard participant.role != update.role else {
            return CommandResult(outcome: .participant(participant), events: [], recipients: recipients)
        }
        participant.role = update.role
        try await execute(
            "UPDATE participants SET role = \(update.role.rawValue) WHERE conversation_pk = \(row.pk) AND uid = \(update.uid)"
        )
        var writer = EventBuffer(row: row, now: update.now, actor: update.actor)
        try writer.append(.participantUpdated, .participantUpdated(participant))
        try await writer.finish(participantCount: nil, in: self)
        return CommandResult(outcome: .participant(participant), events: writer.events, recipients: recipients)
    }

    func removeParticipant(_ remove: Command.RemoveParticipant) async throws -> CommandResult {
        let (row, role) = try await participation(appId: remove.appId, id: remove.conversationId, uid: remove.actor)
        try requireGroup(row, "A direct conversation keeps its two participants.")
        guard let removed = try await fetchParticipant(row.pk, uid: remove.uid) else {
            throw DomainError(.uidNotFound, "\(remove.uid) is not a participant.")
        }
        if remove.uid == remove.actor {
            guard role != .owner else {
                throw DomainError(.forbidden, "The owner cannot leave; delete the conversation instead.")
            }
        } else {
            try ConversationRules.requireRemove(role, removed.role, roles: row.conversation.roles)
        }
        try await deleteParticipant(row: row, uid: remove.uid)
        var writer = EventBuffer(row: row, now: remove.now, actor: remove.actor)
        try writer.append(.participantRemoved, .participantRemoved(removed))
        try await writer.finish(participantCount: row.conversation.participantCount - 1, in: self)
        let remaining = try await participantUIDs(row.pk)
        return CommandResult(
            outcome: .removed, events: writer.events, recipients: remaining + [remove.uid], participants: remaining
        )
    }

    /// Deletes a participant who leaves, is removed or is banned, with their unread mentions of the conversation (no
    /// longer theirs to read).
    func deleteParticipant(row: ConversationRow, uid: String) async throws {
        try await execute("DELETE FROM participants WHERE conversation_pk = \(row.pk) AND uid = \(uid)")
        try await execute(
            "DELETE FROM mentions WHERE app_id = \(row.appId) AND uid = \(uid) AND conversation_pk = \(row.pk)"
        )
    }

    /// Adds participants who start with everything so far delivered and read.
    func insertParticipants(_ members: [(String, ParticipantRole)], row: ConversationRow, now: Int64) async throws
        -> [Participant]
    {
        guard !members.isEmpty else { return [] }
        let seen = row.conversation.lastSeq
        try await execute(
            """
            INSERT INTO participants (conversation_pk, uid, role, joined_at, delivered_seq, read_seq, read_message_count)
            SELECT \(row.pk), m.uid, m.role, \(now), \(seen), \(seen), c.message_count
            FROM unnest(\(members.map(\.0)), \(members.map(\.1.rawValue))) WITH ORDINALITY AS m(uid, role, position)
            JOIN conversations c ON c.pk = \(row.pk)
            ORDER BY m.position
            """
        )
        return members.map { Participant(uid: $0.0, role: $0.1, joinedAt: now, deliveredSeq: seen, readSeq: seen) }
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
            guard let row = conversations[send.conversationId], row.appId == send.appId, row.deletedAt == nil else {
                results.append(.failure(.conversationNotFound(send.conversationId)))
                continue
            }
            guard let role = memberRoles[row.pk]?[send.sender] else {
                results.append(
                    .failure(
                        row.conversation.isPublic
                            ? DomainError(.notAParticipant, "Join the conversation first.")
                            : .conversationNotFound(send.conversationId)
                    )
                )
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
            var parent: Message?
            var parts = send.parts
            let files = Attachments.ids(in: parts)
            do {
                try ConversationRules.requireSend(role, roles: row.conversation.roles)
                if let until = mutes[row.pk]?[send.sender], until.map({ $0 > send.now }) ?? true {
                    throw Safety.mutedRefusal(until: until)
                }
                if row.conversation.type == .direct {
                    try Safety.requireNoBlock(actor: send.sender, blockers: directBlockers[row.pk] ?? [])
                }
                if let replyTo = send.replyTo {
                    parent = parents[MessageKey(conversationPK: row.pk, messageId: replyTo)]
                    try MessageLifecycle.requireReplyTarget(parent, id: replyTo)
                }
                if !files.isEmpty {
                    parts = try Attachments.resolve(
                        parts, records: uploads, appId: row.appId, conversationId: row.conversation.id,
                        actor: send.sender, taken: takenIds
                    )
                }
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
            position.lastSeq += 1
            position.messageCount += 1
            position.lastActivityAt = send.now
            positions[row.pk] = position
            let roles = memberRoles[row.pk] ?? [:]
            let message = Message(
                id: send.messageId, conversationId: row.conversation.id, seq: position.lastSeq, sender: send.sender,
                clientMessageId: send.clientMessageId, parts: parts, metadata: send.metadata, alert: send.alert,
                sentAt: send.now, replyTo: send.replyTo,
                mentions: MessageLifecycle.keptMentions(send.mentions, sender: send.sender) { roles[$0] != nil }
            )
            if !files.isEmpty {
                taken.append((files, message.id))
                takenIds.formUnion(files)
            }
            parents[MessageKey(conversationPK: row.pk, messageId: message.id)] = message
            let event = Event(
                id: Event.durableID(conversationId: row.conversation.id, seq: message.seq), appId: row.appId,
                name: .messageSent, conversationId: row.conversation.id, seq: message.seq, timestamp: send.now,
                context: EventContext(createdBy: send.sender), payload: .messageSent(message)
            )
            let json = try WireJSON.encode(event)
            inserts.append(
                conversationPK: row.pk, seq: message.seq, name: .messageSent, actor: send.sender, createdAt: send.now,
                clientMessageId: send.clientMessageId, messageIndex: position.messageCount, messageId: message.id,
                threadSeq: parent?.seq, body: json
            )
            for uid in message.mentions ?? [] {
                mentions.append((row.appId, uid, row.pk, message.seq, message.sentAt))
            }
            // Writing a message implies having read the conversation up to it.
            readers[ReaderKey(conversationPK: row.pk, uid: send.sender)] = (message.seq, position.messageCount)
            if send.queuesPush { outbox.append((row.appId, row.pk, message.seq, send.now)) }
            if let key { sent[key] = message }
            results.append(
                .success(
                    CommandResult(
                        outcome: .message(message, duplicate: false),
                        events: [StoredEvent(event: event, json: json)], recipients: recipients
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
                FROM unnest($12::bigint[], $13::bigint[], $14::bigint[], $15::bigint[])
                    AS u(pk, last_seq, message_count, last_activity_at)
                -- ANY lets the rows be found by key, not by a scan of the table hashed against the list.
                WHERE c.pk = u.pk AND c.pk = ANY($12::bigint[])
                RETURNING 1
            ), readers AS (
                UPDATE participants p SET delivered_seq = u.seq, read_seq = u.seq, read_message_count = u.message_index
                FROM unnest($16::text[], $17::bigint[], $18::bigint[], $19::bigint[]) AS u(uid, pk, seq, message_index)
                WHERE p.conversation_pk = u.pk AND p.uid = u.uid AND p.conversation_pk = ANY($17::bigint[])
                RETURNING 1
            )
            SELECT (SELECT count(*) FROM new_events), (SELECT count(*) FROM new_positions), (SELECT count(*) FROM readers)
            """
    }

    struct ReaderKey: Hashable {
        var conversationPK: Int64
        var uid: String
    }

    func markReceipt(_ mark: Command.MarkReceipt) async throws -> CommandResult {
        let (row, _) = try await participation(appId: mark.appId, id: mark.conversationId, uid: mark.uid)
        var participant = try await fetchParticipant(row.pk, uid: mark.uid)!
        let last = row.conversation.lastSeq
        let read = max(participant.readSeq, min(mark.readSeq ?? 0, last))
        let delivered = max(participant.deliveredSeq, min(mark.deliveredSeq ?? 0, last), read)
        var events: [StoredEvent] = []
        func ephemeral(_ name: EventName, _ payload: EventPayload, seq: Int64) throws {
            let event = Event(
                id: "\(row.conversation.id):\(name == .messageRead ? "read" : "delivered"):\(mark.uid):\(seq)",
                appId: mark.appId, name: name, conversationId: row.conversation.id, timestamp: mark.now,
                context: EventContext(createdBy: mark.uid), payload: payload
            )
            events.append(StoredEvent(event: event, json: try WireJSON.encode(event)))
        }
        /// The receipt names the newest message it reaches.
        func receipt(_ seq: Int64) async throws -> Receipt {
            let newest = try await rows(
                """
                SELECT message_id, created_at FROM events WHERE conversation_pk = \(row.pk) AND seq <= \(seq)
                AND message_index IS NOT NULL ORDER BY seq DESC LIMIT 1
                """
            ).first.map { try $0.decode((String?, Int64).self) }
            return Receipt(uid: mark.uid, seq: seq, messageId: newest?.0, timestamp: newest?.1)
        }
        if delivered > participant.deliveredSeq {
            try ephemeral(.messageDelivered, .messageDelivered(try await receipt(delivered)), seq: delivered)
        }
        if read > participant.readSeq {
            try ephemeral(.messageRead, .messageRead(try await receipt(read)), seq: read)
            // Mentions read are no longer unread.
            try await execute(
                """
                DELETE FROM mentions WHERE app_id = \(row.appId) AND uid = \(mark.uid) AND conversation_pk = \(row.pk)
                AND seq <= \(read)
                """
            )
        }
        if !events.isEmpty {
            try await execute(
                """
                UPDATE participants SET delivered_seq = \(delivered), read_seq = \(read), read_message_count = COALESCE(
                    (SELECT message_index FROM events WHERE conversation_pk = \(row.pk) AND seq <= \(read)
                     AND message_index IS NOT NULL ORDER BY seq DESC LIMIT 1), 0)
                WHERE conversation_pk = \(row.pk) AND uid = \(mark.uid)
                """
            )
            participant.deliveredSeq = delivered
            participant.readSeq = read
        }
        return CommandResult(
            outcome: .participant(participant), events: events, recipients: try await participantUIDs(row.pk)
        )
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

    func role(_ conversationPK: Int64, uid: String) async throws -> ParticipantRole? {
        try await rows("SELECT role FROM participants WHERE conversation_pk = \(conversationPK) AND uid = \(uid)")
            .first.flatMap { ParticipantRole(rawValue: try $0.decode(String.self)) }
    }

    /// The conversation and the viewer's role, or `ERR_CONVERSATION_NOT_FOUND` when the viewer may not see it:
    /// deleted, of another app, or private and the viewer is not a participant.
    func visibleConversation(appId: String, id: String, viewer: String) async throws -> (
        ConversationRow, ParticipantRole?
    ) {
        guard let row = try await fetchConversation(appId: appId, id: id), row.deletedAt == nil else {
            throw DomainError.conversationNotFound(id)
        }
        let role = try await self.role(row.pk, uid: viewer)
        guard role != nil || row.conversation.isPublic else { throw DomainError.conversationNotFound(id) }
        return (row, role)
    }

    /// A visible conversation `uid` participates in; `ERR_NOT_A_PARTICIPANT` for a public one they are not in.
    func participation(appId: String, id: String, uid: String) async throws -> (ConversationRow, ParticipantRole) {
        let (row, role) = try await visibleConversation(appId: appId, id: id, viewer: uid)
        guard let role else { throw DomainError(.notAParticipant, "Join the conversation first.") }
        return (row, role)
    }

    /// The conversation `actor` acts on, as a participant (with their role); with no actor, the app's server, on any
    /// conversation of the app that is not deleted (no role).
    func acting(appId: String, id: String, actor: String?) async throws -> (ConversationRow, ParticipantRole?) {
        if let actor { return try await participation(appId: appId, id: id, uid: actor) }
        guard let row = try await fetchConversation(appId: appId, id: id), row.deletedAt == nil else {
            throw DomainError.conversationNotFound(id)
        }
        return (row, nil)
    }

    func requireGroup(_ row: ConversationRow, _ message: String) throws {
        guard row.conversation.type == .group else { throw DomainError(.forbidden, message) }
    }
}

/// A command's durable events, numbered from the conversation's `last_seq` (read under its lock) and written together
/// when the command finishes, with the membership changes they record and the conversation's new position.
struct EventBuffer {
    let appId: String
    let conversationId: String
    let conversationPK: Int64
    var lastSeq: Int64
    let now: Int64
    /// Who acts; nil for the app's own server.
    let actor: String?
    private(set) var events: [StoredEvent] = []
    private var columns = EventColumns()
    /// Joins and departures, for the users' own streams.
    private var memberships: [(uid: String, joined: Bool, seq: Int64)] = []
    /// The sequence number recorded for joins in the members' streams; nil for the participantAdded event itself.
    var joinSeq: Int64?

    init(row: ConversationRow, now: Int64, actor: String?) {
        self.appId = row.appId
        self.conversationId = row.conversation.id
        self.conversationPK = row.pk
        self.lastSeq = row.conversation.lastSeq
        self.now = now
        self.actor = actor
    }

    mutating func append(_ name: EventName, _ payload: EventPayload) throws {
        lastSeq += 1
        let event = Event(
            id: Event.durableID(conversationId: conversationId, seq: lastSeq), appId: appId, name: name,
            conversationId: conversationId, seq: lastSeq, timestamp: now, context: EventContext(createdBy: actor),
            payload: payload
        )
        let json = try WireJSON.encode(event)
        // An edit's or a deletion's event is found with the message's others, to be rewritten by a later change.
        let messageId: String?
        switch payload {
        case .messageUpdated(let message), .messageDeleted(let message): messageId = message.id
        default: messageId = nil
        }
        columns.append(
            conversationPK: conversationPK, seq: lastSeq, name: name, actor: actor ?? "", createdAt: now,
            clientMessageId: nil, messageIndex: nil, messageId: messageId, threadSeq: nil, body: json
        )
        events.append(StoredEvent(event: event, json: json))
        switch payload {
        case .participantAdded(let participant): memberships.append((participant.uid, true, joinSeq ?? lastSeq))
        case .participantRemoved(let participant): memberships.append((participant.uid, false, lastSeq))
        default: break
        }
    }

    /// Writes the events, extends the users' streams, and records the conversation's new last sequence number (and
    /// participant count, when it changed); with `activity`, its last activity too (a change of an existing message
    /// does not move it up the lists).
    func finish(participantCount: Int?, activity: Bool = true, in transaction: BatchTransaction) async throws {
        if !columns.isEmpty {
            try await transaction.execute(
                PostgresQuery(unsafeSQL: EventColumns.insertSQL(binds: EventColumns.binds(from: 1)) + " RETURNING 1")
                    .withBinds { columns.bind(into: &$0) }
            )
        }
        if !memberships.isEmpty {
            // Each user's next position, under the user's row lock (taken in order by the batch): the UPDATE bumps
            // last_user_seq, and the change is recorded at that position. A command changes a user at most once.
            var positions: [String: Int64] = [:]
            for row in try await transaction.rows(
                """
                UPDATE users SET last_user_seq = last_user_seq + 1
                WHERE app_id = \(appId) AND uid = ANY(\(memberships.map(\.uid)))
                RETURNING uid, last_user_seq
                """
            ) {
                let (uid, position) = try row.decode((String, Int64).self)
                positions[uid] = position
            }
            if let missing = memberships.first(where: { positions[$0.uid] == nil }) {
                throw DomainError.uidNotFound(missing.uid)
            }
            try await transaction.execute(
                """
                INSERT INTO memberships (app_id, uid, user_seq, conversation_pk, joined, seq)
                SELECT \(appId), uid, user_seq, \(conversationPK), joined, seq
                FROM unnest(\(memberships.map(\.uid)), \(memberships.map { positions[$0.uid]! }), \(memberships.map(\.joined)),
                    \(memberships.map(\.seq))) AS m(uid, user_seq, joined, seq)
                """
            )
        }
        try await transaction.execute(
            """
            UPDATE conversations SET last_seq = \(lastSeq),
                last_activity_at = CASE WHEN \(activity) THEN \(now) ELSE last_activity_at END,
                participant_count = COALESCE(\(participantCount.map { Int64($0) })::bigint, participant_count)
            WHERE pk = \(conversationPK)
            """
        )
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

    var isEmpty: Bool { seqs.isEmpty }

    mutating func append(
        conversationPK: Int64, seq: Int64, name: EventName, actor: String, createdAt: Int64, clientMessageId: String?,
        messageIndex: Int64?, messageId: String?, threadSeq: Int64?, body: [UInt8]
    ) {
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
    }

    /// The parameter numbers of the eleven arrays, from `first` on.
    static func binds(from first: Int) -> [Int] { Array(first..<first + 11) }

    /// The INSERT, reading its eleven arrays from the given parameter numbers.
    static func insertSQL(binds p: [Int]) -> String {
        """
        INSERT INTO events (conversation_pk, seq, name, actor, created_at, client_message_id, message_index, message_id,
            thread_seq, body)
        SELECT pk, seq, name, NULLIF(actor, ''), created_at, CASE WHEN has_client_message_id THEN client_message_id END,
            NULLIF(message_index, 0), NULLIF(message_id, ''), NULLIF(thread_seq, 0), body
        FROM unnest($\(p[0])::bigint[], $\(p[1])::bigint[], $\(p[2])::text[], $\(p[3])::text[], $\(p[4])::bigint[],
            $\(p[5])::boolean[], $\(p[6])::text[], $\(p[7])::bigint[], $\(p[8])::text[], $\(p[9])::bigint[],
            $\(p[10])::bytea[])
            AS e(pk, seq, name, actor, created_at, has_client_message_id, client_message_id, message_index, message_id,
                thread_seq, body)
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
