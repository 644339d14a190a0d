import Logging
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore
import ServiceLifecycle

/// Online/offline state of users, from their live connections.
///
/// A user is online from their first connection; when their last connection closes they stay online for
/// ``ServerConfiguration/presenceGrace`` and only then go offline, so a client that reconnects quickly does not make
/// presence flap. Changes (`presence.update`) go to the users who share a conversation with them and to the
/// connections that subscribed to every user's presence. Handled one at a time, in order, by ``run()``.
///
/// Connections arrive in batches: ``connected(_:)`` only records the user, and the tracker's task is woken once per
/// turn of the event loop that saw the first of them; it then takes everyone who connected meanwhile and decides who
/// came online. Woken for every connection, presence cost ~40 µs of the server's CPU per connection in
/// `parley-bench connect` (docs/BENCHMARKS.md).
///
/// Deciding reads nothing from the database; announcing does (the contacts of the users who changed, and who blocked
/// them), so the announcements queue in the order decided and a second task sends them, everything queued in one read.
/// A slow database then delays what contacts are told, never the decisions, nor the cluster directory that other
/// nodes answer presence and push questions from: during a connection storm with the database's pool busy, one read
/// per changed user had made the tracker 11 s late.
///
/// With several nodes, "online" is per node here and ``NATSCluster`` keeps the directory of which nodes have the user
/// (``ClusterDirectory``, in memory): a node announces "online" only when no other node had the user, "offline" only
/// when no other node has them, and the users of a node that died or left are announced offline by one live node.
final class PresenceTracker: Service {
    typealias UserKey = ParleyServer.UserKey

    private enum Change: Sendable {
        /// Users connected (``State/arrivals``).
        case arrived
        /// Users' last sockets here closed (``State/departures``).
        case departed
        case expired(UserKey)
        /// Users on no node any more (their node died or left); `announce`: this node announces them.
        case lostWithNode([UserKey], announce: Bool)
    }

    private struct State {
        var connections: [UserKey: Int] = [:]
        var online: Set<UserKey> = []
        var lastSeen: [UserKey: Int64] = [:]
        /// When each user's last socket here closed (epoch ms), for ``hasLiveSocket(appId:uid:since:)``.
        var socketClosedAt: [UserKey: Int64] = [:]
        /// A user per connection opened since the tracker last looked, in order.
        var arrivals: [UserKey] = []
        /// A user per last socket closed since the tracker last looked.
        var departures: [UserKey] = []
        /// Users online here whose row in the cluster directory says their sockets here are closed
        /// (``recordSockets(_:)``).
        var closedInDirectory: Set<UserKey> = []
        /// Changes decided and not yet announced, in order (``announceQueued()``).
        var unannounced: [(Presence, UserKey)] = []
    }

    /// Closing times older than this are forgotten once the map is large.
    static let socketClosedMemory: Int64 = 10 * 60 * 1000

    private let store: any ParleyStore
    private let relay: Relay
    private let cluster: NATSCluster?
    private let grace: Duration
    private let timers: FixedDelayTimers<UserKey>
    private let logger: Logger
    private let metrics: ServerMetrics
    private let time: ServerClock
    private let state = NIOLockedValueBox(State())
    private let changes: AsyncStream<Change>
    private let sink: AsyncStream<Change>.Continuation
    /// Wakes ``announceQueued()`` when ``State/unannounced`` has something (one wake pending at most).
    private let announcements: AsyncStream<Void>
    private let announcementsSink: AsyncStream<Void>.Continuation

