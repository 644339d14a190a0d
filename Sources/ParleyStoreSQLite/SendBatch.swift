import Foundation
import GRDB
import ParleyProtocol
import ParleyStore

/// The sends of one transaction (``SQLiteStore/apply(_:)``), with what they read kept in memory.
///
/// A send needs its conversation (position, deleted or not, public or not), whether the sender participates, and the
/// participants (the event's recipients). The first send to a conversation in a transaction reads them; the next
/// ones use what the earlier ones left: sequence numbers and message counts are carried forward in memory, and the
/// conversation's row and the senders' read positions are written once per transaction by ``flush(_:)``, instead of
/// once per message. A send is decided before it writes anything (refusals included), so it needs no savepoint: it
/// writes its event, and its push outbox row, or nothing.
///
/// Every other command reads and writes the tables itself: ``SQLiteStore/apply(_:)`` flushes before it, so that it
/// reads the positions the sends reached, and calls ``forget()`` after it (unless it is a receipt, which changes
/// nothing kept here), so that a send after it reads again what it may have changed: a participant removed or added,
/// a conversation deleted, restored or created.
///
/// What the sends read outlives the transaction (``known``): the store's writer hands it to the next batch once this
/// one committed (``SQLiteStore/writeBatch(_:memory:_:)``), so that a conversation that receives a message every
/// second is not read again for every one of them when batches hold a message or two. It is dropped when a batch
/// fails, and when another connection changed the database in between.
struct SendBatch {
    /// What sends know of conversations, from one transaction to the next.
    struct Known: Sendable {
        /// By conversation id; `.some(nil)` when there is no conversation with this id.
        fileprivate var conversations: [String: Conversation?] = [:]
        /// The client message ids in the log's tail (nil: to be read from the log, see ``ClientIdTail``).
        fileprivate var tail: ClientIdTail?
    }

    /// The client message ids of the log's tail, the messages past `log_state.indexed_through` (SQLiteStore+LogIndex):
    /// with the filed ones in `client_message_ids`, every client message id stored. Read from the log by the first
    /// send that needs it after the writer started or a batch failed, kept up to date by the sends, and emptied when a
    /// batch files the tail (``flush(_:)``).
    struct ClientIdTail: Sendable {
        /// The last log position filed.
        var through: Int64
        var ids: [ClientMessageKey: Int64]
    }

    /// Conversations kept at most; past this many, what is known is dropped and read again as needed.
    static let knownLimit = 10_000

    /// A conversation as the sends of this transaction see it.
    struct Conversation {
        var pk: Int64
        var appId: String
        var id: String
        var isPublic: Bool
        /// A direct conversation: sends between its two participants stop while either blocks the other.
        var isDirect: Bool
        var isDeleted: Bool
        var lastSeq: Int64
        var messageCount: Int64
        var lastActivityAt: Int64
        /// What each role may do.
        var roles: ConversationRoles
        /// The participants (the recipients of its events), in the order the participants table lists them.
        var participants: [String]
        /// Each participant's role.
        var members: [String: ParticipantRole]
        /// The muted participants, with when their mute ends (nil: when lifted).
        var mutes: [String: Int64?] = [:]
        /// Each participant's read position: the sequence number and the messages it covers.
        var reads: [String: ReadPosition] = [:]
        /// Messages deleted in the conversation (unread counts then need the deleted ones past a read position).
        var deletedMessageCount: Int64 = 0
        /// Whether sends moved its position since it was read or last written.
        var moved = false

        /// What a send's decision sees (``CommandDecisions/sentMessage(_:to:role:_:)``).
        var target: SendTarget {
            SendTarget(
                appId: appId, id: id, isPublic: isPublic, isDirect: isDirect, isDeleted: isDeleted, lastSeq: lastSeq,
                roles: roles, members: members, mutes: mutes
            )
        }
    }

    /// A participant's read position (`participants.read_seq`, `read_message_count`).
    struct ReadPosition {
        var seq: Int64
        var messageCount: Int64
    }

    struct ReaderKey: Hashable {
        var conversationPK: Int64
        var uid: String
    }

