import ParleyProtocol

extension CommandDecisions {
    // MARK: Messages

    /// The message a command is about, or `ERR_MESSAGE_NOT_FOUND`.
    static func stored(_ reads: CommandReads.OnMessage, id: String) throws -> StoredMessage {
        guard let stored = reads.stored else { throw MessageLifecycle.notFound(id) }
        return stored
    }

    /// Refuses a muted participant's write, and either one's in a direct conversation where one blocked the other.
    /// Checked after a repeat's answer: a change made before a block or a mute and retried after it is the change
    /// made then.
    static func requireMayWrite(
        _ actor: Participant, _ snapshot: ConversationSnapshot, blockers: [String], now: Int64
    ) throws {
        if actor.isMuted(at: now) { throw Safety.mutedRefusal(until: actor.mutedUntil) }
        if snapshot.row.conversation.type == .direct {
            try Safety.requireNoBlock(actor: actor.uid, blockers: blockers)
        }
    }

    /// Replace a message's content (its sender, or a role allowed to edit others' messages).
    public static func editMessage(
        _ edit: Command.EditMessage, _ snapshot: ConversationSnapshot?, _ reads: CommandReads.OnMessage
    ) throws -> CommandPlan {
        let (snapshot, actor) = try participation(snapshot, id: edit.conversationId)
        let row = snapshot.row
        let stored = try stored(reads, id: edit.messageId)
        let message = stored.message
        try MessageLifecycle.requireEdit(message, actor: edit.actor, role: actor.role, roles: row.conversation.roles)
        let members = Set(snapshot.members)
        let mentions = edit.mentions.map {
            MessageLifecycle.keptMentions($0, sender: message.sender, isParticipant: members.contains)
        }
        let files = MessageLifecycle.FileChange(from: message.parts, to: edit.parts)
        var parts = edit.parts
        if !files.named.isEmpty {
            parts = try Attachments.resolve(
                parts, records: reads.attachments, appId: row.appId, conversationId: row.conversation.id,
                actor: edit.actor, keeping: files.kept
            )
        }
        guard
            let edited = MessageLifecycle.edited(
                message, parts: parts, metadata: edit.metadata, mentions: mentions, at: edit.now
            )
        else { return unchanged(.message(message, duplicate: true), snapshot) }
        try MessageLifecycle.requireWithinLimits(edited, edit.limits)
        try requireMayWrite(actor, snapshot, blockers: reads.blockers, now: edit.now)
        var writes: [StoreWrite] = [.rewriteMessage(conversationPK: row.pk, edited)]
        if !files.added.isEmpty {
            writes.append(.attachFiles(appId: row.appId, ids: files.added, messageId: message.id))
        }
        if !files.dropped.isEmpty { writes.append(.removeFiles(appId: row.appId, ids: files.dropped, now: edit.now)) }
        // A silent message's mentions are never unread (``CommandDecisions/sentEffects(of:_:messageCount:)``).
        if edited.mentions != message.mentions && message.silent != true {
            writes.append(.replaceMentions(conversationPK: row.pk, appId: row.appId, edited))
        }
        var log = EventLog(row: row, now: edit.now, actor: edit.actor)
        try log.append(.messageUpdate, .messageUpdated(edited))
        writes.append(log.write(participantCount: nil, activity: false))
        return CommandPlan(
            writes: writes,
            result: CommandResult(
                outcome: .message(edited, duplicate: false), events: log.events, recipients: snapshot.members)
        )
    }

    /// Delete a message (its sender, a role allowed to delete others' messages, or the app's server: no actor).
    public static func deleteMessage(
        _ action: Command.MessageAction, _ snapshot: ConversationSnapshot?, _ reads: CommandReads.OnMessage
    ) throws -> CommandPlan {
        // A deleted user's content goes from deleted conversations too.
        let (snapshot, role) = try acting(
            snapshot, id: action.conversationId, actor: action.actor, orDeleted: action.ofDeletedUser)
        let row = snapshot.row
        let stored = try stored(reads, id: action.messageId)
        let message = stored.message
        // Who may not delete it is refused even when it is gone already: the answer does not depend on timing.
        if let actor = action.actor, let role {
            try MessageLifecycle.requireDelete(message, actor: actor, role: role, roles: row.conversation.roles)
        }
        // Erasing the sender of a message deleted before is a change of its own; deleting it again is not.
        let erases = action.erasesSender && !message.sender.isEmpty
        guard !message.isDeleted || erases else { return unchanged(.message(message, duplicate: true), snapshot) }
        var tombstone = MessageLifecycle.tombstone(of: message, by: action.actor, at: message.deletedAt ?? action.now)
        if message.isDeleted { tombstone.deletedBy = message.deletedBy == message.sender ? nil : message.deletedBy }
        if erases {
            tombstone.sender = ""
            tombstone.clientMessageId = nil
        }
        var writes: [StoreWrite] = [.rewriteMessage(conversationPK: row.pk, tombstone)]
        if erases { writes.append(.eraseSender(conversationPK: row.pk, messageId: message.id, uid: message.sender)) }
        if !message.isDeleted {
            let files = Attachments.ids(in: message.parts)
            if !files.isEmpty { writes.append(.removeFiles(appId: row.appId, ids: files, now: action.now)) }
            writes.append(
                .forgetMessage(
                    conversationPK: row.pk, appId: row.appId, seq: message.seq, messageId: message.id,
                    messageIndex: stored.messageIndex
                )
            )
        }
        var log = EventLog(row: row, now: action.now, actor: action.actor)
        try log.append(.messageDelete, .messageDeleted(tombstone))
        writes.append(log.write(participantCount: nil, activity: false))
        return CommandPlan(
            writes: writes,
            result: CommandResult(
                outcome: .message(tombstone, duplicate: false), events: log.events, recipients: snapshot.members)
        )
    }

