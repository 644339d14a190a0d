import Foundation
import Logging
import NATSNIO
import NIOConcurrencyHelpers
import NIOCore
import ParleyProtocol
import ParleyStore

/// This node's link to the other nodes of its deployment, over NATS (docs/ARCHITECTURE.md, "Several nodes").
///
/// - **Events** a node commits travel on a subject per conversation (``ClusterSubjects/conversation(_:)``) with their
///   sequence numbers and recipients; a node subscribes to the conversations its connected users participate in
///   (``ConversationInterest``), so a node with no participant of a conversation connected receives none of its
///   traffic. The event that makes a user a participant (and a ban or an unban) also goes to the nodes where that user
///   is connected, which then subscribe.
/// - **Signals** (typing, receipts, presence, profiles) go to the nodes where their recipients are connected, as the
///   directory knows them (``ClusterDirectory``); closes go to every node.
/// - **Presence** lives in memory: each node announces its users on the deployment's subject, numbered, with a
///   heartbeat; no database write per arrival.
/// - **Nothing lost.** NATS delivers at most once. The truth stays in PostgreSQL: a node that finds a gap in a
///   conversation's sequence numbers reads what is missing; one that reconnected to NATS, lost a node, dropped
///   messages (slow consumer) or was told that another node's publications may be lost reads the last sequence number
///   of every conversation it follows and catches up; a new subscription and a newly connected user are checked once
///   every node has acknowledged the announcement that followed them (``ClusterDirectory/acked(through:)``); and every
///   `sweepInterval` every followed conversation is checked anyway.
///
/// What it hears goes to `notices` in order; ``ClusterNode`` applies them.
final class NATSCluster: Sendable {
    typealias NodeID = ClusterDirectory.NodeID

    /// What this node must apply.
    enum Notice: Sendable {
        /// Events of a conversation another node committed.
        case events(ConversationRef, [RoutedEvent])
        /// Read the last sequence number of these conversations (nil: every followed one) and publish what is missing.
        case sync([ConversationRef]?)
        /// Users connected here before every node knew it: read their membership changes after these positions.
        case settleUsers([UserRef: Int64])
        /// A signal of another node for this node's connections.
        case signal(ClusterMessage)
        /// Users on no node any more (their node died or left); `announce`: this node announces them offline.
        case usersGone([UserKey], announce: Bool)
    }

    struct Configuration: Sendable {
        var servers: [NATSServerAddress]
        var heartbeatInterval: Duration = .seconds(1)
        var nodeTimeout: Duration = .seconds(5)
        /// How long a node that said goodbye keeps its users (their clients reconnect elsewhere meanwhile).
        var leaveGrace: Duration = .seconds(5)
        /// How long a conversation stays followed after its last connected participant left.
        var linger: Duration = .seconds(30)
        /// How often every followed conversation is checked against the database anyway.
        var sweepInterval: Duration = .seconds(10)
    }

    private struct State {
        var directory: ClusterDirectory
        var interest: ConversationInterest
        var subscriptions: [ConversationRef: NATSSubscription] = [:]
        /// The last number of this node's announcements.
        var seq: UInt64 = 0
        /// This node's users as announced (what a snapshot sends).
        var users: [UserKey: ClusterDirectory.UserState] = [:]
        /// Followed or connected since the last mark: checked once it is acknowledged.
        var unsettledConversations: [ConversationRef] = []
        var unsettledUsers: [UserRef: Int64] = [:]
        var marks: [(seq: UInt64, conversations: [ConversationRef], users: [UserRef: Int64])] = []
        /// Snapshot parts received, per node.
        var snapshots: [NodeID: (seq: UInt64, parts: Int, users: [Int: [ClusterSnapshotUser]], apps: [String])] = [:]
        var lastSweep: Duration = .zero
        /// A publication was refused (the outbound buffer was full, NATS unreachable for long): the other nodes are
        /// told to catch up from the database once publishing works again.
        var lostPublications = false
    }

