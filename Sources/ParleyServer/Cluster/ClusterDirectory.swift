/// Who is online on the other nodes of the deployment, and which nodes are alive: kept in memory from what the nodes
/// announce on NATS (``ClusterWire``), with no database write per arrival.
///
/// Every node announces its own users: a numbered stream of changes (a user online here, their sockets here closed or
/// open again, offline here) and a heartbeat that repeats the stream's last number, says which of the other nodes'
/// announcements it has applied (its *acks*) and lists the apps where it has connections that receive every user's
/// presence. A node that finds a number missing in another node's stream (an announcement lost, or a node it hears for
/// the first time in the middle of its stream) asks it for a snapshot and ignores its changes until the snapshot comes.
///
/// Pure: time comes in as an argument (the node's ``Timeline``), and what to do comes back as ``Action``s that
/// ``NATSCluster`` carries out. Decisions made here:
/// - **Alive.** A node silent for `timeout` is dead (checked by ``tick(now:)`` while this node is connected to NATS); a
///   node that says goodbye stays for `leaveGrace` (its users' clients reconnect elsewhere meanwhile), then goes.
/// - **Online elsewhere.** ``isOnline(_:)`` and ``hasSocket(_:since:)`` answer from the other nodes' records.
/// - **Who announces offline.** The node a user leaves announces "offline" only when no other node has them. Two
///   nodes the user leaves at the same moment may each still see the other: each then says in its change that it did
///   not announce (*declined*), and once the user is on no node, the node with the smallest id among those that
///   declined announces. The users of a node that died or left are announced by the live node with the smallest id.
///   Every node applies the same changes, so they agree on who announces.
/// - **Settled.** ``acked(through:)``: every live node has applied this node's announcements up to a number, so
///   every NATS subscription this node made before publishing it is known to their servers too (a NATS route carries
///   a subscription's interest before the messages published after it).
struct ClusterDirectory {
    typealias NodeID = String

    /// A user's record on a node.
    enum UserState: Equatable, Sendable {
        /// Online there, with a socket open.
        case open
        /// Online there (its presence grace), every socket there closed since `at` (epoch ms, that node's clock).
        case closed(at: Int64)
    }

    /// One change a node announces about one of its users.
    enum Change: Equatable, Sendable {
        /// Came online on the node, a socket open.
        case online(UserKey)
        /// Their last socket on the node closed at `at` (epoch ms); still online there for the grace.
        case socketsClosed(UserKey, at: Int64)
        /// A socket of theirs is open on the node again (back within the grace).
        case socketsOpen(UserKey)
        /// Offline on the node; `announced`: the node announced them offline everywhere.
        case offline(UserKey, announced: Bool)
    }

    /// What the node must do.
    enum Action: Equatable, Sendable {
        /// Ask `node` for a snapshot of its users.
        case requestSnapshot(NodeID)
        /// These users (of `app`s) are on no other node any more; `announce`: this node announces them offline (when
        /// they are not online here).
        case usersGone([UserKey], announce: Bool)
        /// A node was heard for the first time.
        case nodeJoined(NodeID)
        /// A node died (or left): what it published may not all have arrived.
        case nodeLost(NodeID, died: Bool)
    }

    struct Peer {
        /// The last announcement of its stream applied here (0: none).
        var lastSeq: UInt64
        var lastHeard: Duration
        var users: [UserKey: UserState] = [:]
        var presenceApps: Set<String> = []
        /// What it has applied of each node's announcements, as its last heartbeat said.
        var acks: [NodeID: UInt64] = [:]
        /// Waiting for its snapshot (asked at that time): its changes are ignored meanwhile.
        var snapshotAskedAt: Duration?
        /// It said goodbye: it goes at this time.
        var leavesAt: Duration?
    }

    let me: NodeID
    let timeout: Duration
    let leaveGrace: Duration
    /// How long an unanswered snapshot request waits before it is asked again.
    let snapshotRetry: Duration
    private(set) var peers: [NodeID: Peer] = [:]
    /// The other nodes each user is on.
    private var userNodes: [UserKey: Set<NodeID>] = [:]
    /// Users who went offline on some node without being announced, or were announced: node -> announced. Cleared when
    /// the user comes online somewhere, or once resolved.
    private var departures: [UserKey: [NodeID: Bool]] = [:]
    /// Whether this node is connected to NATS: while it is not, it hears nobody, and nobody dies for that.
    private var connected = true

    /// Departures remembered at most (a bound on memory; the oldest are forgotten first only in the unlikely case of
    /// this many unresolved).
    static let maxDepartures = 100_000

    init(me: NodeID, timeout: Duration, leaveGrace: Duration, snapshotRetry: Duration) {
        self.me = me
        self.timeout = timeout
        self.leaveGrace = leaveGrace
        self.snapshotRetry = snapshotRetry
    }

    // MARK: Inputs