    /// Add or remove the actor's reaction (any participant).
    public static func react(
        _ react: Command.React, _ snapshot: ConversationSnapshot?, _ reads: CommandReads.OnMessage
    ) throws -> CommandPlan {
        let (snapshot, actor) = try participation(snapshot, id: react.conversationId)
        let row = snapshot.row
        let message = try stored(reads, id: react.messageId).message
        let mine = reads.reactions.filter(\.byActor)
        func answer(_ tallies: [ReactionTally], events: [StoredEvent], duplicate: Bool) -> CommandResult {
            let summaries = tallies.sorted { ($0.firstAt, $0.key) < ($1.firstAt, $1.key) }
                .map { ReactionSummary(key: $0.key, count: $0.count, reacted: $0.byActor) }
            return CommandResult(
                outcome: .reactions(ReactionList(messageId: message.id, reactions: summaries), duplicate: duplicate),
                events: events, recipients: snapshot.members
            )
        }
        guard mine.contains(where: { $0.key == react.key }) != react.add else {
            return CommandPlan(result: answer(reads.reactions, events: [], duplicate: true))
        }
        // Taking a reaction back is always possible; giving one is writing (a repeat of one given before a block or a
        // mute is answered above, as it was).
        var tallies = reads.reactions
        let write: StoreWrite
        if react.add {
            try requireMayWrite(actor, snapshot, blockers: reads.blockers, now: react.now)
            try MessageLifecycle.requireReactionRoom(
                message, key: react.key, keys: Set(tallies.map(\.key)), own: mine.count)
            if let index = tallies.firstIndex(where: { $0.key == react.key }) {
                tallies[index].count += 1
                tallies[index].byActor = true
                tallies[index].firstAt = min(tallies[index].firstAt, react.now)
            } else {
                tallies.append(
                    ReactionTally(key: react.key, count: 1, byActor: true, firstAt: react.now, firstByOthersAt: nil))
            }
            write = .addReaction(
                conversationPK: row.pk, messageSeq: message.seq, key: react.key, uid: react.actor, at: react.now)
        } else {
            if let index = tallies.firstIndex(where: { $0.key == react.key }) {
                if let others = tallies[index].firstByOthersAt, tallies[index].count > 1 {
                    tallies[index].count -= 1
                    tallies[index].byActor = false
                    tallies[index].firstAt = others
                } else {
                    tallies.remove(at: index)
                }
            }
            write = .removeReaction(conversationPK: row.pk, messageSeq: message.seq, key: react.key, uid: react.actor)
        }
        let count = tallies.first { $0.key == react.key }?.count ?? 0
        let reaction = MessageReaction(
            messageId: message.id, messageSeq: message.seq, key: react.key, uid: react.actor, count: count)
        var log = EventLog(row: row, now: react.now, actor: react.actor)
        if react.add {
            try log.append(.reactionAdded, .reactionAdded(reaction))
        } else {
            try log.append(.reactionRemoved, .reactionRemoved(reaction))
        }
        return CommandPlan(
            writes: [write, log.write(participantCount: nil, activity: false)],
            result: answer(tallies, events: log.events, duplicate: false)
        )
    }
}

extension CommandDecisions {
    /// Pin or unpin a message (in a group where the actor's role may, in a direct conversation either participant;
    /// the app's server on any conversation of the app).
    public static func pin(_ pin: Command.Pin, _ snapshot: ConversationSnapshot?, _ reads: CommandReads.OnMessage)
        throws -> CommandPlan
    {
        let (snapshot, role) = try acting(snapshot, id: pin.conversationId, actor: pin.actor)
        let row = snapshot.row
        let message = try stored(reads, id: pin.messageId).message
        if let role {
            try MessageLifecycle.requirePin(role: role, type: row.conversation.type, roles: row.conversation.roles)
        }
        guard (reads.pin != nil) != pin.pinned else {
            return unchanged(.pin(reads.pin, message: message, duplicate: true), snapshot)
        }
        // A user's pin is a write (refused to the muted and across a block); the app's server has no participation.
        if let participant = snapshot.actor {
            try requireMayWrite(participant, snapshot, blockers: reads.blockers, now: pin.now)
        }
        var log = EventLog(row: row, now: pin.now, actor: pin.actor)
        let write: StoreWrite
        let after: MessagePin?
        // Past the repeat above, an unpin finds the message pinned and a pin finds it not.
        if let was = reads.pin {
            write = .unpinMessage(conversationPK: row.pk, messageSeq: message.seq)
            try log.append(.messageUnpinned, .messageUnpinned(was))
            after = nil
        } else {
            try MessageLifecycle.requirePinRoom(message, pins: reads.pinCount)
            let made = MessagePin(
                messageId: message.id, messageSeq: message.seq, pinnedBy: pin.actor, pinnedAt: pin.now)
            write = .pinMessage(conversationPK: row.pk, made)
            try log.append(.messagePinned, .messagePinned(made))
            after = made
        }
        return CommandPlan(
            writes: [write, log.write(participantCount: nil, activity: false)],
            result: CommandResult(
                outcome: .pin(after, message: message, duplicate: false), events: log.events,
                recipients: snapshot.members
            )
        )
    }
}
