import Foundation
import GRDB
import ParleyProtocol
import ParleyStore

extension SQLiteStore {
    public func apply(_ commands: [Command]) async throws -> [Result<CommandResult, DomainError>] {
        try await pool.write { db in
            let encoder = WireCoding.makeEncoder()
            var results: [Result<CommandResult, DomainError>] = []
            results.reserveCapacity(commands.count)
            for command in commands {
                // A savepoint per command: a rule that refuses one command halfway undoes only that command.
                var result: Result<CommandResult, DomainError>!
                try db.inSavepoint {
                    do {
                        result = .success(try Self.apply(command, in: db, encoder: encoder))
                        return .commit
                    } catch let error as DomainError {
                        result = .failure(error)
                        return .rollback
                    }
                }
                results.append(result)
            }
            return results
        }
    }

    static func apply(_ command: Command, in db: Database, encoder: JSONEncoder) throws -> CommandResult {
        switch command {
        case .createConversation(let create): return try createConversation(create, in: db, encoder: encoder)
        case .addParticipants(let add): return try addParticipants(add, in: db, encoder: encoder)
        case .sendMessage(let send): return try sendMessage(send, in: db, encoder: encoder)
        }
    }

    // MARK: Create

    static func createConversation(_ create: Command.CreateConversation, in db: Database, encoder: JSONEncoder) throws
        -> CommandResult
    {
        let others = Array(Set(create.participants.filter { $0 != create.creator })).sorted()
        if create.type == .direct {
            guard create.participants.count == 1, others.count == 1 else {
                throw DomainError(.badRequest, "A direct conversation has exactly one other participant.")
            }
        }
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
            return CommandResult(
                outcome: .conversation(row.conversation, created: false), events: [],
                recipients: try participantUIDs(db, conversationPK: row.pk)
            )
        }
        try db.execute(
            sql: """
                INSERT INTO conversations (id, app_id, type, direct_key, name, description, is_public, metadata,
                    created_by, created_at, updated_at, last_seq, last_activity_at, participant_count)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, 0)
                """,
            arguments: [
                create.newId, create.appId, create.type.rawValue, create.directKey, create.name, create.description,
                create.type == .group && create.isPublic, try json(create.metadata), create.creator, create.now,
                create.now, create.now,
            ]
        )
        let pk = db.lastInsertedRowID
        var writer = EventWriter(
            db: db, encoder: encoder, appId: create.appId, conversationId: create.newId, conversationPK: pk,
            lastSeq: 0, now: create.now, actor: create.creator
        )
        let creatorRole: ParticipantRole = create.type == .group ? .owner : .member
        let members = [(create.creator, creatorRole)] + others.map { ($0, ParticipantRole.member) }
        for (uid, role) in members {
            try insertParticipant(db, conversationPK: pk, uid: uid, role: role, now: create.now)
        }
        var conversation = try fetchConversation(db, appId: create.appId, id: create.newId)!.conversation
        conversation.participantCount = members.count
        conversation.lastSeq = Int64(1 + members.count)
        try writer.append(.conversationCreate, .conversationCreated(conversation))
        for (uid, role) in members {
            let participant = Participant(uid: uid, role: role, joinedAt: create.now)
            try writer.append(.participantAdded, .participantAdded(participant))
        }
        try writer.finish(participantCount: members.count)
        return CommandResult(
            outcome: .conversation(conversation, created: true), events: writer.events,
            recipients: members.map(\.0)
        )
    }

    // MARK: Participants

    static func addParticipants(_ add: Command.AddParticipants, in db: Database, encoder: JSONEncoder) throws
        -> CommandResult
    {
        let (row, role) = try visibleConversation(db, appId: add.appId, id: add.conversationId, viewer: add.actor)
        guard let role else { throw DomainError(.notAParticipant, "Join the conversation first.") }
        guard row.conversation.type == .group else {
            throw DomainError(.forbidden, "A direct conversation keeps its two participants.")
        }
        guard role.canAddParticipants else {
            throw DomainError(.forbidden, "Only the owner or an admin can add participants.")
        }
        var writer = EventWriter(
            db: db, encoder: encoder, appId: add.appId, conversationId: row.conversation.id, conversationPK: row.pk,
            lastSeq: row.conversation.lastSeq, now: add.now, actor: add.actor
        )
        var count = row.conversation.participantCount
        var seen = Set<String>()
        for entry in add.entries where seen.insert(entry.uid).inserted {
            let newRole = entry.role ?? .member
            guard role.canGrant(newRole) else {
                throw DomainError(.forbidden, "A \(role.rawValue) cannot make a participant \(newRole.rawValue).")
            }
            guard try fetchUser(db, appId: add.appId, uid: entry.uid) != nil else {
                throw DomainError.uidNotFound(entry.uid)
            }
            guard try self.role(db, conversationPK: row.pk, uid: entry.uid) == nil else { continue }
            try insertParticipant(db, conversationPK: row.pk, uid: entry.uid, role: newRole, now: add.now)
            count += 1
            try writer.append(.participantAdded, .participantAdded(Participant(uid: entry.uid, role: newRole, joinedAt: add.now)))
        }
        try writer.finish(participantCount: count)
        let participants = try fetchParticipants(db, conversationPK: row.pk)
        return CommandResult(
            outcome: .participants(participants), events: writer.events, recipients: participants.map(\.uid)
        )
    }

    static func insertParticipant(_ db: Database, conversationPK: Int64, uid: String, role: ParticipantRole, now: Int64)
        throws
    {
        try db.execute(
            sql: "INSERT INTO participants (conversation_pk, uid, role, joined_at) VALUES (?, ?, ?, ?)",
            arguments: [conversationPK, uid, role.rawValue, now]
        )
    }

    static func participantUIDs(_ db: Database, conversationPK: Int64) throws -> [String] {
        try String.fetchAll(
            db.cachedStatement(sql: "SELECT uid FROM participants WHERE conversation_pk = ?"),
            arguments: [conversationPK]
        )
    }

    // MARK: Messages

    static func sendMessage(_ send: Command.SendMessage, in db: Database, encoder: JSONEncoder) throws -> CommandResult
    {
        let (row, role) = try visibleConversation(db, appId: send.appId, id: send.conversationId, viewer: send.sender)
        guard role != nil else { throw DomainError(.notAParticipant, "Join the conversation to send to it.") }
        let recipients = try participantUIDs(db, conversationPK: row.pk)
        if let clientMessageId = send.clientMessageId,
            let body = try Data.fetchOne(
                db.cachedStatement(
                    sql: "SELECT body FROM events WHERE conversation_pk = ? AND actor = ? AND client_message_id = ?"
                ),
                arguments: [row.pk, send.sender, clientMessageId]
            )
        {
            let stored = try JSONDecoder().decode(Event.self, from: body)
            guard case .messageSent(let message) = stored.payload else {
                throw DomainError(.internalError, "Stored event \(stored.id) is not a message.")
            }
            return CommandResult(outcome: .message(message, duplicate: true), events: [], recipients: recipients)
        }
        var writer = EventWriter(
            db: db, encoder: encoder, appId: send.appId, conversationId: row.conversation.id, conversationPK: row.pk,
            lastSeq: row.conversation.lastSeq, now: send.now, actor: send.sender
        )
        let message = Message(
            id: send.messageId, conversationId: row.conversation.id, seq: row.conversation.lastSeq + 1,
            sender: send.sender, clientMessageId: send.clientMessageId, parts: send.parts, metadata: send.metadata,
            alert: send.alert, sentAt: send.now
        )
        try writer.append(.messageSent, .messageSent(message), clientMessageId: send.clientMessageId)
        try writer.finish(participantCount: nil)
        return CommandResult(outcome: .message(message, duplicate: false), events: writer.events, recipients: recipients)
    }

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
}