    /// By conversation id (unique across apps); `.some(nil)` when there is no conversation with this id.
    private var conversations: [String: Conversation?] = [:]
    /// The conversations with `moved` set, in the order of their first send.
    private var moved: [String] = []
    /// Senders' new read positions (sending reads the conversation up to the message).
    private var readers: [ReaderKey: ReadPosition] = [:]
    private var tail: ClientIdTail?
    private var insertEvent: Statement?

    init(known: consuming Known = Known()) {
        conversations = known.conversations
        tail = known.tail
    }

    /// What this batch's sends know, for the next batch once this one committed. ``flush(_:)`` must have written
    /// everything.
    var known: Known {
        precondition(moved.isEmpty && readers.isEmpty, "SendBatch: known before flush()")
        return Known(conversations: conversations, tail: tail)
    }

    /// Forgets what was read, after a command that may have changed it. ``flush(_:)`` must have written everything.
    mutating func forget() {
        precondition(moved.isEmpty && readers.isEmpty, "SendBatch: forget() before flush()")
        conversations.removeAll(keepingCapacity: true)
    }

    /// Forgets the client message ids of the log's tail, after a command that took one off a message (an erase).
    mutating func forgetClientIds() {
        precondition(moved.isEmpty && readers.isEmpty, "SendBatch: forgetClientIds() before flush()")
        tail = nil
    }

    /// Forgets one conversation, after a command that changed only it (a receipt moves a read position).
    mutating func forget(_ conversationId: String) {
        precondition(moved.isEmpty && readers.isEmpty, "SendBatch: forget(_:) before flush()")
        conversations[conversationId] = nil
    }

    /// The unread counts `request` asks for, from what the sends know, as ``SQLiteStore/fetchUnread(_:_:)`` would read
    /// them after ``flush(_:)``; nil when they are not all known here: a read of every conversation, one not read by
    /// a send, or one with deleted messages (which the count leaves out past the read position).
    ///
    /// Read positions move only through the writer's commands, and what is kept stays true to them: a send moves its
    /// sender's (below), a receipt forgets its conversation, every other command forgets everything.
    func unread(_ request: UnreadRequest) -> UnreadSummary? {
        guard !request.everyConversation else { return nil }
        var total = 0
        var counts: [ConversationUnread] = []
        for id in Set(request.conversationIds) {
            guard let known = conversations[id] else { return nil }
            // As the read: nothing for a conversation that is not there, deleted, of another app, or not theirs.
            guard let conversation = known, conversation.appId == request.appId, !conversation.isDeleted,
                let read = conversation.reads[request.uid]
            else { continue }
            guard conversation.deletedMessageCount == 0 else { return nil }
            let count = Int(max(0, conversation.messageCount - read.messageCount))
            total += count
            counts.append(
                ConversationUnread(conversationId: id, unread: count, readSeq: read.seq, lastSeq: conversation.lastSeq)
            )
        }
        return UnreadSummary(total: total, conversations: counts.sorted { $0.conversationId < $1.conversationId })
    }

