import ParleyProtocol

/// What a command does once its decision is made: the rows to write, in order, and what it answers.
///
/// A decision (``CommandDecisions``) reads nothing and writes nothing: given the rows the store read, it returns a
/// plan or throws the refusal (a ``DomainError``). A store carries a plan out with one function, the only place that
/// turns a ``StoreWrite`` into SQL.
public struct CommandPlan: Sendable {
    public var writes: [StoreWrite]
    public var result: CommandResult

    public init(writes: [StoreWrite] = [], result: CommandResult) {
        self.writes = writes
        self.result = result
    }
}

/// One change of stored rows, as every store makes it.
public enum StoreWrite: Sendable {
    /// New participants of a conversation; each starts with everything so far delivered and read (its read message
    /// count is the conversation's message count).
    case insertParticipants(conversationPK: Int64, [Participant])
    /// A participant leaves, is removed or is banned: the row goes, with their unread mentions of the conversation.
    case deleteParticipant(conversationPK: Int64, appId: String, uid: String)
    /// A participant's role and mute change (``Participant/role``, ``Participant/muted``, ``Participant/mutedUntil``).
    case updateParticipant(conversationPK: Int64, Participant)
    /// A participant's delivered and read positions move (with the count of messages read up to `read`); with
    /// `readMoved`, the mentions up to `read` are no longer unread.
    case moveReceipt(conversationPK: Int64, appId: String, uid: String, delivered: Int64, read: Int64, readMoved: Bool)
    /// A conversation's details change: name, description, visibility, metadata, roles, deletion, `updatedAt`.
    case updateConversation(conversationPK: Int64, Conversation)
    /// Durable events appended, the users' own streams extended, the conversation's position moved.
    case appendEvents(EventAppend)
    /// The bodies of the message's `sent`, `update` and `delete` events become `message`
    /// (``MessageLifecycle/rewritten(_:to:)``).
    case rewriteMessage(conversationPK: Int64, Message)
    /// The message's unread mentions are recorded again from ``Message/mentions``, for each mentioned participant who
    /// has not read that far.
    case replaceMentions(conversationPK: Int64, appId: String, Message)
    /// The message takes these uploads.
    case attachFiles(appId: String, ids: [String], messageId: String)
    /// These uploads leave their message and are removed (the sweeper deletes their bytes).
    case removeFiles(appId: String, ids: [String], now: Int64)
    /// What hung on a deleted message goes with it: reactions, its pin, unread mentions, pushes not sent yet; it
    /// counts as deleted in the conversation's message counts.
    case forgetMessage(conversationPK: Int64, appId: String, seq: Int64, messageId: String, messageIndex: Int64)
    case addReaction(conversationPK: Int64, messageSeq: Int64, key: String, uid: String, at: Int64)
    case removeReaction(conversationPK: Int64, messageSeq: Int64, key: String, uid: String)
    /// The message's events no longer name `uid`, its sender: no `createdBy`, no actor, no client message id.
    case eraseSender(conversationPK: Int64, messageId: String, uid: String)
    case pinMessage(conversationPK: Int64, MessagePin)
    case unpinMessage(conversationPK: Int64, messageSeq: Int64)
    /// A ban made or replaced.
    case putBan(conversationPK: Int64, ConversationBan)
    case liftBan(conversationPK: Int64, uid: String)
}

/// A command's durable events (numbered from the conversation's `last_seq`, read under its lock), the membership
/// changes they record, and the conversation's new position.
public struct EventAppend: Sendable {
    public var conversationPK: Int64
    public var appId: String
    public var events: [NewEvent]
    public var memberships: [MembershipRecord]
    /// The conversation's last sequence number after these events.
    public var lastSeq: Int64
    /// The conversation's new last activity; nil when it does not move (a change of an existing message does not
    /// move the conversation up the lists).
    public var activityAt: Int64?
    /// The conversation's participant count when it changed.
    public var participantCount: Int?
}

/// One durable event as a row.
public struct NewEvent: Sendable {
    public var seq: Int64
    public var name: EventName
    /// nil: the app's server.
    public var actor: String?
    public var createdAt: Int64
    /// The message an edit or a deletion is about: found with the message's other events, to be rewritten by a
    /// later change.
    public var messageId: String?
    public var json: [UInt8]
}

/// A join or a departure, for the user's own stream: recorded at the user's next position.
public struct MembershipRecord: Sendable {
    public var uid: String
    public var joined: Bool
    /// The conversation event that made the change (for the first members, the creation).
    public var seq: Int64
}

/// Numbers a command's durable events from the conversation's last sequence number and encodes them once.
public struct EventLog: Sendable {
    public let appId: String
    public let conversationId: String
    public let conversationPK: Int64
    public private(set) var lastSeq: Int64
    public let now: Int64
    /// Who acts; nil for the app's own server.
    public let actor: String?
    /// The sequence number recorded for joins in the members' streams; nil for the participantAdded event itself.
    public var joinSeq: Int64?
    public private(set) var events: [StoredEvent] = []
    private var rows: [NewEvent] = []
    private var memberships: [MembershipRecord] = []

    public init(row: ConversationRow, now: Int64, actor: String?) {
        self.appId = row.appId
        self.conversationId = row.conversation.id
        self.conversationPK = row.pk
        self.lastSeq = row.conversation.lastSeq
        self.now = now
        self.actor = actor
    }

    public mutating func append(_ name: EventName, _ payload: EventPayload) throws {
        lastSeq += 1
        let event = Event(
            id: Event.durableID(conversationId: conversationId, seq: lastSeq), appId: appId, name: name,
            conversationId: conversationId, seq: lastSeq, timestamp: now, context: EventContext(createdBy: actor),
            payload: payload
        )
        let json = try WireJSON.encode(event)
        let messageId: String?
        switch payload {
        case .messageUpdated(let message), .messageDeleted(let message): messageId = message.id
        default: messageId = nil
        }
        rows.append(
            NewEvent(seq: lastSeq, name: name, actor: actor, createdAt: now, messageId: messageId, json: json))
        events.append(StoredEvent(event: event, json: json))
        switch payload {
        case .participantAdded(let participant):
            memberships.append(MembershipRecord(uid: participant.uid, joined: true, seq: joinSeq ?? lastSeq))
        case .participantRemoved(let participant):
            memberships.append(MembershipRecord(uid: participant.uid, joined: false, seq: lastSeq))
        default: break
        }
    }

    /// The write of these events; with `activity`, the conversation's last activity moves to now.
    public func write(participantCount: Int?, activity: Bool = true) -> StoreWrite {
        .appendEvents(
            EventAppend(
                conversationPK: conversationPK, appId: appId, events: rows, memberships: memberships,
                lastSeq: lastSeq, activityAt: activity ? now : nil, participantCount: participantCount
            )
        )
    }
}