    /// A heartbeat: `seq` is the last number of the node's stream.
    mutating func heartbeat(
        from node: NodeID, seq: UInt64, acks: [NodeID: UInt64], presenceApps: Set<String>, now: Duration
    ) -> [Action] {
        guard node != me else { return [] }
        var actions = hear(node, now: now)
        peers[node]!.acks = acks
        peers[node]!.presenceApps = presenceApps
        peers[node]!.leavesAt = nil
        if seq != peers[node]!.lastSeq { actions += askSnapshot(node, now: now) }
        return actions
    }

    /// A numbered change of `node`'s stream (`changes` may be empty: a mark).
    mutating func delta(from node: NodeID, seq: UInt64, changes: [Change], now: Duration) -> [Action] {
        guard node != me else { return [] }
        var actions = hear(node, now: now)
        let peer = peers[node]!
        if seq <= peer.lastSeq { return actions }
        guard peer.snapshotAskedAt == nil, seq == peer.lastSeq + 1 else { return actions + askSnapshot(node, now: now) }
        peers[node]!.lastSeq = seq
        for change in changes { actions += apply(change, on: node) }
        return actions
    }

    /// `node`'s whole record as of its announcement `seq`.
    mutating func snapshot(
        from node: NodeID, seq: UInt64, users: [UserKey: UserState], presenceApps: Set<String>, now: Duration
    ) -> [Action] {
        guard node != me else { return [] }
        var actions = hear(node, now: now)
        guard seq >= peers[node]!.lastSeq || peers[node]!.snapshotAskedAt != nil else { return actions }
        let gone = Set(peers[node]!.users.keys).subtracting(users.keys)
        for user in gone { detach(user, from: node) }
        for (user, _) in users where peers[node]!.users[user] == nil { attach(user, to: node) }
        peers[node]!.users = users
        peers[node]!.presenceApps = presenceApps
        peers[node]!.lastSeq = seq
        peers[node]!.snapshotAskedAt = nil
        // Departures the snapshot hides were announced (or declined) by that node: resolve them as such.
        let nowhere = gone.filter { userNodes[$0] == nil }
        if !nowhere.isEmpty { actions += resolveDepartures(nowhere) }
        return actions
    }

    /// `node` is shutting down: its users stay for the grace, then it is gone.
    mutating func goodbye(from node: NodeID, now: Duration) -> [Action] {
        guard node != me, peers[node] != nil else { return [] }
        peers[node]!.leavesAt = now + leaveGrace
        return []
    }

    /// This node lost its connection to NATS: nobody is heard, and nobody is declared dead for it.
    mutating func disconnected() {
        connected = false
    }

    /// This node is connected again: every node may have announced things meanwhile, so each is asked for a snapshot,
    /// and their silence so far does not count.
    mutating func reconnected(now: Duration) -> [Action] {
        connected = true
        var actions: [Action] = []
        for node in peers.keys.sorted() {
            peers[node]!.lastHeard = now
            peers[node]!.snapshotAskedAt = nil
            actions += askSnapshot(node, now: now)
        }
        return actions
    }

    /// Whether a node has been silent for the timeout (``tick(now:declaringDeaths:)`` would declare it dead).
    func hasSilentNode(now: Duration) -> Bool {
        connected && peers.values.contains { $0.leavesAt == nil && now - $0.lastHeard > timeout }
    }

    /// Declares dead the nodes silent for the timeout (unless `declaringDeaths` is false: the caller could not check
    /// that this node itself still reaches NATS, and silence may be its own), removes those whose goodbye grace is
    /// over, and asks again for snapshots not answered.
    mutating func tick(now: Duration, declaringDeaths: Bool = true) -> [Action] {
        guard connected else { return [] }
        var actions: [Action] = []
        for (node, peer) in peers.sorted(by: { $0.key < $1.key }) {
            if let leavesAt = peer.leavesAt, now >= leavesAt {
                actions += remove(node, died: false)
            } else if now - peer.lastHeard > timeout {
                if declaringDeaths { actions += remove(node, died: true) }
            } else if let asked = peer.snapshotAskedAt, now - asked >= snapshotRetry {
                peers[node]!.snapshotAskedAt = now
                actions.append(.requestSnapshot(node))
            }
        }
        return actions
    }

    /// This node's user went offline here: whether to announce it (no other node has them). When not, the decision is
    /// recorded (a declined departure), to be resolved once the user is on no node.
    mutating func localOffline(_ user: UserKey) -> Bool {
        guard userNodes[user] != nil else {
            departures[user] = nil
            return true
        }
        recordDeparture(user, node: me, announced: false)
        return false
    }

    /// This node's user came online here: whether they are new to the deployment (on no other node).
    mutating func localOnline(_ user: UserKey) -> Bool {
        departures[user] = nil
        return userNodes[user] == nil
    }

    // MARK: Questions

    /// Whether another node has the user online.
    func isOnline(_ user: UserKey) -> Bool { userNodes[user] != nil }