    /// Stores a message, or finds that it is a duplicate, or refuses it.
    mutating func send(_ send: Command.SendMessage, in db: Database) throws -> Result<CommandResult, DomainError> {
        typealias Decide = CommandDecisions
        let found = try self.conversation(send.conversationId, in: db)
        let target: SendTarget
        let role: ParticipantRole?
        do {
            (target, role) = try Decide.sendAccess(send, found?.target)
        } catch let refusal as DomainError {
            return .failure(refusal)
        }
        guard var conversation = found else { return .failure(.conversationNotFound(send.conversationId)) }
        let message: Message
        var threadSeq: Int64?
        do {
            let needs = Decide.sendNeeds(send, target)
            var reads = SendReads()
            if needs.blockers, let other = conversation.participants.first(where: { $0 != send.sender }) {
                // Read on every send (not kept): a block is made outside the writer's batches.
                reads.blockers = try SQLiteStore.blockersBetween(db, appId: target.appId, send.sender, other)
            }
            if let replyTo = needs.parent {
                reads.parent = try SQLiteStore.fetchStoredMessage(
                    db, conversationPK: conversation.pk, messageId: replyTo)?.message
                threadSeq = reads.parent?.seq
            }
            if !needs.attachments.isEmpty {
                // Read in the transaction: an upload taken by a send earlier in it is taken.
                reads.attachments = try SQLiteStore.fetchAttachments(db, appId: target.appId, ids: needs.attachments)
            }
            message = try Decide.sentMessage(send, to: target, role: role, reads)
        } catch let refusal as DomainError {
            // A refused repeat of a message stored before answers with that message.
            if let original = try storedMessage(send, conversationPK: conversation.pk, in: db) {
                return .success(
                    CommandResult(
                        outcome: .message(original, duplicate: true), events: [], recipients: conversation.participants
                    )
                )
            }
            return .failure(refusal)
        }
        let seq = message.seq
        let effects = Decide.sentEffects(of: message, send, messageCount: conversation.messageCount)
        let files = Attachments.ids(in: message.parts)
        let stored = try Decide.sentEvent(message, appId: target.appId)
        let json = stored.json
        // A sender stores one message per client message id: a repeat is answered with the first one.
        if let original = try storedMessage(send, conversationPK: conversation.pk, in: db) {
            return .success(
                CommandResult(
                    outcome: .message(original, duplicate: true), events: [], recipients: conversation.participants
                )
            )
        }
        if insertEvent == nil {
            insertEvent = try db.cachedStatement(
                sql: """
                    INSERT INTO events (conversation_pk, seq, name, actor, created_at, client_message_id, message_index,
                        message_id, thread_seq, body)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            )
        }
        try insertEvent!.execute(
            arguments: [
                conversation.pk, seq, EventName.messageSent.rawValue, send.sender, send.now, send.clientMessageId,
                effects.messageIndex, message.id, threadSeq, Data(json),
            ]
        )
        if let clientMessageId = send.clientMessageId {
            let key = ClientMessageKey(
                clientMessageId: clientMessageId, conversationPK: conversation.pk, sender: send.sender)
            tail?.ids[key] = seq
        }
        if !files.isEmpty {
            try SQLiteStore.attachFiles(db, appId: conversation.appId, ids: files, messageId: message.id)
        }
        if effects.recordsMentions {
            try SQLiteStore.insertMentions(
                db, appId: conversation.appId, conversationPK: conversation.pk, message: message)
        }
        if effects.queuesPush {
            try db.cachedStatement(
                sql: "INSERT INTO push_outbox (app_id, conversation_pk, seq, created_at) VALUES (?, ?, ?, ?)"
            ).execute(arguments: [send.appId, conversation.pk, seq, send.now])
        }
        if !conversation.moved {
            conversation.moved = true
            moved.append(send.conversationId)
        }
        conversation.lastSeq = seq
        conversation.messageCount = effects.messageCount
        conversation.lastActivityAt = send.now
        if effects.movesSenderRead {
            let read = ReadPosition(seq: seq, messageCount: effects.messageCount)
            conversation.reads[send.sender] = read
            readers[ReaderKey(conversationPK: conversation.pk, uid: send.sender)] = read
        }
        conversations[send.conversationId] = conversation
        return .success(
            CommandResult(
                outcome: .message(message, duplicate: false), events: [stored],
                recipients: conversation.participants
            )
        )
    }

    /// Writes the moved conversations' positions and the senders' read positions, and files the log's tail once it is
    /// ``SQLiteStore/logIndexInterval`` events long.
    mutating func flush(_ db: Database) throws {
        if try SQLiteStore.lastLogPosition(db) - (tail?.through ?? SQLiteStore.indexedThrough(db))
            >= SQLiteStore.logIndexInterval
        {
            tail = ClientIdTail(through: try SQLiteStore.indexLogTail(db), ids: [:])
        }
        for id in moved {
            guard case var conversation?? = conversations[id] else { continue }
            try db.cachedStatement(
                sql: "UPDATE conversations SET last_seq = ?, last_activity_at = ?, message_count = ? WHERE pk = ?"
            ).execute(
                arguments: [
                    conversation.lastSeq, conversation.lastActivityAt, conversation.messageCount, conversation.pk,
                ]
            )
            conversation.moved = false
            conversations[id] = conversation
        }
        moved.removeAll(keepingCapacity: true)
        for (key, position) in readers {
            try db.cachedStatement(
                sql: """
                    UPDATE participants SET delivered_seq = ?, read_seq = ?, read_message_count = ?
                    WHERE conversation_pk = ? AND uid = ?
                    """
            ).execute(arguments: [position.seq, position.seq, position.messageCount, key.conversationPK, key.uid])
        }
        readers.removeAll(keepingCapacity: true)
    }

    /// The conversation as the sends of this transaction see it: read by the first one.
    private mutating func conversation(_ id: String, in db: Database) throws -> Conversation? {
        if let known = conversations[id] { return known }
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT pk, app_id, is_public, deleted_at IS NOT NULL, last_seq, message_count, last_activity_at,
                            roles, type = 'direct', deleted_message_count
                        FROM conversations WHERE id = ?
                        """
                ),
                arguments: [id]
            )
        else {
            remember(id, nil)
            return nil
        }
        let pk: Int64 = row[0]
        let memberRows = try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT uid, role, muted, muted_until, read_seq, read_message_count
                    FROM participants WHERE conversation_pk = ?
                    """
            ),
            arguments: [pk]
        )
        var participants: [String] = []
        var members: [String: ParticipantRole] = [:]
        var mutes: [String: Int64?] = [:]
        var reads: [String: ReadPosition] = [:]
        participants.reserveCapacity(memberRows.count)
        for member in memberRows {
            let uid: String = member[0]
            participants.append(uid)
            members[uid] = ParticipantRole(rawValue: member[1]) ?? .member
            if member[2] as Bool { mutes[uid] = member[3] as Int64? }
            reads[uid] = ReadPosition(seq: member[4], messageCount: member[5])
        }
        let conversation = Conversation(
            pk: pk, appId: row[1], id: id, isPublic: row[2], isDirect: row[8], isDeleted: row[3], lastSeq: row[4],
            messageCount: row[5],
            lastActivityAt: row[6], roles: try ConversationRoles(storedJSON: row[7]), participants: participants,
            members: members, mutes: mutes, reads: reads, deletedMessageCount: row[9]
        )
        remember(id, conversation)
        return conversation
    }

    /// Keeps a conversation that was read (nil: there is none with this id), within ``knownLimit``. Only those that
    /// no send moved yet may be dropped, and none is: a full map is emptied only before a conversation is added.
    private mutating func remember(_ id: String, _ conversation: Conversation?) {
        if conversations.count >= Self.knownLimit {
            conversations = conversations.filter { $0.value?.moved == true }
        }
        conversations[id] = conversation
    }

    /// The message this sender stored first with this send's client message id, if any: in the log's tail (known
    /// here) or filed.
    private mutating func storedMessage(_ send: Command.SendMessage, conversationPK: Int64, in db: Database) throws
        -> Message?
    {
        guard let clientMessageId = send.clientMessageId else { return nil }
        if tail == nil {
            let (through, ids) = try SQLiteStore.clientIdsInTail(db)
            tail = ClientIdTail(through: through, ids: ids)
        }
        let key = ClientMessageKey(
            clientMessageId: clientMessageId, conversationPK: conversationPK, sender: send.sender)
        guard
            let seq = try tail?.ids[key]
                ?? SQLiteStore.filedClientMessageSeq(
                    db, conversationPK: conversationPK, sender: send.sender, clientMessageId: clientMessageId)
        else { return nil }
        guard
            let body = try Data.fetchOne(
                db.cachedStatement(sql: "SELECT body FROM events WHERE conversation_pk = ? AND seq = ?"),
                arguments: [conversationPK, seq]
            )
        else { throw DomainError(.internalError, "A client message id names a message that is not in the log.") }
        return try MessageLifecycle.message(in: body)
    }
}
