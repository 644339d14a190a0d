import Foundation
import GRDB
import ParleyProtocol
import ParleyStore

extension SQLiteStore: UnreadWithBatch, SynchronousBatches {
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
    ) async throws -> (results: [Result<CommandResult, DomainError>], unread: [(UnreadRequest, UnreadSummary)]) {
        try await pool.writeWithoutTransaction { [writerMemory] db in
            try Self.writeBatch(db, memory: writerMemory) { sends in
                try Self.applyBatch(commands, in: db, sends: &sends, readingUnread: wanted)
            }
        }
    }

    public func applySynchronously(
        _ commands: [Command], readingUnread wanted: ([Result<CommandResult, DomainError>]) -> [UnreadRequest]
    ) throws -> (results: [Result<CommandResult, DomainError>], unread: [(UnreadRequest, UnreadSummary)]) {
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
    ) throws -> (results: [Result<CommandResult, DomainError>], unread: [(UnreadRequest, UnreadSummary)]) {
        let results = try applyBatch(commands, in: db, sends: &sends)
        // Counts in the conversations the sends read are known without a read (``SendBatch/unread(_:)``). A count that
        // cannot be read is left out: the batch is stored all the same, and the publication then records its user's
        // change like any other, to be pushed when the user's interval ends.
        let unread = wanted(results).compactMap { request in
            (sends.unread(request) ?? (try? fetchUnread(db, request)))
                .map { (request, $0) }
        }
        return (results, unread)
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
        }
        try sends.flush(db)
        return results
    }

    static func apply(_ command: Command, in db: Database) throws -> CommandResult {
        switch command {
        case .createConversation(let create): return try createConversation(create, in: db)
        case .updateConversation(let update): return try updateConversation(update, in: db)
        case .deleteConversation(let action): return try setDeleted(true, action, in: db)
        case .undeleteConversation(let action): return try setDeleted(false, action, in: db)
        case .join(let action): return try join(action, in: db)
        case .addParticipants(let add): return try addParticipants(add, in: db)
        case .updateParticipant(let update): return try updateParticipant(update, in: db)
        case .removeParticipant(let remove): return try removeParticipant(remove, in: db)
        case .sendMessage(let send):
            var sends = SendBatch()
            let result = try sends.send(send, in: db)
            try sends.flush(db)
            return try result.get()
        case .markReceipt(let mark): return try markReceipt(mark, in: db)
        case .editMessage(let edit): return try editMessage(edit, in: db)
        case .deleteMessage(let action): return try deleteMessage(action, in: db)
        case .react(let react): return try self.react(react, in: db)
        case .muteParticipant(let mute): return try muteParticipant(mute, in: db)
        case .banParticipant(let ban): return try banParticipant(ban, in: db)
        }
    }

    // MARK: Conversations

    static func createConversation(_ create: Command.CreateConversation, in db: Database) throws
        -> CommandResult
    {
        let others = Array(Set(create.participants.filter { $0 != create.creator })).sorted()
        if create.type == .direct {
            guard create.participants.count == 1, others.count == 1 else {
                throw DomainError(.badRequest, "A direct conversation has exactly one other participant.")
            }
        }
        let roles = try ConversationRules.initialRoles(type: create.type, change: create.roles)
        for uid in others where try fetchUser(db, appId: create.appId, uid: uid) == nil {
            throw DomainError.uidNotFound(uid)
        }
        if let directKey = create.directKey,
            let existing = try Row.fetchOne(
                db, sql: "SELECT * FROM conversations WHERE app_id = ? AND direct_key = ?",
                arguments: [create.appId, directKey]
            )
        {
            let row = try conversationRow(existing)
            var conversation = row.conversation
            conversation.participants = try fetchParticipants(db, conversationPK: row.pk)
            return CommandResult(
                outcome: .conversation(conversation, created: false), events: [],
                recipients: try participantUIDs(db, conversationPK: row.pk)
            )
        }
        if create.type == .direct {
            try Safety.requireNoBlock(
                actor: create.creator,
                blockers: try blockersBetween(db, appId: create.appId, create.creator, others[0])
            )
        }
        try db.execute(
            sql: """
                INSERT INTO conversations (id, app_id, type, direct_key, name, description, is_public, metadata,
                    created_by, created_at, updated_at, last_seq, last_activity_at, participant_count, roles)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, 0, ?)
                """,
            arguments: [
                create.newId, create.appId, create.type.rawValue, create.directKey, create.name, create.description,
                create.type == .group && create.isPublic, try json(create.metadata), create.creator, create.now,
                create.now, create.now, roles.storedJSON,
            ]
        )
        let row = try fetchConversation(db, appId: create.appId, id: create.newId)!
        var writer = EventWriter(db: db, row: row, now: create.now, actor: create.creator)
        let creatorRole: ParticipantRole = create.type == .group ? .owner : .member
        let members = [(create.creator, creatorRole)] + others.map { ($0, ParticipantRole.member) }
        var participants: [Participant] = []
        for (uid, role) in members {
            participants.append(try insertParticipant(db, row: row, uid: uid, role: role, now: create.now))
        }
        var conversation = row.conversation
        conversation.participantCount = members.count
        conversation.lastSeq = Int64(1 + members.count)
        conversation.participants = participants
        try writer.append(.conversationCreate, .conversationCreated(conversation))
        // Its first members' streams start at the creation, so that a replay includes it.
        writer.joinSeq = writer.lastSeq
        for participant in participants { try writer.append(.participantAdded, .participantAdded(participant)) }
        try writer.finish(participantCount: members.count)
        return CommandResult(
            outcome: .conversation(conversation, created: true), events: writer.events, recipients: members.map(\.0)
        )
    }

    static func updateConversation(_ update: Command.UpdateConversation, in db: Database) throws
        -> CommandResult
    {
        let (row, role) = try participation(db, appId: update.appId, id: update.conversationId, uid: update.actor)
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
        try db.execute(
            sql: """
                UPDATE conversations SET name = ?, description = ?, is_public = ?, metadata = ?, roles = ?, updated_at = ?
                WHERE pk = ?
                """,
            arguments: [
                conversation.name, conversation.description, conversation.isPublic, try json(conversation.metadata),
                conversation.roles.storedJSON, update.now, row.pk,
            ]
        )
        return try publishConversation(
            conversation, .conversationUpdate, row: row, actor: update.actor, now: update.now, in: db)
    }

    static func setDeleted(_ deleted: Bool, _ action: Command.ConversationAction, in db: Database)
        throws -> CommandResult
    {
        guard let row = try fetchConversation(db, appId: action.appId, id: action.conversationId),
            let role = try self.role(db, conversationPK: row.pk, uid: action.actor)
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
                recipients: try participantUIDs(db, conversationPK: row.pk)
            )
        }
        var conversation = row.conversation
        conversation.deletedAt = deleted ? action.now : nil
        conversation.updatedAt = action.now
        try db.execute(
            sql: "UPDATE conversations SET deleted_at = ?, updated_at = ? WHERE pk = ?",
            arguments: [conversation.deletedAt, action.now, row.pk]
        )
        return try publishConversation(
            conversation, deleted ? .conversationDelete : .conversationUndelete, row: row, actor: action.actor,
            now: action.now, in: db
        )
    }

    /// Appends one event carrying the conversation as it is now.
    private static func publishConversation(
        _ conversation: Conversation, _ name: EventName, row: ConversationRow, actor: String, now: Int64,
        in db: Database
    ) throws -> CommandResult {
        var writer = EventWriter(db: db, row: row, now: now, actor: actor)
        var published = conversation
        published.lastSeq = row.conversation.lastSeq + 1
        let payload: EventPayload
        switch name {
        case .conversationDelete: payload = .conversationDeleted(published)
        case .conversationUndelete: payload = .conversationUndeleted(published)
        default: payload = .conversationUpdated(published)
        }
        try writer.append(name, payload)
        try writer.finish(participantCount: nil)
        return CommandResult(
            outcome: .conversation(published, created: false), events: writer.events,
            recipients: try participantUIDs(db, conversationPK: row.pk)
        )
    }

    // MARK: Participants

    static func join(_ action: Command.ConversationAction, in db: Database) throws
        -> CommandResult
    {
        let (row, role) = try visibleConversation(
            db, appId: action.appId, id: action.conversationId, viewer: action.actor)
        if role != nil {
            let participant = try fetchParticipant(db, conversationPK: row.pk, uid: action.actor)!
            return CommandResult(
                outcome: .participant(participant), events: [],
                recipients: try participantUIDs(db, conversationPK: row.pk)
            )
        }
        // Visible without being a participant means public: anyone in the app may join, but those banned from it.
        if let ban = try activeBan(db, row: row, uid: action.actor, now: action.now) {
            throw Safety.bannedRefusal(ban)
        }
        var writer = EventWriter(db: db, row: row, now: action.now, actor: action.actor)
        let participant = try insertParticipant(db, row: row, uid: action.actor, role: .member, now: action.now)
        try writer.append(.participantAdded, .participantAdded(participant))
        try writer.finish(participantCount: row.conversation.participantCount + 1)
        return CommandResult(
            outcome: .participant(participant), events: writer.events,
            recipients: try participantUIDs(db, conversationPK: row.pk)
        )
    }

    static func addParticipants(_ add: Command.AddParticipants, in db: Database) throws
        -> CommandResult
    {
        let (row, role) = try participation(db, appId: add.appId, id: add.conversationId, uid: add.actor)
        try requireGroup(row, "A direct conversation keeps its two participants.")
        try ConversationRules.requireAdd(role, roles: row.conversation.roles)
        var writer = EventWriter(db: db, row: row, now: add.now, actor: add.actor)
        var count = row.conversation.participantCount
        var seen = Set<String>()
        // Read for all the entries at once (a thousand members: three queries, not three thousand), then checked in the
        // entries' order, so the first entry at fault is the one named.
        let uids = Array(Set(add.entries.map(\.uid)))
        let users = try existingUsers(db, appId: add.appId, uids: uids)
        let bans = try activeBans(db, row: row, uids: uids, now: add.now)
        let members = try participatingUIDs(db, conversationPK: row.pk, uids: uids)
        for entry in add.entries where seen.insert(entry.uid).inserted {
            let newRole = entry.role ?? .member
            try ConversationRules.requireGrant(role, newRole)
            guard users.contains(entry.uid) else { throw DomainError.uidNotFound(entry.uid) }
            if let ban = bans[entry.uid] { throw Safety.bannedRefusal(ban, addedBy: true) }
            guard !members.contains(entry.uid) else { continue }
            let participant = try insertParticipant(db, row: row, uid: entry.uid, role: newRole, now: add.now)
            count += 1
            try writer.append(.participantAdded, .participantAdded(participant))
        }
        try writer.finish(participantCount: count)
        let participants = try fetchParticipants(db, conversationPK: row.pk)
        return CommandResult(
            outcome: .participants(participants), events: writer.events, recipients: participants.map(\.uid)
        )
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

    /// Which of `uids` take part in the conversation.
    static func participatingUIDs(_ db: Database, conversationPK: Int64, uids: [String]) throws -> Set<String> {
        Set(
            try inChunks(uids) { chunk, marks in
                try String.fetchAll(
                    db, sql: "SELECT uid FROM participants WHERE conversation_pk = ? AND uid IN (\(marks))",
                    arguments: StatementArguments([conversationPK.databaseValue] + chunk.map(\.databaseValue))
                )
            }.joined())
    }

    static func updateParticipant(_ update: Command.UpdateParticipant, in db: Database) throws
        -> CommandResult
    {
        let (row, role) = try participation(db, appId: update.appId, id: update.conversationId, uid: update.actor)
        try requireGroup(row, "A direct conversation has no roles to change.")
        guard role.canChangeRoles else { throw DomainError(.forbidden, "Only the owner can change roles.") }
        guard var participant = try fetchParticipant(db, conversationPK: row.pk, uid: update.uid) else {
            throw DomainError(.uidNotFound, "\(update.uid) is not a participant.")
        }
        guard participant.role != .owner, update.role != .owner else {
            throw DomainError(.forbidden, "The owner's role cannot be given or taken.")
        }
        let recipients = try participantUIDs(db, conversationPK: row.pk)
        guard participant.role != update.role else {
            return CommandResult(outcome: .participant(participant), events: [], recipients: recipients)
        }
        participant.role = update.role
        try db.execute(
            sql: "UPDATE participants SET role = ? WHERE conversation_pk = ? AND uid = ?",
            arguments: [update.role.rawValue, row.pk, update.uid]
        )
        var writer = EventWriter(db: db, row: row, now: update.now, actor: update.actor)
        try writer.append(.participantUpdated, .participantUpdated(participant))
        try writer.finish(participantCount: nil)
        return CommandResult(outcome: .participant(participant), events: writer.events, recipients: recipients)
    }

    static func removeParticipant(_ remove: Command.RemoveParticipant, in db: Database) throws
        -> CommandResult
    {
        let (row, role) = try participation(db, appId: remove.appId, id: remove.conversationId, uid: remove.actor)
        try requireGroup(row, "A direct conversation keeps its two participants.")
        guard let removed = try fetchParticipant(db, conversationPK: row.pk, uid: remove.uid) else {
            throw DomainError(.uidNotFound, "\(remove.uid) is not a participant.")
        }
        if remove.uid == remove.actor {
            guard role != .owner else {
                throw DomainError(.forbidden, "The owner cannot leave; delete the conversation instead.")
            }
        } else {
            try ConversationRules.requireRemove(role, removed.role, roles: row.conversation.roles)
        }
        try deleteParticipant(db, row: row, uid: remove.uid)
        var writer = EventWriter(db: db, row: row, now: remove.now, actor: remove.actor)
        try writer.append(.participantRemoved, .participantRemoved(removed))
        try writer.finish(participantCount: row.conversation.participantCount - 1)
        let remaining = try participantUIDs(db, conversationPK: row.pk)
        return CommandResult(
            outcome: .removed, events: writer.events, recipients: remaining + [remove.uid], participants: remaining
        )
    }

    /// Deletes a participant who leaves, is removed or is banned, with their unread mentions of the conversation (no
    /// longer theirs to read).
    static func deleteParticipant(_ db: Database, row: ConversationRow, uid: String) throws {
        try db.execute(sql: "DELETE FROM participants WHERE conversation_pk = ? AND uid = ?", arguments: [row.pk, uid])
        try db.execute(
            sql: "DELETE FROM mentions WHERE app_id = ? AND uid = ? AND conversation_pk = ?",
            arguments: [row.appId, uid, row.pk]
        )
    }

    /// Adds a participant who starts with everything so far delivered and read.
    static func insertParticipant(_ db: Database, row: ConversationRow, uid: String, role: ParticipantRole, now: Int64)
        throws -> Participant
    {
        let seen = row.conversation.lastSeq
        // Cached: adding a thousand members runs it a thousand times in one transaction.
        try db.cachedStatement(
            sql: """
                INSERT INTO participants (conversation_pk, uid, role, joined_at, delivered_seq, read_seq, read_message_count)
                VALUES (?, ?, ?, ?, ?, ?, (SELECT message_count FROM conversations WHERE pk = ?))
                """
        ).execute(arguments: [row.pk, uid, role.rawValue, now, seen, seen, row.pk])
        return Participant(uid: uid, role: role, joinedAt: now, deliveredSeq: seen, readSeq: seen)
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

    // MARK: Messages and receipts

    static func markReceipt(_ mark: Command.MarkReceipt, in db: Database) throws -> CommandResult {
        let (row, _) = try participation(db, appId: mark.appId, id: mark.conversationId, uid: mark.uid)
        var participant = try fetchParticipant(db, conversationPK: row.pk, uid: mark.uid)!
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
        func receipt(_ seq: Int64) throws -> Receipt {
            let newest = try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT message_id, created_at FROM events WHERE conversation_pk = ? AND seq <= ?
                        AND message_index IS NOT NULL ORDER BY seq DESC LIMIT 1
                        """
                ),
                arguments: [row.pk, seq]
            )
            return Receipt(uid: mark.uid, seq: seq, messageId: newest?[0], timestamp: newest?[1])
        }
        if delivered > participant.deliveredSeq {
            try ephemeral(.messageDelivered, .messageDelivered(try receipt(delivered)), seq: delivered)
        }
        if read > participant.readSeq {
            try ephemeral(.messageRead, .messageRead(try receipt(read)), seq: read)
        }
        if !events.isEmpty {
            try db.execute(
                sql: """
                    UPDATE participants SET delivered_seq = ?, read_seq = ?, read_message_count = COALESCE(
                        (SELECT message_index FROM events WHERE conversation_pk = ? AND seq <= ?
                         AND message_index IS NOT NULL ORDER BY seq DESC LIMIT 1), 0)
                    WHERE conversation_pk = ? AND uid = ?
                    """,
                arguments: [delivered, read, row.pk, read, row.pk, mark.uid]
            )
            if read > participant.readSeq {
                // Mentions read are no longer unread.
                try db.cachedStatement(
                    sql: "DELETE FROM mentions WHERE app_id = ? AND uid = ? AND conversation_pk = ? AND seq <= ?"
                ).execute(arguments: [row.appId, mark.uid, row.pk, read])
            }
            participant.deliveredSeq = delivered
            participant.readSeq = read
        }
        return CommandResult(
            outcome: .participant(participant), events: events,
            recipients: try participantUIDs(db, conversationPK: row.pk)
        )
    }

    // MARK: Rules

    /// The conversation and the viewer's role, or `ERR_CONVERSATION_NOT_FOUND` when the viewer may not see it:
    /// deleted, of another app, or private and the viewer is not a participant.
    static func visibleConversation(_ db: Database, appId: String, id: String, viewer: String) throws -> (
        ConversationRow, ParticipantRole?
    ) {
        guard let row = try fetchConversation(db, appId: appId, id: id), row.deletedAt == nil else {
            throw DomainError.conversationNotFound(id)
        }
        let role = try Self.role(db, conversationPK: row.pk, uid: viewer)
        guard role != nil || row.conversation.isPublic else { throw DomainError.conversationNotFound(id) }
        return (row, role)
    }

    /// A visible conversation `uid` participates in; `ERR_NOT_A_PARTICIPANT` for a public one they are not in.
    static func participation(_ db: Database, appId: String, id: String, uid: String) throws -> (
        ConversationRow, ParticipantRole
    ) {
        let (row, role) = try visibleConversation(db, appId: appId, id: id, viewer: uid)
        guard let role else { throw DomainError(.notAParticipant, "Join the conversation first.") }
        return (row, role)
    }

    /// The conversation `actor` acts on, as a participant (with their role); with no actor, the app's server, on any
    /// conversation of the app that is not deleted (no role).
    static func acting(_ db: Database, appId: String, id: String, actor: String?) throws -> (
        ConversationRow, ParticipantRole?
    ) {
        if let actor { return try participation(db, appId: appId, id: id, uid: actor) }
        guard let row = try fetchConversation(db, appId: appId, id: id), row.deletedAt == nil else {
            throw DomainError.conversationNotFound(id)
        }
        return (row, nil)
    }

    static func requireGroup(_ row: ConversationRow, _ message: String) throws {
        guard row.conversation.type == .group else { throw DomainError(.forbidden, message) }
    }
}

/// Appends a conversation's durable events other than messages (see ``SendBatch``), each with the next sequence
/// number, and keeps the conversation row in step.
struct EventWriter {
    let db: Database
    let appId: String
    let conversationId: String
    let conversationPK: Int64
    var lastSeq: Int64
    let now: Int64
    let actor: String?
    /// The sequence number recorded for joins in the members' streams; nil for the participantAdded event itself.
    var joinSeq: Int64?
    private(set) var events: [StoredEvent] = []

    init(db: Database, row: ConversationRow, now: Int64, actor: String?) {
        self.db = db
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
        try db.cachedStatement(
            sql: """
                INSERT INTO events (conversation_pk, seq, name, actor, created_at, message_id, body)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(arguments: [conversationPK, lastSeq, name.rawValue, actor, now, messageId, Data(json)])
        events.append(StoredEvent(event: event, json: json))
        switch payload {
        case .participantAdded(let participant): try recordMembership(of: participant.uid, joined: true)
        case .participantRemoved(let participant): try recordMembership(of: participant.uid, joined: false)
        default: break
        }
    }

    /// Appends the change to the user's own stream, at the user's next position.
    private func recordMembership(of uid: String, joined: Bool) throws {
        guard
            let userSeq = try Int64.fetchOne(
                db.cachedStatement(
                    sql:
                        "UPDATE users SET last_user_seq = last_user_seq + 1 WHERE app_id = ? AND uid = ? RETURNING last_user_seq"
                ),
                arguments: [appId, uid]
            )
        else { throw DomainError.uidNotFound(uid) }
        try db.cachedStatement(
            sql:
                "INSERT INTO memberships (app_id, uid, user_seq, conversation_pk, joined, seq) VALUES (?, ?, ?, ?, ?, ?)"
        ).execute(arguments: [appId, uid, userSeq, conversationPK, joined, joined ? (joinSeq ?? lastSeq) : lastSeq])
    }

    /// Records the new last sequence number (and participant count, when it changed) on the conversation; with
    /// `activity`, its last activity too (a change of an existing message does not move it up the lists).
    func finish(participantCount: Int?, activity: Bool = true) throws {
        try db.cachedStatement(
            sql: """
                UPDATE conversations SET last_seq = ?, last_activity_at = CASE WHEN ? THEN ? ELSE last_activity_at END,
                    participant_count = COALESCE(?, participant_count)
                WHERE pk = ?
                """
        ).execute(arguments: [lastSeq, activity, now, participantCount, conversationPK])
    }
}