    /// Whether another node has a socket of the user open, or had one open at `since` (epoch ms).
    func hasSocket(_ user: UserKey, since: Int64) -> Bool {
        for node in userNodes[user] ?? [] {
            switch peers[node]?.users[user] {
            case .open: return true
            case .closed(let at): if at >= since { return true }
            case nil: continue
            }
        }
        return false
    }

    /// The other nodes with a connection of one of `uids` of `appId`, and with `presenceOf`, those with connections
    /// that receive every user's presence in the app.
    func nodes(appId: String, uids: some Sequence<String>, presenceSubscribers: Bool = false) -> Set<NodeID> {
        var nodes = Set<NodeID>()
        for uid in uids {
            if let holding = userNodes[UserKey(appId: appId, uid: uid)] { nodes.formUnion(holding) }
        }
        if presenceSubscribers {
            for (node, peer) in peers where peer.presenceApps.contains(appId) { nodes.insert(node) }
        }
        return nodes
    }

    /// Whether every live node has applied this node's announcements up to `mark`.
    func acked(through mark: UInt64) -> Bool {
        peers.values.allSatisfy { $0.leavesAt != nil || ($0.acks[me] ?? 0) >= mark }
    }

    /// What this node has applied of each other node's stream (its heartbeat says so).
    var acks: [NodeID: UInt64] { peers.mapValues(\.lastSeq) }

    /// Users online on other nodes (for the operator's figures).
    var remoteUserCount: Int { userNodes.count }

    // MARK: Bookkeeping

    private mutating func hear(_ node: NodeID, now: Duration) -> [Action] {
        if peers[node] != nil {
            peers[node]!.lastHeard = now
            return []
        }
        peers[node] = Peer(lastSeq: 0, lastHeard: now)
        return [.nodeJoined(node)]
    }

    private mutating func askSnapshot(_ node: NodeID, now: Duration) -> [Action] {
        guard peers[node]?.snapshotAskedAt == nil else { return [] }
        peers[node]!.snapshotAskedAt = now
        return [.requestSnapshot(node)]
    }

    private mutating func apply(_ change: Change, on node: NodeID) -> [Action] {
        switch change {
        case .online(let user):
            departures[user] = nil
            if peers[node]!.users[user] == nil { attach(user, to: node) }
            peers[node]!.users[user] = .open
        case .socketsOpen(let user):
            if peers[node]!.users[user] != nil { peers[node]!.users[user] = .open }
        case .socketsClosed(let user, let at):
            if peers[node]!.users[user] != nil { peers[node]!.users[user] = .closed(at: at) }
        case .offline(let user, let announced):
            guard peers[node]!.users.removeValue(forKey: user) != nil else { return [] }
            detach(user, from: node)
            recordDeparture(user, node: node, announced: announced)
            if userNodes[user] == nil { return resolveDepartures([user]) }
        }
        return []
    }

    private mutating func remove(_ node: NodeID, died: Bool) -> [Action] {
        guard let peer = peers.removeValue(forKey: node) else { return [] }
        var gone: [UserKey] = []
        for user in peer.users.keys {
            detach(user, from: node)
            if userNodes[user] == nil {
                departures[user] = nil
                gone.append(user)
            }
        }
        var actions: [Action] = [.nodeLost(node, died: died)]
        if !gone.isEmpty {
            // The live node with the smallest id announces them.
            let announcer = ([me] + peers.keys).min()!
            actions.append(
                .usersGone(gone.sorted { ($0.appId, $0.uid) < ($1.appId, $1.uid) }, announce: announcer == me))
        }
        return actions
    }

    /// Users now on no other node whose departures are recorded: announced by the smallest id that declined, unless
    /// a node announced them.
    private mutating func resolveDepartures(_ users: some Sequence<UserKey>) -> [Action] {
        var announce: [UserKey] = []
        var others: [UserKey] = []
        for user in users {
            guard let departed = departures.removeValue(forKey: user) else { continue }
            if departed.values.contains(true) { continue }
            if departed.keys.min() == me { announce.append(user) } else { others.append(user) }
        }
        var actions: [Action] = []
        if !announce.isEmpty { actions.append(.usersGone(announce, announce: true)) }
        if !others.isEmpty { actions.append(.usersGone(others, announce: false)) }
        return actions
    }

    private mutating func recordDeparture(_ user: UserKey, node: NodeID, announced: Bool) {
        if departures.count >= Self.maxDepartures, departures[user] == nil { departures.removeAll() }
        departures[user, default: [:]][node] = announced
    }

    private mutating func attach(_ user: UserKey, to node: NodeID) {
        userNodes[user, default: []].insert(node)
    }

    private mutating func detach(_ user: UserKey, from node: NodeID) {
        guard var nodes = userNodes[user] else { return }
        nodes.remove(node)
        userNodes[user] = nodes.isEmpty ? nil : nodes
    }
}
