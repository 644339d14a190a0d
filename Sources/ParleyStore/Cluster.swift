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

/// A durable event with the users it goes to.
public struct RoutedEvent: Sendable {
    public var stored: StoredEvent
    public var recipients: [String]

    public init(stored: StoredEvent, recipients: [String]) {
        self.stored = stored
        self.recipients = recipients
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
