import ParleyProtocol

extension CommandDecisions {
    // MARK: Participants

    /// Join a public group. `ban` is the actor's ban in force, if any.
    public static func join(
        _ action: Command.ConversationAction, _ snapshot: ConversationSnapshot?, ban: ConversationBan?
    ) throws -> CommandPlan {
        let snapshot = try visible(snapshot, id: action.conversationId)
        if let participant = snapshot.actor { return unchanged(.participant(participant), snapshot) }
        // Visible without being a participant means public: anyone in the app may join, but those banned from it.
        if let ban { throw Safety.bannedRefusal(ban) }
        let row = snapshot.row
        let participant = newParticipant(action.actor, .member, row: row, now: action.now)
        var log = EventLog(row: row, now: action.now, actor: action.actor)
        try log.append(.participantAdded, .participantAdded(participant))
        return CommandPlan(
            writes: [
                .insertParticipants(conversationPK: row.pk, [participant]),
                log.write(participantCount: row.conversation.participantCount + 1),
            ],
            result: CommandResult(
                outcome: .participant(participant), events: log.events, recipients: snapshot.members + [action.actor]
            )
        )
    }

    /// Add users to a group. Entries are checked in the order given: the first at fault is the one named.
    public static func addParticipants(
        _ add: Command.AddParticipants, _ snapshot: ConversationSnapshot?, _ reads: CommandReads.Add
    ) throws -> CommandPlan {
        let (snapshot, actor) = try participation(snapshot, id: add.conversationId)
        let row = snapshot.row
        try requireGroup(row, "A direct conversation keeps its two participants.")
        try ConversationRules.requireAdd(actor.role, roles: row.conversation.roles)
        let present = Set(reads.participants.map(\.uid))
        var seen = Set<String>()
        var newcomers: [Participant] = []
        for entry in add.entries where seen.insert(entry.uid).inserted {
            let newRole = entry.role ?? .member
            try ConversationRules.requireGrant(actor.role, newRole)
            guard reads.knownUsers.contains(entry.uid) else { throw DomainError.uidNotFound(entry.uid) }
            if let ban = reads.bans[entry.uid] { throw Safety.bannedRefusal(ban, addedBy: true) }
            guard !present.contains(entry.uid) else { continue }
            newcomers.append(newParticipant(entry.uid, newRole, row: row, now: add.now))
        }
        var log = EventLog(row: row, now: add.now, actor: add.actor)
        for participant in newcomers { try log.append(.participantAdded, .participantAdded(participant)) }
        // In the order they joined, as a read of the participants lists them.
        let participants = (reads.participants + newcomers).sorted { ($0.joinedAt, $0.uid) < ($1.joinedAt, $1.uid) }
        return CommandPlan(
            writes: [
                .insertParticipants(conversationPK: row.pk, newcomers),
                log.write(participantCount: row.conversation.participantCount + newcomers.count),
            ],
            result: CommandResult(
                outcome: .participants(participants), events: log.events, recipients: participants.map(\.uid)
            )
        )
    }

    /// Change a participant's role (the owner). `target` is the participant whose role changes.
    public static func updateParticipant(
        _ update: Command.UpdateParticipant, _ snapshot: ConversationSnapshot?, target: Participant?
    ) throws -> CommandPlan {
        let (snapshot, actor) = try participation(snapshot, id: update.conversationId)
        let row = snapshot.row
        try requireGroup(row, "A direct conversation has no roles to change.")
        guard actor.role.canChangeRoles else { throw DomainError(.forbidden, "Only the owner can change roles.") }
        guard var participant = target else { throw DomainError(.uidNotFound, "\(update.uid) is not a participant.") }
        guard participant.role != .owner, update.role != .owner else {
            throw DomainError(.forbidden, "The owner's role cannot be given or taken.")
        }
        guard participant.role != update.role else { return unchanged(.participant(participant), snapshot) }
        participant.role = update.role
        var log = EventLog(row: row, now: update.now, actor: update.actor)
        try log.append(.participantUpdated, .participantUpdated(participant))
        return CommandPlan(
            writes: [.updateParticipant(conversationPK: row.pk, participant), log.write(participantCount: nil)],
            result: CommandResult(outcome: .participant(participant), events: log.events, recipients: snapshot.members)
        )
    }

