import ParleyProtocol

/// What several server nodes on one database share besides the data: a wake-up channel, signals that are not stored
/// (typing, presence, unread counts, profile updates, socket closes), and the directory of who is online where.
///
/// Implemented by `PostgresCluster` (LISTEN/NOTIFY, a node table with heartbeats, a presence table). A server without
/// a cluster link (SQLite) is a single node and delivers everything itself. See docs/ARCHITECTURE.md ("Several
/// nodes").
public protocol ClusterLink: Sendable {
    /// This node's id: fresh for every process, so a restarted node never inherits a dead one's state.
    var nodeId: String { get }

    /// Registers the node, listens for the other nodes, keeps the node's heartbeat and reaps dead nodes, until
    /// cancelled; then deregisters the node. What arrives goes to `handler`, one notice at a time, in commit order.
    func run(handler: @escaping @Sendable (ClusterNotice) async -> Void) async throws

    /// Sends a signal to every other node (best effort: a signal is not stored for nodes that are down).
    func broadcast(_ signal: ClusterSignal) async

    /// Durable events of a conversation with `afterSeq < seq <= throughSeq`, ascending, at most `limit`, each with
    /// the users who were its recipients: the participants at that point, and a removed participant for their removal.
    func routedEvents(appId: String, conversationId: String, afterSeq: Int64, throughSeq: Int64, limit: Int)
        async throws
        -> [RoutedEvent]

    /// Records that the user is online on this node; true when no other node had them online (they came online).
    func userOnline(appId: String, uid: String) async throws -> Bool
    /// ``userOnline(appId:uid:)`` for many users at once (a node's arrivals of one turn, thousands in a reconnection
    /// storm): one answer per user, in order.
    func usersOnline(_ users: [UserRef]) async throws -> [Bool]
    /// Records that the user left this node; true when no other live node has them (they went offline).
    func userOffline(appId: String, uid: String) async throws -> Bool
    /// Whether the user is online on any live node.
    func isOnline(appId: String, uid: String) async throws -> Bool
    /// Records, for ``hasSocketElsewhere(appId:uid:since:)``, when each user's last socket on this node closed
    /// (epoch ms, this node's clock; `nil`: a socket of theirs is open here again). Only users online here (between
    /// ``usersOnline(_:)`` and ``userOffline(appId:uid:)``) have a record; the others are ignored. A user registered
    /// by ``usersOnline(_:)`` counts as having a socket open until this says otherwise.
    func recordSocketsClosed(_ users: [UserRef], at closedAt: [Int64?]) async throws
    /// Whether another live node has a socket of the user open now, or had one open at `since` (epoch ms): a node
    /// that still counts the user online during its presence grace, with no socket, does not count.
    func hasSocketElsewhere(appId: String, uid: String, since: Int64) async throws -> Bool
}

extension ClusterLink {
    /// One user after the other.
    public func usersOnline(_ users: [UserRef]) async throws -> [Bool] {
        var answers: [Bool] = []
        for user in users { answers.append(try await userOnline(appId: user.appId, uid: user.uid)) }
        return answers
    }
}

/// A conversation's events committed together by one node: `fromSeq...throughSeq`.
public struct CommittedRange: Sendable, Hashable, Codable {
    public var appId: String
    public var conversationId: String
    public var fromSeq: Int64
    public var throughSeq: Int64

    public init(appId: String, conversationId: String, fromSeq: Int64, throughSeq: Int64) {
        self.appId = appId
        self.conversationId = conversationId
        self.fromSeq = fromSeq
        self.throughSeq = throughSeq
    }

    /// The ranges of a batch's events, one per conversation, in the order the conversations first appear.
    public static func of(_ events: some Sequence<StoredEvent>) -> [CommittedRange] {
        var ranges: [CommittedRange] = []
        var index: [String: Int] = [:]
        for stored in events {
            guard let conversationId = stored.event.conversationId, let seq = stored.event.seq else { continue }
            let key = stored.event.appId + "\u{0}" + conversationId
            if let at = index[key] {
                ranges[at].fromSeq = min(ranges[at].fromSeq, seq)
                ranges[at].throughSeq = max(ranges[at].throughSeq, seq)
            } else {
                index[key] = ranges.count
                ranges.append(
                    CommittedRange(
                        appId: stored.event.appId, conversationId: conversationId, fromSeq: seq, throughSeq: seq)
                )
            }
        }
        return ranges
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

/// Something that is not stored and that every node applies to its own connections.
public enum ClusterSignal: Sendable, Hashable, Codable {
    /// An event (JSON of ``Event``) for the connections of `uids`; with `presenceOf`, also for the app's connections
    /// that subscribed to every user's presence, except that user's own and those of `except` (who blocked them).
    case deliver(appId: String, uids: [String], presenceOf: String?, except: [String]? = nil, event: String)
    /// Closes the user's connections (those opened with `tokenIds`, or all when nil) with `code` and `reason`.
    case close(appId: String, uid: String, tokenIds: [String]?, code: UInt16, reason: String)
}

/// What a node hears from the cluster.
public enum ClusterNotice: Sendable {
    /// Another node committed events.
    case committed([CommittedRange])
    /// Another node sent a signal.
    case signal(ClusterSignal)
    /// This node reaped dead nodes: these users were online only there and are now offline. The node announces it.
    case wentOffline([UserRef])
    /// The notification channel was lost and is back: what was committed meanwhile was not announced to this node.
    case resumedAfterGap
    /// This node had been declared dead (it stalled for longer than the timeout) and is registered again: the users
    /// online here must be recorded again.
    case rejoined
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
