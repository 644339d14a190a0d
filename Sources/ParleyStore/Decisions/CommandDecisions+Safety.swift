import ParleyProtocol

extension CommandDecisions {
    // MARK: Mutes and bans

    /// Mute or unmute a participant (who may remove them, or the app's server). `target` is the participant.
    public static func muteParticipant(
        _ mute: Command.MuteParticipant, _ snapshot: ConversationSnapshot?, target: Participant?
    ) throws -> CommandPlan {
        let (snapshot, role) = try acting(snapshot, id: mute.conversationId, actor: mute.actor)
        let row = snapshot.row
        guard let participant = target else { throw DomainError(.uidNotFound, "\(mute.uid) is not a participant.") }
        try Safety.requireMute(role, target: participant, type: row.conversation.type, roles: row.conversation.roles)
        guard let changed = Safety.muted(participant, by: mute) else {
            return unchanged(.participant(participant), snapshot)
        }
        var log = EventLog(row: row, now: mute.now, actor: mute.actor)
        try log.append(.participantUpdated, .participantUpdated(changed))
        return CommandPlan(
            writes: [.updateParticipant(conversationPK: row.pk, changed), log.write(participantCount: nil)],
            result: CommandResult(outcome: .participant(changed), events: log.events, recipients: snapshot.members)
        )
    }

    /// Ban a user from a group (a participant is removed first) or lift the ban.
    public static func banParticipant(
        _ ban: Command.BanParticipant, _ snapshot: ConversationSnapshot?, _ reads: CommandReads.Ban
    ) throws -> CommandPlan {
        let (snapshot, role) = try acting(snapshot, id: ban.conversationId, actor: ban.actor)
        let row = snapshot.row
        let participant = reads.participant
        try Safety.requireBan(
            actor: ban.actor, role: role, uid: ban.uid, target: participant?.role, type: row.conversation.type,
            roles: row.conversation.roles
        )
        if participant == nil, !reads.isUser { throw DomainError.uidNotFound(ban.uid) }
        var log = EventLog(row: row, now: ban.now, actor: ban.actor)
        var writes: [StoreWrite] = []
        var remaining = snapshot.members
        let outcome: ConversationBan
        if ban.banned {
            let (made, changed) = Safety.banned(by: ban, current: reads.current)
            outcome = made
            if changed {
                writes.append(.putBan(conversationPK: row.pk, made))
                // A participant is removed first, exactly as a removal does, then told why.
                if let participant {
                    writes.append(.deleteParticipant(conversationPK: row.pk, appId: row.appId, uid: ban.uid))
                    remaining.removeAll { $0 == ban.uid }
                    try log.append(.participantRemoved, .participantRemoved(participant))
                }
                try log.append(.participantBanned, .participantBanned(made))
                writes.append(
                    log.write(participantCount: participant.map { _ in row.conversation.participantCount - 1 }))
            }
        } else {
            guard let current = reads.current else { throw Safety.notBanned(ban.uid) }
            outcome = current
            writes.append(.liftBan(conversationPK: row.pk, uid: ban.uid))
            try log.append(.participantUnbanned, .participantUnbanned(current))
            writes.append(log.write(participantCount: nil))
        }
        // The banned user is told too: they are not (or no longer) a participant.
        return CommandPlan(
            writes: writes,
            result: CommandResult(
                outcome: .ban(outcome), events: log.events,
                recipients: remaining.contains(ban.uid) ? remaining : remaining + [ban.uid], participants: remaining
            )
        )
    }
}
