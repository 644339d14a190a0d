import ParleyProtocol

/// What the nodes of one deployment read from the database they share besides ``ParleyStore``: the truth that fills
/// a gap in what moved between them on NATS, and the claim that keeps a node without NATS alone on its database.
///
/// Implemented by `PostgresStore`. A SQLite server is a single node and has no use for it. See docs/ARCHITECTURE.md
/// ("Several nodes").
public protocol ClusterStore: Sendable {
    /// The deployment's id: made once in the database, the same for every node of it (its NATS subjects are named
    /// after it, so that two deployments sharing a NATS cluster do not hear each other).
    func deploymentId() async throws -> String

    /// Claims the database for this process until the claim is released or its connection ends: alone (`shared`
    /// false: a node without NATS, which cannot hear other nodes) or together with other nodes that share a NATS
    /// cluster (`shared` true).
    ///
    /// - Throws: ``DeploymentClaimError`` when the database is claimed the other way.
    func claimDeployment(shared: Bool) async throws -> any DeploymentClaim

    /// Durable events of a conversation with `afterSeq < seq <= throughSeq`, ascending, at most `limit`, each with the
    /// users who were its recipients: the participants at that point, and a removed participant for their removal.
    func routedEvents(appId: String, conversationId: String, afterSeq: Int64, throughSeq: Int64, limit: Int)
        async throws -> [RoutedEvent]

    /// The last sequence number of each of `conversations` (those that do not exist are left out).
    func lastSeqs(_ conversations: [ConversationRef]) async throws -> [ConversationRef: Int64]

    /// Each user's membership changes after their position (`afterUserSeq`), in order: at most `limit` in all; users
    /// whose changes did not all fit are listed in the answer's `incomplete`.
    func membershipChanges(_ users: [UserRef: Int64], limit: Int) async throws -> MembershipChanges
}

/// A held claim on a deployment's database (``ClusterStore/claimDeployment(shared:)``).
public protocol DeploymentClaim: Sendable {
    /// Whether the claim still holds; false once its connection ended (the database restarted, say).
    func isHeld() async -> Bool
    /// Gives the claim up.
    func release() async
}

/// Why a node may not serve a database.
public struct DeploymentClaimError: Error, Sendable, CustomStringConvertible {
    /// Whether the node that holds it runs without NATS (alone) rather than with it.
    public var heldAlone: Bool
    public var description: String

    public init(heldAlone: Bool, description: String) {
        self.heldAlone = heldAlone
        self.description = description
    }
}

/// Users' membership changes (``ClusterStore/membershipChanges(_:limit:)``).
public struct MembershipChanges: Sendable {
    public var changes: [UserRef: [MembershipChange]]
    /// Users with more changes than fitted.
    public var incomplete: Set<UserRef>

    public init(changes: [UserRef: [MembershipChange]], incomplete: Set<UserRef>) {
        self.changes = changes
        self.incomplete = incomplete
    }
}

/// An event, as its JSON (what sockets get), its facts (what the publish path reads) and the users it goes to.
public struct RoutedEvent: Sendable {
    public var facts: EventFacts
    /// The JSON encoding of the event, as sent inside an event frame.
    public var json: [UInt8]
    public var recipients: [String]

    public init(facts: EventFacts, json: [UInt8], recipients: [String]) {
        self.facts = facts
        self.json = json
        self.recipients = recipients
    }

    public init(stored: StoredEvent, recipients: [String]) {
        self.init(facts: EventFacts(stored.event), json: stored.json, recipients: recipients)
    }
}

/// What the publish path reads of an event besides its JSON: where it belongs, who made it, and what it changes in
/// unread counts and in the conversations a node follows. Small enough to travel between nodes beside the JSON, so
/// that the node receiving an event never decodes it (Foundation's decoder cost ~50 µs per message there).
public struct EventFacts: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        case messageSent
        /// A read receipt: `uid` read up to `seq`.
        case messageRead(uid: String, seq: Int64)
        case messageDeleted(sender: String)
        case participantAdded(uid: String)
        case participantRemoved(uid: String)
        case conversationCreated
        case conversationDeleted
        case conversationUndeleted
        /// Anything else (edits, reactions, participants changed, ...).
        case other
    }

    public var appId: String
    public var conversationId: String?
    public var seq: Int64?
    /// Who made it (`context.createdBy`).
    public var actor: String?
    public var kind: Kind

    public init(appId: String, conversationId: String?, seq: Int64?, actor: String?, kind: Kind) {
        self.appId = appId
        self.conversationId = conversationId
        self.seq = seq
        self.actor = actor
        self.kind = kind
    }

    public init(_ event: Event) {
        let kind: Kind
        switch event.payload {
        // A silent message moves nobody's count: it passes like an edit.
        case .messageSent(let message): kind = message.silent == true ? .other : .messageSent
        case .messageRead(let receipt): kind = .messageRead(uid: receipt.uid, seq: receipt.seq)
        case .messageDeleted(let message): kind = .messageDeleted(sender: message.sender)
        case .participantAdded(let participant): kind = .participantAdded(uid: participant.uid)
        case .participantRemoved(let participant): kind = .participantRemoved(uid: participant.uid)
        case .conversationCreated: kind = .conversationCreated
        case .conversationDeleted: kind = .conversationDeleted
        case .conversationUndeleted: kind = .conversationUndeleted
        default: kind = .other
        }
        self.init(
            appId: event.appId, conversationId: event.conversationId, seq: event.seq, actor: event.context.createdBy,
            kind: kind)
    }
}

/// A user of an app.
public struct UserRef: Sendable, Hashable {
    public var appId: String
    public var uid: String

    public init(appId: String, uid: String) {
        self.appId = appId
        self.uid = uid
    }
}

/// A conversation of an app.
public struct ConversationRef: Sendable, Hashable {
    public var appId: String
    public var conversationId: String

    public init(appId: String, conversationId: String) {
        self.appId = appId
        self.conversationId = conversationId
    }
}