    /// Remove a participant, or leave. `target` is the participant removed.
    public static func removeParticipant(
        _ remove: Command.RemoveParticipant, _ snapshot: ConversationSnapshot?, target: Participant?
    ) throws -> CommandPlan {
        let (snapshot, actor) = try participation(snapshot, id: remove.conversationId)
        let row = snapshot.row
        try requireGroup(row, "A direct conversation keeps its two participants.")
        guard let removed = target else { throw DomainError(.uidNotFound, "\(remove.uid) is not a participant.") }
        if remove.uid == remove.actor {
            guard actor.role != .owner else {
                throw DomainError(.forbidden, "The owner cannot leave; delete the conversation instead.")
            }
        } else {
            try ConversationRules.requireRemove(actor.role, removed.role, roles: row.conversation.roles)
        }
        var log = EventLog(row: row, now: remove.now, actor: remove.actor)
        try log.append(.participantRemoved, .participantRemoved(removed))
        let remaining = snapshot.members.filter { $0 != remove.uid }
        return CommandPlan(
            writes: [
                .deleteParticipant(conversationPK: row.pk, appId: row.appId, uid: remove.uid),
                log.write(participantCount: row.conversation.participantCount - 1),
            ],
            result: CommandResult(
                outcome: .removed, events: log.events, recipients: remaining + [remove.uid], participants: remaining
            )
        )
    }

    /// A participant who starts with everything so far delivered and read.
    static func newParticipant(_ uid: String, _ role: ParticipantRole, row: ConversationRow, now: Int64)
        -> Participant
    {
        let seen = row.conversation.lastSeq
        return Participant(uid: uid, role: role, joinedAt: now, deliveredSeq: seen, readSeq: seen)
    }

    // MARK: Receipts

    /// Where a receipt moves its participant: read first, then decided in ``markReceipt(_:_:newest:)`` once the store
    /// read the newest message at each position in ``ReceiptMove/named``.
    public struct ReceiptMove: Sendable {
        public var snapshot: ConversationSnapshot
        public var participant: Participant
        public var delivered: Int64
        public var read: Int64

        /// The positions that move, whose newest message each receipt names.
        public var named: [Int64] {
            var seqs: [Int64] = []
            if delivered > participant.deliveredSeq { seqs.append(delivered) }
            if read > participant.readSeq && !seqs.contains(read) { seqs.append(read) }
            return seqs
        }
    }

    /// Where `mark` moves the actor's positions: forward only, never past the conversation's last event, delivered
    /// at least as far as read.
    public static func receiptMove(_ mark: Command.MarkReceipt, _ snapshot: ConversationSnapshot?) throws
        -> ReceiptMove
    {
        let (snapshot, participant) = try participation(snapshot, id: mark.conversationId)
        let last = snapshot.row.conversation.lastSeq
        let read = max(participant.readSeq, min(mark.readSeq ?? 0, last))
        let delivered = max(participant.deliveredSeq, min(mark.deliveredSeq ?? 0, last), read)
        return ReceiptMove(snapshot: snapshot, participant: participant, delivered: delivered, read: read)
    }