/// Appends a conversation's durable events, each with the next sequence number, and keeps the conversation row
/// in step.
struct EventWriter {
    let db: Database
    let encoder: JSONEncoder
    let appId: String
    let conversationId: String
    let conversationPK: Int64
    var lastSeq: Int64
    let now: Int64
    let actor: String?
    private(set) var events: [StoredEvent] = []

    init(
        db: Database, encoder: JSONEncoder, appId: String, conversationId: String, conversationPK: Int64,
        lastSeq: Int64, now: Int64, actor: String?
    ) {
        self.db = db
        self.encoder = encoder
        self.appId = appId
        self.conversationId = conversationId
        self.conversationPK = conversationPK
        self.lastSeq = lastSeq
        self.now = now
        self.actor = actor
    }

    mutating func append(_ name: EventName, _ payload: EventPayload, clientMessageId: String? = nil) throws {
        lastSeq += 1
        let event = Event(
            id: Event.durableID(conversationId: conversationId, seq: lastSeq), appId: appId, name: name,
            conversationId: conversationId, seq: lastSeq, timestamp: now, context: EventContext(createdBy: actor),
            payload: payload
        )
        let json = try encoder.encode(event)
        try db.cachedStatement(
            sql: """
                INSERT INTO events (conversation_pk, seq, name, actor, created_at, client_message_id, body)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(arguments: [conversationPK, lastSeq, name.rawValue, actor, now, clientMessageId, json])
        events.append(StoredEvent(event: event, json: [UInt8](json)))
    }

    /// Records the new last sequence number (and participant count, when it changed) on the conversation.
    func finish(participantCount: Int?) throws {
        if let participantCount {
            try db.execute(
                sql: "UPDATE conversations SET last_seq = ?, last_activity_at = ?, participant_count = ? WHERE pk = ?",
                arguments: [lastSeq, now, participantCount, conversationPK]
            )
        } else {
            try db.cachedStatement(sql: "UPDATE conversations SET last_seq = ?, last_activity_at = ? WHERE pk = ?")
                .execute(arguments: [lastSeq, now, conversationPK])
        }
    }
}
