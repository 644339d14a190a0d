import ParleyProtocol

/// Every command's decision, once for every store: given what the store read in the command's transaction, a
/// ``CommandPlan`` (the rows to write, the events, the answer) or a refusal thrown as a ``DomainError``.
///
/// Decisions read and write nothing and keep no state: a store reads (``ConversationSnapshot``, ``CommandReads``),
/// decides here, and carries the plan out. Sends are decided in batches by each store's send path, with the same
/// rules (``ConversationRules``, ``Safety``, ``MessageLifecycle``, ``Attachments``).
public enum CommandDecisions {
    // MARK: Who acts

    /// The conversation as `viewer` may see it: not deleted, and public or theirs; otherwise
    /// `ERR_CONVERSATION_NOT_FOUND` (a private conversation is not told apart from one that does not exist).
    public static func visible(_ snapshot: ConversationSnapshot?, id: String) throws -> ConversationSnapshot {
        guard let snapshot, snapshot.row.deletedAt == nil,
            snapshot.actor != nil || snapshot.row.conversation.isPublic
        else { throw DomainError.conversationNotFound(id) }
        return snapshot
    }

    /// A visible conversation the actor participates in; `ERR_NOT_A_PARTICIPANT` for a public one they are not in.
    public static func participation(_ snapshot: ConversationSnapshot?, id: String) throws
        -> (ConversationSnapshot, Participant)
    {
        let snapshot = try visible(snapshot, id: id)
        guard let actor = snapshot.actor else { throw DomainError(.notAParticipant, "Join the conversation first.") }
        return (snapshot, actor)
    }

    /// The conversation `actor` acts on, as a participant (with their role); with no actor, the app's server, on any
    /// conversation of the app that is not deleted (no role), or (`orDeleted`) deleted too.
    public static func acting(_ snapshot: ConversationSnapshot?, id: String, actor: String?, orDeleted: Bool = false)
        throws -> (ConversationSnapshot, ParticipantRole?)
    {
        if actor != nil {
            let (snapshot, participant) = try participation(snapshot, id: id)
            return (snapshot, participant.role)
        }
        guard let snapshot, snapshot.row.deletedAt == nil || orDeleted else {
            throw DomainError.conversationNotFound(id)
        }
        return (snapshot, nil)
    }

    static func requireGroup(_ row: ConversationRow, _ message: String) throws {
        guard row.conversation.type == .group else { throw DomainError(.forbidden, message) }
    }

    /// An answer that changes nothing.
    static func unchanged(_ outcome: CommandResult.Outcome, _ snapshot: ConversationSnapshot) -> CommandPlan {
        CommandPlan(result: CommandResult(outcome: outcome, events: [], recipients: snapshot.members))
    }

    // MARK: Conversations

    /// A conversation to insert: the store gives it its primary key.
    public struct NewConversation: Sendable {
        public var appId: String
        /// The key that makes a direct conversation unique for its pair (``Command/CreateConversation/directKey``).
        public var directKey: String?
        public var conversation: Conversation
    }

    public enum CreateDecision: Sendable {
        /// The pair's direct conversation exists: it is the answer, and nothing is written.
        case existing(CommandResult)
        /// Insert the conversation, then carry out ``created(_:row:)``.
        case insert(NewConversation)
    }

    /// Create a group, or get-or-create the direct conversation of two users.
    public static func createConversation(_ create: Command.CreateConversation, _ reads: CommandReads.Create) throws
        -> CreateDecision
    {
        let others = Array(Set(create.participants.filter { $0 != create.creator })).sorted()
        if create.type == .direct {
            guard create.participants.count == 1, others.count == 1 else {
                throw DomainError(.badRequest, "A direct conversation has exactly one other participant.")
            }
        }
        let roles = try ConversationRules.initialRoles(type: create.type, change: create.roles)
        if let missing = others.first(where: { !reads.knownUsers.contains($0) }) {
            throw DomainError.uidNotFound(missing)
        }
        if let (snapshot, participants) = reads.existing { return .existing(existingDirect(snapshot, participants)) }
        if create.type == .direct { try Safety.requireNoBlock(actor: create.creator, blockers: reads.blockers) }
        return .insert(
            NewConversation(
                appId: create.appId, directKey: create.directKey,
                conversation: Conversation(
                    id: create.newId, type: create.type, name: create.name, description: create.description,
                    isPublic: create.type == .group && create.isPublic, metadata: create.metadata,
                    createdBy: create.creator, createdAt: create.now, updatedAt: create.now, lastSeq: 0,
                    participantCount: 0, roles: roles
                )
            )
        )
    }

    /// The answer of a create that found the pair's direct conversation.
    public static func existingDirect(_ snapshot: ConversationSnapshot, _ participants: [Participant])
        -> CommandResult
    {
        var conversation = snapshot.row.conversation
        conversation.participants = participants
        return CommandResult(
            outcome: .conversation(conversation, created: false), events: [], recipients: snapshot.members)
    }