    /// Move a participant's delivered and/or read position forward. `newest` holds the newest message at or before
    /// each of ``ReceiptMove/named`` (none when there is no message so far). Receipts are ephemeral events: no
    /// sequence number, nothing stored but the positions.
    public static func markReceipt(
        _ mark: Command.MarkReceipt, _ move: ReceiptMove, newest: [Int64: MessagePlace]
    ) throws -> CommandPlan {
        let snapshot = move.snapshot
        let row = snapshot.row
        var participant = move.participant
        var events: [StoredEvent] = []
        func ephemeral(_ name: EventName, seq: Int64) throws {
            let place = newest[seq]
            let receipt = Receipt(uid: mark.uid, seq: seq, messageId: place?.messageId, timestamp: place?.sentAt)
            let event = Event(
                id: "\(row.conversation.id):\(name == .messageRead ? "read" : "delivered"):\(mark.uid):\(seq)",
                appId: mark.appId, name: name, conversationId: row.conversation.id, timestamp: mark.now,
                context: EventContext(createdBy: mark.uid),
                payload: name == .messageRead ? .messageRead(receipt) : .messageDelivered(receipt)
            )
            events.append(StoredEvent(event: event, json: try WireJSON.encode(event)))
        }
        if move.delivered > participant.deliveredSeq { try ephemeral(.messageDelivered, seq: move.delivered) }
        let readMoved = move.read > participant.readSeq
        if readMoved { try ephemeral(.messageRead, seq: move.read) }
        guard !events.isEmpty else { return unchanged(.participant(participant), snapshot) }
        participant.deliveredSeq = move.delivered
        participant.readSeq = move.read
        return CommandPlan(
            writes: [
                .moveReceipt(
                    conversationPK: row.pk, appId: row.appId, uid: mark.uid, delivered: move.delivered,
                    read: move.read, readMoved: readMoved
                )
            ],
            result: CommandResult(outcome: .participant(participant), events: events, recipients: snapshot.members)
        )
    }
}

extension CommandDecisions {
    /// Takes a user being deleted out of a conversation, as the app's server. They leave with
    /// `conversation.participantRemoved` (no `createdBy`); a group they owned passes to its longest-standing admin, or
    /// else its longest-standing member (`conversation.participantUpdated`), or is deleted when nobody is left. A
    /// direct conversation keeps its other participant, who can no longer send there. `ERR_UID_NOT_FOUND` when they are
    /// not a participant (a repeat).
    public static func removeDeletedUser(
        _ remove: Command.RemoveDeletedUser, _ snapshot: ConversationSnapshot?, participants: [Participant]
    ) throws -> CommandPlan {
        guard let snapshot else { throw DomainError.conversationNotFound(remove.conversationId) }
        guard let removed = participants.first(where: { $0.uid == remove.uid }) else {
            throw DomainError(.uidNotFound, "\(remove.uid) is not a participant.")
        }
        let row = snapshot.row
        var log = EventLog(row: row, now: remove.now, actor: nil)
        try log.append(.participantRemoved, .participantRemoved(removed))
        var writes: [StoreWrite] = [.deleteParticipant(conversationPK: row.pk, appId: row.appId, uid: remove.uid)]
        let others = participants.filter { $0.uid != remove.uid }
        if removed.role == .owner && row.conversation.type == .group {
            let byAge = others.sorted { ($0.joinedAt, $0.uid) < ($1.joinedAt, $1.uid) }
            if var heir = byAge.first(where: { $0.role == .admin }) ?? byAge.first {
                heir.role = .owner
                writes.append(.updateParticipant(conversationPK: row.pk, heir))
                try log.append(.participantUpdated, .participantUpdated(heir))
            } else if row.deletedAt == nil {
                var conversation = row.conversation
                conversation.deletedAt = remove.now
                conversation.updatedAt = remove.now
                conversation.participantCount = 0
                writes.append(.updateConversation(conversationPK: row.pk, conversation))
                var published = conversation
                published.lastSeq = log.lastSeq + 1
                try log.append(.conversationDelete, .conversationDeleted(published))
            }
        }
        writes.append(log.write(participantCount: others.count, activity: false))
        let remaining = snapshot.members.filter { $0 != remove.uid }
        return CommandPlan(
            writes: writes,
            result: CommandResult(
                outcome: .removed, events: log.events, recipients: remaining + [remove.uid], participants: remaining
            )
        )
    }
}