    let nodeId: String
    let subjects: ClusterSubjects
    let connection: NATSConnection
    private let configuration: Configuration
    private let positions: ConversationPositions
    private let hub: Hub
    private let timeline: Timeline
    private let metrics: ServerMetrics
    private let logger: Logger
    private let state: NIOLockedValueBox<State>
    let notices: AsyncStream<Notice>
    private let sink: AsyncStream<Notice>.Continuation
    private let inbox: NATSInbox

    init(
        configuration: Configuration, deploymentId: String, positions: ConversationPositions, hub: Hub,
        timeline: Timeline, metrics: ServerMetrics = .discarding, logger: Logger
    ) {
        let nodeId = "n" + Secrets.randomID(prefix: "", length: 12).lowercased()
        self.nodeId = nodeId
        self.subjects = ClusterSubjects(deploymentId: deploymentId, nodeId: nodeId)
        self.configuration = configuration
        self.positions = positions
        self.hub = hub
        self.timeline = timeline
        self.metrics = metrics
        self.logger = logger
        var natsConfiguration = NATSConfiguration(servers: configuration.servers)
        natsConfiguration.name = "parley-\(nodeId)"
        natsConfiguration.echo = false
        natsConfiguration.pingInterval = .seconds(1)
        natsConfiguration.maxPingsOutstanding = 3
        // A loaded machine can take more than the client's default 2 s to complete a handshake.
        natsConfiguration.connectTimeout = .seconds(5)
        // What a node publishes while NATS is away waits here, up to this; past it, publications are dropped and
        // the other nodes catch up from the database (``State/lostPublications``).
        natsConfiguration.maxPendingBytes = 64 << 20
        var natsLogger = logger
        natsLogger[metadataKey: "nats"] = "\(nodeId)"
        self.connection = NATSConnection(configuration: natsConfiguration, logger: natsLogger)
        self.state = NIOLockedValueBox(
            State(
                directory: ClusterDirectory(
                    me: nodeId, timeout: configuration.nodeTimeout, leaveGrace: configuration.leaveGrace,
                    snapshotRetry: configuration.heartbeatInterval * 3
                ),
                interest: ConversationInterest(linger: configuration.linger)
            )
        )
        (notices, sink) = AsyncStream.makeStream(of: Notice.self)
        inbox = connection.makeInbox(maxMessages: 1 << 20, maxBytes: 256 << 20)
    }

    // MARK: Running