    init(
        store: any ParleyStore, relay: Relay, cluster: NATSCluster?, grace: Duration, time: ServerClock,
        metrics: ServerMetrics = .discarding, logger: Logger
    ) {
        self.metrics = metrics
        self.store = store
        self.relay = relay
        self.cluster = cluster
        self.grace = grace
        self.timers = FixedDelayTimers(delay: grace, timeline: time.timeline)
        self.time = time
        self.logger = logger
        (changes, sink) = AsyncStream.makeStream(of: Change.self)
        (announcements, announcementsSink) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// One app's users online here (a walk of the set: for the operator's figures, not a hot path).
    func onlineCount(appId: String) -> Int {
        state.withLockedValue { state in state.online.reduce(0) { $0 + ($1.appId == appId ? 1 : 0) } }
    }

    /// Users with a connection here, and users online here (``ServerSnapshot``).
    var counts: (connected: Int, online: Int) {
        state.withLockedValue { ($0.connections.count, $0.online.count) }
    }

    func connected(_ connection: ServerConnection) {
        let key = UserKey(appId: connection.principal.appId, uid: connection.principal.uid)
        let first = state.withLockedValue { state -> Bool in
            state.connections[key, default: 0] += 1
            state.arrivals.append(key)
            return state.arrivals.count == 1
        }
        // The tracker looks once the loop's turn is over, at everyone who connected by then.
        guard first else { return }
        let sink = self.sink
        connection.socket.eventLoop.execute { sink.yield(.arrived) }
    }

    func disconnected(_ connection: ServerConnection) {
        let key = UserKey(appId: connection.principal.appId, uid: connection.principal.uid)
        let now = time.epochMilliseconds()
        let tracksSockets = cluster != nil
        let (last, firstDeparture) = state.withLockedValue { state -> (Bool, Bool) in
            let remaining = (state.connections[key] ?? 1) - 1
            state.connections[key] = remaining > 0 ? remaining : nil
            guard remaining <= 0 else { return (false, false) }
            if state.socketClosedAt.count >= 100_000 {
                state.socketClosedAt = state.socketClosedAt.filter { now - $0.value < Self.socketClosedMemory }
            }
            state.socketClosedAt[key] = now
            guard tracksSockets else { return (true, false) }
            state.departures.append(key)
            return (true, state.departures.count == 1)
        }
        guard last else { return }
        timers.schedule(key)
        // With several nodes, the directory learns it once the loop's turn is over, for everyone who left by then.
        guard firstDeparture else { return }
        let sink = self.sink
        connection.socket.eventLoop.execute { sink.yield(.departed) }
    }

    /// Users on no node any more (their node died or left); with `announce`, this node announces them offline (those
    /// not online here).
    func lostWithNode(_ users: [UserKey], announce: Bool) {
        sink.yield(.lostWithNode(users, announce: announce))
    }

    /// A presence change made on another node: remembered for last-seen times.
    func remoteChange(appId: String, _ event: Event) {
        guard case .presenceUpdated(let presence) = event.payload, !presence.online, let lastSeen = presence.lastSeenAt
        else { return }
        state.withLockedValue { $0.lastSeen[UserKey(appId: appId, uid: presence.uid)] = lastSeen }
    }

    /// A user's presence now (on any node).
    func presence(appId: String, uid: String) async -> Presence {
        let key = UserKey(appId: appId, uid: uid)
        let (here, lastSeen) = state.withLockedValue { state in
            (state.online.contains(key) || state.connections[key] != nil, state.lastSeen[key])
        }
        let online = here || (cluster?.isOnlineElsewhere(key) ?? false)
        return Presence(uid: uid, online: online, lastSeenAt: online ? nil : lastSeen)
    }

    /// Whether the user had a live socket at `since` (epoch ms) or has one now: here, or (with several nodes) on
    /// another node (``NATSCluster/hasSocketElsewhere(_:since:)``). A socket that closed after `since` counts
    /// (it carried what happened at `since`); a presence grace does not (a user whose last socket closed before has
    /// none), on this node or another.
    func hasLiveSocket(appId: String, uid: String, since: Int64) async throws -> Bool {
        let key = UserKey(appId: appId, uid: uid)
        let here = state.withLockedValue { state in
            state.connections[key] != nil || (state.socketClosedAt[key].map { $0 >= since } ?? false)
        }
        if here { return true }
        return cluster?.hasSocketElsewhere(key, since: since) ?? false
    }

    /// Decides in one task and announces in another; at shutdown, what was decided is still announced.
    func run() async throws {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.announceQueued() }
            await timers.runInOrder(changes, sink: sink, expired: { .expired($0) }, handle: { self.handle($0) })
            announcementsSink.finish()
        }
    }

    private func handle(_ change: Change) {
        switch change {
        case .arrived:
            var arrivals: [UserKey] = []
            state.withLockedValue { swap(&arrivals, &$0.arrivals) }
            var inserted: [UserKey] = []
            for key in arrivals {
                // Back within the grace period: no offline, no new online.
                timers.cancel(key)
                let (isNew, connected) = state.withLockedValue { state in
                    (state.online.insert(key).inserted, state.connections[key] != nil)
                }
                // Its connection closed before this turn (a client that connects and leaves at once): the grace that
                // `disconnected` started was just cancelled, or ran out before the user was online, so it starts
                // again; without this the user stayed online for good.
                if !connected { timers.schedule(key) }
                if isNew { inserted.append(key) }
            }
            var cameOnline = inserted
            if let cluster, !inserted.isEmpty {
                // Online on another node already: nothing changes for anyone. One announcement for the whole turn.
                let answers = cluster.usersOnline(inserted)
                cameOnline = zip(inserted, answers).filter(\.1).map(\.0)
            }
            // Back within the grace (announced closed), or gone again already (announced open).
            recordSockets(arrivals)
            publish(cameOnline.map { (Presence(uid: $0.uid, online: true), $0) })
        case .expired(let key):
            let now = time.epochMilliseconds()
            let wentOffline = state.withLockedValue { state -> Bool in
                guard state.connections[key] == nil, state.online.remove(key) != nil else { return false }
                state.lastSeen[key] = now
                // `userOffline` removes the record.
                state.closedInDirectory.remove(key)
                return true
            }
            guard wentOffline else { return }
            // Still online on another node: nothing changes for anyone.
            if let cluster, !cluster.userOffline(key) { return }
            publish([(Presence(uid: key.uid, online: false, lastSeenAt: now), key)])
        case .lostWithNode(let keys, let announce):
            let now = time.epochMilliseconds()
            // Online here again (the clients of a node that left reconnected here): nothing to announce.
            let gone = state.withLockedValue { state in
                keys.filter { key in
                    guard !state.online.contains(key) else { return false }
                    state.lastSeen[key] = now
                    return true
                }
            }
            guard announce else { return }
            publish(gone.map { (Presence(uid: $0.uid, online: false, lastSeenAt: now), $0) })
        case .departed:
            var departures: [UserKey] = []
            state.withLockedValue { swap(&departures, &$0.departures) }
            recordSockets(departures)
        }
    }

    /// With several nodes, brings the other nodes' record of this node's sockets in line with them for `keys`: a user
    /// online here with no socket here is announced with the time their last one closed, one with a socket again as
    /// open (``NATSCluster/recordSockets(_:)``), so that another node's push looks at sockets, not at this node's
    /// presence grace. Only what differs from what was announced goes out, in one announcement. Every change of a
    /// user's sockets comes back here (as an arrival or a departure) after it, so the last announcement is the truth.
    private func recordSockets(_ keys: some Sequence<UserKey>) {
        guard let cluster else { return }
        let changes = state.withLockedValue { state -> [(UserKey, Int64?)] in
            var changes: [(UserKey, Int64?)] = []
            for key in Set(keys) where state.online.contains(key) {
                let closedAt =
                    state.connections[key] == nil ? state.socketClosedAt[key] ?? time.epochMilliseconds() : nil
                guard (closedAt != nil) != state.closedInDirectory.contains(key) else { continue }
                if closedAt != nil {
                    state.closedInDirectory.insert(key)
                } else {
                    state.closedInDirectory.remove(key)
                }
                changes.append((key, closedAt))
            }
            return changes
        }
        cluster.recordSockets(changes)
    }

    /// Queues changes for ``announceQueued()``, in the order decided.
    private func publish(_ changes: [(Presence, UserKey)]) {
        metrics.presenceChanges.increment(by: changes.count)
        guard !changes.isEmpty else { return }
        state.withLockedValue { $0.unannounced += changes }
        announcementsSink.yield()
    }

    /// Announces what ``publish(_:)`` queued, everything queued at once, until the tracker stops.
    private func announceQueued() async {
        for await _ in announcements {
            var changes: [(Presence, UserKey)] = []
            state.withLockedValue { swap(&changes, &$0.unannounced) }
            await announce(changes)
        }
        var rest: [(Presence, UserKey)] = []
        state.withLockedValue { swap(&rest, &$0.unannounced) }
        await announce(rest)
    }

    /// Announces each change to the user's contacts and to the subscribers of every user's presence; the contacts and
    /// (when there may be subscribers) the blockers of all of them read in one go each.
    private func announce(_ changes: [(Presence, UserKey)]) async {
        guard !changes.isEmpty else { return }
        let users = changes.map { UserRef(appId: $0.1.appId, uid: $0.1.uid) }
        let contacts: [[String]]
        do {
            contacts = try await store.contacts(of: users)
        } catch {
            logger.warning("Presence: contacts unavailable", metadata: ["error": "\(error)"])
            contacts = Array(repeating: [], count: changes.count)
        }
        // Contacts leave out those who blocked the user; so do the subscribers of every user's presence. When they
        // cannot be read, the contacts (read without them) still get the change, the subscribers not.
        let asked = Array(Set(users.filter { relay.mayHavePresenceSubscribers(appId: $0.appId) }))
        var blockers: [UserRef: [String]] = [:]
        var toSubscribers = true
        if !asked.isEmpty {
            do {
                blockers = Dictionary(uniqueKeysWithValues: zip(asked, try await store.blockers(of: asked)))
            } catch {
                logger.warning("Presence: blocks unavailable", metadata: ["error": "\(error)"])
                toSubscribers = false
            }
        }
        let now = time.epochMilliseconds()
        for ((presence, key), (user, contacts)) in zip(changes, zip(users, contacts)) {
            relay.deliver(
                appId: key.appId, actor: key.uid, timestamp: now, payload: .presenceUpdated(presence), to: contacts,
                presenceOf: toSubscribers ? key.uid : nil, except: blockers[user] ?? []
            )
        }
    }
}