    /// The members and events of a conversation just inserted as `row`.
    public static func created(_ create: Command.CreateConversation, row: ConversationRow) throws -> CommandPlan {
        let others = Array(Set(create.participants.filter { $0 != create.creator })).sorted()
        let creatorRole: ParticipantRole = create.type == .group ? .owner : .member
        let members = [(create.creator, creatorRole)] + others.map { ($0, ParticipantRole.member) }
        let seen = row.conversation.lastSeq
        let participants = members.map {
            Participant(uid: $0.0, role: $0.1, joinedAt: create.now, deliveredSeq: seen, readSeq: seen)
        }
        var log = EventLog(row: row, now: create.now, actor: create.creator)
        var conversation = row.conversation
        conversation.participantCount = members.count
        conversation.lastSeq = seen + Int64(1 + members.count)
        conversation.participants = participants
        try log.append(.conversationCreate, .conversationCreated(conversation))
        // Its first members' streams start at the creation, so that a replay includes it.
        log.joinSeq = log.lastSeq
        for participant in participants { try log.append(.participantAdded, .participantAdded(participant)) }
        return CommandPlan(
            writes: [
                .insertParticipants(conversationPK: row.pk, participants),
                log.write(participantCount: members.count),
            ],
            result: CommandResult(
                outcome: .conversation(conversation, created: true), events: log.events,
                recipients: members.map(\.0)
            )
        )
    }

    /// Change a group's details (owner or admin).
    public static func updateConversation(_ update: Command.UpdateConversation, _ snapshot: ConversationSnapshot?)
        throws -> CommandPlan
    {
        let (snapshot, actor) = try participation(snapshot, id: update.conversationId)
        let row = snapshot.row
        try requireGroup(row, "A direct conversation has no details to change.")
        guard actor.role.canUpdateConversation else {
            throw DomainError(.forbidden, "Only the owner or an admin can change the conversation.")
        }
        var conversation = row.conversation
        if let name = update.update.name { conversation.name = name }
        if let description = update.update.description { conversation.description = description }
        if let isPublic = update.update.isPublic { conversation.isPublic = isPublic }
        if let metadata = update.update.metadata { conversation.metadata = metadata }
        if let roles = update.update.roles {
            try ConversationRules.requireChangeRoles(actor.role, type: row.conversation.type)
            conversation.roles = conversation.roles.applying(roles)
        }
        conversation.updatedAt = update.now
        return try publish(conversation, .conversationUpdate, snapshot, actor: update.actor, now: update.now)
    }

    /// Delete (`deleted`) or restore a group (its owner).
    public static func setDeleted(
        _ deleted: Bool, _ action: Command.ConversationAction, _ snapshot: ConversationSnapshot?
    ) throws -> CommandPlan {
        guard let snapshot, let role = snapshot.actor?.role else {
            throw DomainError.conversationNotFound(action.conversationId)
        }
        let row = snapshot.row
        // A deleted conversation is hidden from its participants, except from the owner who may restore it.
        if row.deletedAt != nil && !(role.canDeleteConversation && !deleted) {
            throw DomainError.conversationNotFound(action.conversationId)
        }
        try requireGroup(row, "A direct conversation cannot be deleted.")
        guard role.canDeleteConversation else {
            throw DomainError(.forbidden, "Only the owner can \(deleted ? "delete" : "restore") the conversation.")
        }
        guard (row.deletedAt != nil) != deleted else {
            return unchanged(.conversation(row.conversation, created: false), snapshot)
        }
        var conversation = row.conversation
        conversation.deletedAt = deleted ? action.now : nil
        conversation.updatedAt = action.now
        return try publish(
            conversation, deleted ? .conversationDelete : .conversationUndelete, snapshot, actor: action.actor,
            now: action.now
        )
    }

    /// Writes the conversation's details and appends one event carrying it as it is now.
    static func publish(
        _ conversation: Conversation, _ name: EventName, _ snapshot: ConversationSnapshot, actor: String, now: Int64
    ) throws -> CommandPlan {
        let row = snapshot.row
        var log = EventLog(row: row, now: now, actor: actor)
        var published = conversation
        published.lastSeq = row.conversation.lastSeq + 1
        let payload: EventPayload
        switch name {
        case .conversationDelete: payload = .conversationDeleted(published)
        case .conversationUndelete: payload = .conversationUndeleted(published)
        default: payload = .conversationUpdated(published)
        }
        try log.append(name, payload)
        return CommandPlan(
            writes: [.updateConversation(conversationPK: row.pk, conversation), log.write(participantCount: nil)],
            result: CommandResult(
                outcome: .conversation(published, created: false), events: log.events, recipients: snapshot.members
            )
        )
    }
}