    /// Connects (the first connection within `timeout`, or it throws), then runs until cancelled: hears the other
    /// nodes, beats, sweeps. Says goodbye and flushes before it returns.
    func run(connected: @Sendable () async -> Void, timeout: Duration = .seconds(10)) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.connection.run() }
            try await connection.waitUntilConnected(timeout: timeout)
            _ = try connection.subscribe(to: subjects.nodes, into: inbox)
            _ = try connection.subscribe(to: subjects.inbox, into: inbox)
            try await connection.flush(timeout: timeout)
            announceHeartbeat()
            logger.info("Cluster node \(nodeId) joined deployment \(subjects.deploymentId) on NATS")
            await connected()
            group.addTask { await self.hear() }
            group.addTask { await self.watchConnection() }
            group.addTask { try await self.beat() }
            do {
                try await group.next()
            } catch is CancellationError {
            }
            // A goodbye, so that the others keep this node's users only for the grace, not the timeout.
            try? connection.publish(ClusterWire.encode(.goodbye(node: nodeId)), to: subjects.nodes)
            try? await connection.flush(timeout: .seconds(1))
            group.cancelAll()
        }
        sink.finish()
        inbox.finish()
    }

    /// Handles what arrives on this node's subscriptions, in order.
    private func hear() async {
        while let batch = await inbox.nextBatch() {
            for message in batch { receive(message) }
        }
    }

    private func receive(_ message: NATSMessage) {
        guard let decoded = ClusterWire.decode(message.payload) else {
            logger.warning("Cluster: an unreadable message on \(message.subject) was ignored")
            return
        }
        guard decoded.node != nodeId else { return }
        let now = timeline.now()
        switch decoded {
        case .heartbeat(let node, let seq, let acks, let apps):
            let actions = state.withLockedValue {
                $0.directory.heartbeat(from: node, seq: seq, acks: acks, presenceApps: Set(apps), now: now)
            }
            run(actions)
            settleAcknowledged()
        case .delta(let node, let seq, let changes):
            run(state.withLockedValue { $0.directory.delta(from: node, seq: seq, changes: changes, now: now) })
        case .goodbye(let node):
            run(state.withLockedValue { $0.directory.goodbye(from: node, now: now) })
        case .resync(let node):
            logger.info("Cluster: node \(node) reconnected to NATS; reading every followed conversation again")
            sink.yield(.sync(nil))
        case .snapshotRequest(let node):
            sendSnapshot(to: node)
        case .snapshot(let node, let seq, let part, let parts, let users, let apps):
            receiveSnapshot(from: node, seq: seq, part: part, parts: parts, users: users, apps: apps, now: now)
        case .events(_, let appId, let conversationId, let groups):
            let routed = Self.routed(groups, appId: appId, conversationId: conversationId)
            metrics.clusterEventsReceived.increment(by: routed.count)
            sink.yield(.events(ConversationRef(appId: appId, conversationId: conversationId), routed))
        case .deliver, .close:
            sink.yield(.signal(decoded))
        }
    }

    /// Follows the NATS connection: a reconnection means publications of this node, and to it, may be lost.
    private func watchConnection() async {
        for await event in connection.events {
            let now = timeline.now()
            switch event {
            case .disconnected(let reason):
                logger.warning("Cluster: the NATS connection was lost (\(reason)); reconnecting")
                state.withLockedValue { $0.directory.disconnected() }
            case .reconnected(let server):
                logger.notice("Cluster: reconnected to NATS at \(server); catching up from the database")
                run(state.withLockedValue { $0.directory.reconnected(now: now) })
                // What this node published before the connection broke may be lost, and so may what others
                // published to it: everyone reads their conversations again.
                try? connection.publish(ClusterWire.encode(.resync(node: nodeId)), to: subjects.nodes)
                sink.yield(.sync(nil))
                announceHeartbeat()
            case .slowConsumer(_, let dropped):
                logger.warning(
                    "Cluster: this node fell behind and NATS messages were dropped (\(dropped) so far); catching up")
                run(state.withLockedValue { $0.directory.reconnected(now: now) })
                sink.yield(.sync(nil))
            case .serverError(let text):
                logger.warning("Cluster: NATS said \(text)")
            case .lameDuckMode:
                logger.notice("Cluster: the NATS server is shutting down; moving to another")
            case .connected, .connectionAttemptFailed, .serversDiscovered, .closed:
                break
            }
        }
    }

    /// Beats, declares dead nodes, stops following conversations nobody here is in, marks what waits to settle, and
    /// sweeps, every heartbeat interval.
    private func beat() async throws {
        var next = timeline.now()
        while true {
            next += configuration.heartbeatInterval
            try await timeline.sleepUntil(next)
            // A node silent for the timeout is dead only if this node itself still reaches NATS (a round trip to its
            // server now): when this node's connection is the one that stalled, everyone looks silent.
            var reachable = true
            if state.withLockedValue({ $0.directory.hasSilentNode(now: timeline.now()) }) {
                do {
                    try await connection.flush(timeout: configuration.heartbeatInterval)
                } catch is CancellationError {
                    throw CancellationError()
                } catch {
                    reachable = false
                }
            }
            let now = timeline.now()
            let (actions, unfollowed, sweep) = state.withLockedValue { state in
                let sweep = now - state.lastSweep >= configuration.sweepInterval
                if sweep { state.lastSweep = now }
                return (
                    state.directory.tick(now: now, declaringDeaths: reachable), state.interest.tick(now: now), sweep
                )
            }
            run(actions)
            apply(unfollowed)
            announceLostPublications()
            markUnsettled()
            announceHeartbeat()
            settleAcknowledged()
            if sweep { sink.yield(.sync(nil)) }
        }
    }

    // MARK: Publishing events and signals

    /// Publishes a conversation's events this node committed, to the nodes that follow it, and to the nodes of
    /// `alsoTo` (users it makes participants, bans or unbans). Groups that do not fit in one NATS message go in
    /// several, in order (cut only then: the message of every batch is encoded once).
    func publish(_ conversation: ConversationRef, _ groups: [ClusterEventGroup], alsoTo users: [String]) {
        func message(_ groups: [ClusterEventGroup]) -> ByteBuffer {
            ClusterWire.encode(
                .events(
                    node: nodeId, appId: conversation.appId, conversationId: conversation.conversationId,
                    groups: groups))
        }
        let whole = message(groups)
        let limit = maxPayload
        let parts =
            whole.readableBytes <= limit
            ? [whole]
            : ClusterWire.eventRuns(groups, overhead: message([]).readableBytes, limit: limit).map(message)
        for part in parts { send(part, to: subjects.conversation(conversation)) }
        guard !users.isEmpty else { return }
        let nodes = state.withLockedValue { $0.directory.nodes(appId: conversation.appId, uids: users) }
        for node in nodes.sorted() {
            for part in parts { send(part, to: subjects.inbox(of: node)) }
        }
    }

    /// Delivers an event that is not stored to the other nodes where `uids` (and, with `presenceOf`, the connections
    /// that receive every presence of the app) are connected.
    func deliver(appId: String, uids: [String], presenceOf: String?, except: [String], json: [UInt8]) {
        let nodes = state.withLockedValue {
            $0.directory.nodes(appId: appId, uids: uids, presenceSubscribers: presenceOf != nil)
        }
        guard !nodes.isEmpty else { return }
        let message = ClusterWire.encode(
            .deliver(node: nodeId, appId: appId, uids: uids, presenceOf: presenceOf, except: except, event: json))
        for node in nodes.sorted() { send(message, to: subjects.inbox(of: node)) }
    }

    /// Closes a user's connections on every other node.
    func close(appId: String, uid: String, tokenIds: [String]?, code: UInt16, reason: String) {
        send(
            ClusterWire.encode(
                .close(node: nodeId, appId: appId, uid: uid, tokenIds: tokenIds, code: code, reason: reason)),
            to: subjects.nodes)
    }

    private func send(_ message: ByteBuffer, to subject: String) {
        guard let error = publish(message, to: subject) else { return }
        let first = state.withLockedValue { state in
            defer { state.lostPublications = true }
            return !state.lostPublications
        }
        if first { reportLost(error) }
    }

    /// ``send(_:to:)`` with the state's lock held (announcements, heartbeats): the lock is not taken again, which
    /// would never return (a publication refused while announcing: NATS away with its buffer full, or closed at a
    /// stop).
    private func send(_ message: ByteBuffer, to subject: String, in state: inout State) {
        guard let error = publish(message, to: subject) else { return }
        let first = !state.lostPublications
        state.lostPublications = true
        if first { reportLost(error) }
    }

    /// Publishes; returns the error when NATS refused the message. Lost: once publishing works again, the other nodes
    /// are told to catch up from the database (events); signals are done without.
    private func publish(_ message: ByteBuffer, to subject: String) -> NATSError? {
        do {
            try connection.publish(message, to: subject)
            metrics.clusterMessagesPublished.increment()
            return nil
        } catch {
            return error
        }
    }

    private func reportLost(_ error: NATSError) {
        logger.warning(
            "Cluster: publications to NATS are dropped; the other nodes will catch up from the database",
            metadata: ["error": "\(error)"])
    }

    /// After dropped publications, tells every node to read its conversations again.
    private func announceLostPublications() {
        guard state.withLockedValue({ $0.lostPublications }) else { return }
        do {
            try connection.publish(ClusterWire.encode(.resync(node: nodeId)), to: subjects.nodes)
            state.withLockedValue { $0.lostPublications = false }
            logger.notice("Cluster: publishing works again; the other nodes catch up on what was dropped")
        } catch {
            // Still full: next heartbeat.
        }
    }

    // MARK: Presence

    /// This node's users who came online here; for each, whether they are new to the deployment.
    func usersOnline(_ users: [UserKey]) -> [Bool] {
        guard !users.isEmpty else { return [] }
        return state.withLockedValue { state in
            let answers = users.map { state.directory.localOnline($0) }
            for user in users { state.users[user] = .open }
            announce(users.map { .online($0) }, in: &state)
            return answers
        }
    }

    /// This node's user went offline here: whether to announce it (no other node has them).
    func userOffline(_ user: UserKey) -> Bool {
        state.withLockedValue { state in
            let announce = state.directory.localOffline(user)
            state.users[user] = nil
            self.announce([.offline(user, announced: announce)], in: &state)
            return announce
        }
    }

    /// When each user's last socket here closed (nil: one is open again), for the others' push decisions.
    func recordSockets(_ changes: [(UserKey, Int64?)]) {
        guard !changes.isEmpty else { return }
        state.withLockedValue { state in
            var announced: [ClusterDirectory.Change] = []
            for (user, closedAt) in changes where state.users[user] != nil {
                if let closedAt {
                    state.users[user] = .closed(at: closedAt)
                    announced.append(.socketsClosed(user, at: closedAt))
                } else {
                    state.users[user] = .open
                    announced.append(.socketsOpen(user))
                }
            }
            if !announced.isEmpty { announce(announced, in: &state) }
        }
    }

    /// Whether another node has the user online.
    func isOnlineElsewhere(_ user: UserKey) -> Bool {
        state.withLockedValue { $0.directory.isOnline(user) }
    }

    /// Whether another node has a socket of the user open, or had one at `since` (epoch ms).
    func hasSocketElsewhere(_ user: UserKey, since: Int64) -> Bool {
        state.withLockedValue { $0.directory.hasSocket(user, since: since) }
    }

    /// Publishes changes as the next announcement of this node's stream (with the state's lock held, so that
    /// announcements leave in the order of their numbers). Changes that do not fit in one NATS message go out as
    /// several announcements (cut only then: a turn's announcement is encoded once).
    private func announce(_ changes: [ClusterDirectory.Change], in state: inout State) {
        let limit = maxPayload
        let whole = ClusterWire.encode(.delta(node: nodeId, seq: state.seq + 1, changes: changes))
        guard whole.readableBytes > limit else {
            state.seq += 1
            send(whole, to: subjects.nodes, in: &state)
            return
        }
        let overhead = ClusterWire.encode(.delta(node: nodeId, seq: state.seq, changes: [])).readableBytes
        for part in ClusterWire.runs(changes, overhead: overhead, limit: limit, size: ClusterWire.size(of:)) {
            state.seq += 1
            send(
                ClusterWire.encode(.delta(node: nodeId, seq: state.seq, changes: Array(part))), to: subjects.nodes,
                in: &state)
        }
    }

    /// The largest message NATS takes (the server's `max_payload`; its default until the server said).
    private var maxPayload: Int { connection.serverInfo?.maxPayload ?? 1 << 20 }

    private func announceHeartbeat() {
        let apps = hub.appsWithPresenceSubscribers
        state.withLockedValue { state in
            send(
                ClusterWire.encode(
                    .heartbeat(node: nodeId, seq: state.seq, acks: state.directory.acks, presenceApps: apps)),
                to: subjects.nodes, in: &state)
        }
    }

    // MARK: Interest

    /// A connection of `user` opened with these conversations and positions (its handshake's read).
    func connectionOpened(_ user: UserKey, conversations: [String: Int64]) {
        apply(state.withLockedValue { $0.interest.connectionOpened(user, conversations: conversations) })
    }

    /// The connection caught up from the positions and user stream position read after it was registered: what it
    /// joined meanwhile is followed too, and the user is checked once every node knows they are here.
    func connectionCaughtUp(_ user: UserKey, positions: [String: Int64], userSeq: Int64) {
        let actions = state.withLockedValue { state -> [ConversationInterest.Action] in
            guard state.interest.isConnected(user) else { return [] }
            let ref = UserRef(appId: user.appId, uid: user.uid)
            state.unsettledUsers[ref] = min(state.unsettledUsers[ref] ?? userSeq, userSeq)
            var actions: [ConversationInterest.Action] = []
            for (id, position) in positions {
                actions += state.interest.joined(user, conversationId: id, seq: position)
            }
            return actions
        }
        apply(actions)
    }

    /// A connection of `user` closed.
    func connectionClosed(_ user: UserKey) {
        let now = timeline.now()
        state.withLockedValue { $0.interest.connectionClosed(user, now: now) }
    }

    /// A published event made a user a participant (at `position`: what this node's connections have of it).
    func joined(_ user: UserKey, conversationId: String, position: Int64) {
        apply(state.withLockedValue { $0.interest.joined(user, conversationId: conversationId, seq: position) })
    }

    /// A published event removed a user from a conversation.
    func left(_ user: UserKey, conversationId: String) {
        let now = timeline.now()
        state.withLockedValue { $0.interest.left(user, conversationId: conversationId, now: now) }
    }

    /// The conversations followed now.
    var followed: [ConversationRef] { state.withLockedValue { $0.interest.followed } }

    /// Sets the cluster's gauges (when `/metrics` is read).
    func refreshGauges() {
        let (nodes, users, followed) = state.withLockedValue {
            ($0.directory.peers.count, $0.directory.remoteUserCount, $0.interest.followedCount)
        }
        metrics.clusterNodes.record(nodes)
        metrics.clusterUsersElsewhere.record(users)
        metrics.clusterConversationsFollowed.record(followed)
        metrics.clusterConnected.record(connection.isConnected ? 1 : 0)
    }

    private func apply(_ actions: [ConversationInterest.Action]) {
        guard !actions.isEmpty else { return }
        for action in actions {
            switch action {
            case .follow(let conversation, let position):
                positions.follow(conversation, from: position)
                do {
                    let subscription = try connection.subscribe(to: subjects.conversation(conversation), into: inbox)
                    state.withLockedValue { state in
                        state.subscriptions[conversation] = subscription
                        state.unsettledConversations.append(conversation)
                    }
                } catch {
                    logger.error(
                        "Cluster: cannot subscribe to conversation \(conversation.conversationId)",
                        metadata: ["error": "\(error)"])
                }
            case .unfollow(let conversation):
                positions.unfollow(conversation)
                if let subscription = state.withLockedValue({ $0.subscriptions.removeValue(forKey: conversation) }) {
                    connection.unsubscribe(subscription)
                }
            }
        }
    }

    // MARK: Settling

    /// Publishes a mark after the subscriptions and users not settled yet: once every node has applied it, their
    /// interest is known to every NATS server and every node, and they are checked against the database once.
    private func markUnsettled() {
        state.withLockedValue { state in
            guard !state.unsettledConversations.isEmpty || !state.unsettledUsers.isEmpty else { return }
            announce([], in: &state)
            state.marks.append((state.seq, state.unsettledConversations, state.unsettledUsers))
            state.unsettledConversations = []
            state.unsettledUsers = [:]
        }
    }

    private func settleAcknowledged() {
        let settled = state.withLockedValue { state in
            var settled: [(seq: UInt64, conversations: [ConversationRef], users: [UserRef: Int64])] = []
            while let first = state.marks.first, state.directory.acked(through: first.seq) {
                settled.append(state.marks.removeFirst())
            }
            return settled
        }
        for mark in settled {
            if !mark.conversations.isEmpty { sink.yield(.sync(mark.conversations)) }
            if !mark.users.isEmpty { sink.yield(.settleUsers(mark.users)) }
        }
    }

    // MARK: Snapshots

    private func sendSnapshot(to node: NodeID) {
        let (seq, users) = state.withLockedValue { state in
            (
                state.seq,
                state.users.map {
                    ClusterSnapshotUser(appId: $0.key.appId, uid: $0.key.uid, closedAt: $0.value.closedAt)
                }
            )
        }
        let apps = hub.appsWithPresenceSubscribers
        let overhead =
            ClusterWire.encode(.snapshot(node: nodeId, seq: seq, part: 0, parts: 0, users: [], presenceApps: apps))
            .readableBytes
        let parts = ClusterWire.runs(users, overhead: overhead, limit: maxPayload, size: ClusterWire.size(of:))
        for (part, slice) in parts.enumerated() {
            send(
                ClusterWire.encode(
                    .snapshot(
                        node: nodeId, seq: seq, part: part, parts: parts.count, users: Array(slice), presenceApps: apps)
                ),
                to: subjects.inbox(of: node))
        }
    }

    private func receiveSnapshot(
        from node: NodeID, seq: UInt64, part: Int, parts: Int, users: [ClusterSnapshotUser], apps: [String],
        now: Duration
    ) {
        let actions = state.withLockedValue { state -> [ClusterDirectory.Action] in
            var assembly = state.snapshots[node]
            if assembly == nil || assembly!.seq != seq || assembly!.parts != parts {
                assembly = (seq, parts, [:], apps)
            }
            assembly!.users[part] = users
            guard assembly!.users.count == parts else {
                state.snapshots[node] = assembly
                return []
            }
            state.snapshots[node] = nil
            var records: [UserKey: ClusterDirectory.UserState] = [:]
            for user in assembly!.users.values.joined() {
                records[UserKey(appId: user.appId, uid: user.uid)] = user.closedAt.map { .closed(at: $0) } ?? .open
            }
            return state.directory.snapshot(
                from: node, seq: seq, users: records, presenceApps: Set(apps), now: now)
        }
        run(actions)
    }

    // MARK: Directory actions

    private func run(_ actions: [ClusterDirectory.Action]) {
        for action in actions {
            switch action {
            case .requestSnapshot(let node):
                send(ClusterWire.encode(.snapshotRequest(node: nodeId)), to: subjects.inbox(of: node))
            case .usersGone(let users, let announce):
                sink.yield(.usersGone(users, announce: announce))
            case .nodeJoined(let node):
                logger.info("Cluster: node \(node) joined")
            case .nodeLost(let node, let died):
                if died {
                    logger.notice("Cluster: node \(node) stopped beating; catching up on what it committed")
                    sink.yield(.sync(nil))
                } else {
                    logger.info("Cluster: node \(node) left")
                }
            }
        }
    }

    /// The events of a message with their facts and recipients, as they came (their JSON is not decoded: sockets get
    /// it as the committing node stored it).
    private static func routed(_ groups: [ClusterEventGroup], appId: String, conversationId: String) -> [RoutedEvent] {
        groups.flatMap { group in
            group.events.map { event in
                RoutedEvent(
                    facts: EventFacts(
                        appId: appId, conversationId: conversationId, seq: event.seq, actor: event.actor,
                        kind: event.kind),
                    json: event.json, recipients: group.recipients)
            }
        }
    }
}

extension ClusterDirectory.UserState {
    var closedAt: Int64? {
        if case .closed(let at) = self { return at }
        return nil
    }
}
