import Foundation
import Logging
import NIOCore
import ParleyProtocol
import ParleyStore
import PostgresNIO

/// The link between server nodes that share one PostgreSQL database.
///
/// - **Wake-up**: every batch ``PostgresStore/apply(_:)`` commits sends, in its transaction, a `NOTIFY parley` naming
///   the sequence ranges it committed (``CommittedRange``), never the events: PostgreSQL delivers it to the listeners
///   at commit, in commit order, and the nodes read the events from the tables (``routedEvents``).
/// - **Signals** (typing, presence, unread counts, profile updates, socket closes) travel in the NOTIFY payload; one
///   larger than ``maxPayload`` is stored in `cluster_signals` and the payload names its row.
/// - **Nodes**: each process registers a fresh id in `cluster_nodes` and beats every `heartbeatInterval`; any node
///   that sees a heartbeat older than `nodeTimeout` (database time, so clocks of machines do not matter) removes that
///   node and its `presence_sessions`, and announces the users who were online only there as offline.
public final class PostgresCluster: ClusterLink {
    /// The NOTIFY channel.
    static let channel = "parley"
    /// Bytes of a NOTIFY payload (PostgreSQL refuses 8000 and more).
    static let maxPayload = 7_000

    let store: PostgresStore
    let heartbeatInterval: Duration
    let nodeTimeout: Duration
    let timeline: Timeline
    let logger: Logger

    public var nodeId: String { store.nodeId }

    /// - Parameters:
    ///   - heartbeatInterval: How often the node records that it is alive, and looks for dead nodes.
    ///   - nodeTimeout: How old a node's heartbeat may get before the others declare it dead: the bound on how long a
    ///     dead node's users still look online.
    ///   - clock: Paces the heartbeats.
    public init(
        store: PostgresStore, heartbeatInterval: Duration = .seconds(2), nodeTimeout: Duration = .seconds(10),
        clock: any Clock<Duration> = ContinuousClock(), logger: Logger = Logger(label: "parley.cluster")
    ) {
        self.store = store
        self.heartbeatInterval = heartbeatInterval
        self.nodeTimeout = nodeTimeout
        self.timeline = Timeline(clock)
        self.logger = logger
    }

    // MARK: Running

    public func run(handler: @escaping @Sendable (ClusterNotice) async -> Void) async throws {
        try await store.execute(
            """
            INSERT INTO cluster_nodes (node_id, started_at, heartbeat_at)
            VALUES (\(nodeId), \(unescaped: Self.databaseNow), \(unescaped: Self.databaseNow))
            """
        )
        logger.info("Cluster node \(nodeId) registered")
        defer { logger.info("Cluster node \(nodeId) left") }
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await self.listen(handler: handler) }
                group.addTask { try await self.beat(handler: handler) }
                try await group.next()
                group.cancelAll()
            }
        } catch is CancellationError {
        } catch {
            try? await leave()
            throw error
        }
        try? await leave()
    }

    /// Removes the node's row: its presence rows are then orphans, and the next reaper announces their users offline.
    private func leave() async throws {
        try await store.execute("DELETE FROM cluster_nodes WHERE node_id = \(nodeId)")
    }

    /// Listens on the channel until cancelled, listening again after a lost connection.
    private func listen(handler: @escaping @Sendable (ClusterNotice) async -> Void) async {
        var failures = 0
        while !Task.isCancelled {
            do {
                try await store.client.withConnection { connection in
                    try await connection.listen(on: Self.channel) { notifications in
                        if failures > 0 {
                            failures = 0
                            await handler(.resumedAfterGap)
                        }
                        for try await notification in notifications {
                            for notice in await self.notices(from: notification.payload) { await handler(notice) }
                        }
                    }
                }
            } catch {
                if Task.isCancelled { return }
                failures += 1
                logger.warning(
                    "Cluster: the notification channel failed", metadata: ["error": "\(PostgresStore.describe(error))"])
            }
            // Again after a short, growing pause (at most 5 s).
            try? await timeline.sleep(for: .milliseconds(min(5_000, 100 * (1 << min(failures, 6)))))
        }
    }

    /// Beats and reaps every `heartbeatInterval` until cancelled.
    private func beat(handler: @escaping @Sendable (ClusterNotice) async -> Void) async throws {
        var next = timeline.now()
        while true {
            next += heartbeatInterval
            try await timeline.sleepUntil(next)
            do {
                let inserted = try await store.rows(
                    """
                    INSERT INTO cluster_nodes (node_id, started_at, heartbeat_at)
                    VALUES (\(nodeId), \(unescaped: Self.databaseNow), \(unescaped: Self.databaseNow))
                    ON CONFLICT (node_id) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at
                    RETURNING xmax = 0
                    """
                ).first?.decode(Bool.self)
                if inserted == true {
                    // This node was declared dead (it stalled longer than the timeout) and its presence rows removed.
                    logger.warning("Cluster: node \(nodeId) had been declared dead; registering its users again")
                    await handler(.rejoined)
                }
                let offline = try await reap()
                if !offline.isEmpty { await handler(.wentOffline(offline)) }
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                logger.warning("Cluster: heartbeat failed", metadata: ["error": "\(PostgresStore.describe(error))"])
            }
        }
    }

    /// Removes dead nodes and the presence rows of nodes that are gone; returns the users now online nowhere.
    func reap() async throws -> [UserRef] {
        let timeoutMilliseconds = Self.milliseconds(nodeTimeout)
        return try await store.withSession { session in
            try await session.transaction {
                let dead = try await session.rows(
                    """
                    DELETE FROM cluster_nodes WHERE heartbeat_at < \(unescaped: Self.databaseNow) - \(timeoutMilliseconds)
                    RETURNING node_id
                    """
                ).map { try $0.decode(String.self) }
                for node in dead { logger.notice("Cluster: node \(node) stopped beating; its users go offline") }
                // The rows of dead nodes and of nodes that left. One transaction removes them (the others wait on
                // the rows), so each user is announced by one node.
                let orphans = try await session.rows(
                    """
                    DELETE FROM presence_sessions s
                    WHERE NOT EXISTS (SELECT 1 FROM cluster_nodes n WHERE n.node_id = s.node_id)
                    RETURNING app_id, uid
                    """
                ).map { row in
                    let (appId, uid) = try row.decode((String, String).self)
                    return UserRef(appId: appId, uid: uid)
                }
                guard !orphans.isEmpty else { return [] }
                var offline: [UserRef] = []
                for user in Set(orphans).sorted(by: { ($0.appId, $0.uid) < ($1.appId, $1.uid) }) {
                    try await session.execute("SELECT pg_advisory_xact_lock(\(Self.presenceLockKey(user)))")
                    let elsewhere = try await session.value(
                        "SELECT count(*) FROM presence_sessions WHERE app_id = \(user.appId) AND uid = \(user.uid)",
                        as: Int64.self
                    )
                    if elsewhere == 0 { offline.append(user) }
                }
                // Signals stored for large payloads are read within moments; keep them a minute.
                try await session.execute(
                    "DELETE FROM cluster_signals WHERE created_at < \(unescaped: Self.databaseNow) - 60000"
                )
                return offline
            }
        }
    }

    // MARK: Notifications

    /// What one notification means; nothing for this node's own.
    private func notices(from payload: String) async -> [ClusterNotice] {
        guard let envelope = try? JSONDecoder().decode(ClusterEnvelope.self, from: Data(payload.utf8)) else {
            logger.warning("Cluster: an unreadable notification was ignored")
            return []
        }
        guard envelope.node != nodeId else { return [] }
        var notices: [ClusterNotice] = []
        if let committed = envelope.committed { notices.append(.committed(committed)) }
        if let signal = envelope.signal { notices.append(.signal(signal)) }
        if let id = envelope.storedSignal {
            do {
                if let body = try await store.rows("SELECT body FROM cluster_signals WHERE id = \(id)").first {
                    let text = try body.decode(String.self)
                    notices.append(.signal(try JSONDecoder().decode(ClusterSignal.self, from: Data(text.utf8))))
                }
            } catch {
                logger.warning("Cluster: a stored signal could not be read", metadata: ["error": "\(error)"])
            }
        }
        return notices
    }

    public func broadcast(_ signal: ClusterSignal) async {
        do {
            let payload = try Self.encode(ClusterEnvelope(node: nodeId, signal: signal))
            if payload.utf8.count <= Self.maxPayload {
                try await store.execute("SELECT pg_notify(\(Self.channel), \(payload))")
                return
            }
            let body = String(decoding: try JSONEncoder().encode(signal), as: UTF8.self)
            try await store.withSession { session in
                try await session.transaction {
                    guard
                        let id = try await session.value(
                            """
                            INSERT INTO cluster_signals (body, created_at) VALUES (\(body), \(unescaped: Self.databaseNow))
                            RETURNING id
                            """,
                            as: Int64.self
                        )
                    else { return }
                    let pointer = try Self.encode(ClusterEnvelope(node: nodeId, storedSignal: id))
                    try await session.execute("SELECT pg_notify(\(Self.channel), \(pointer))")
                }
            }
        } catch {
            logger.warning(
                "Cluster: a signal could not be sent", metadata: ["error": "\(PostgresStore.describe(error))"])
        }
    }

    /// Sends, inside a batch's transaction, the wake-up for the ranges it commits (several payloads when needed).
    static func notifyCommitted(_ ranges: [CommittedRange], node: String, in session: PostgresSession) async throws {
        var chunk: [CommittedRange] = []
        var size = 0
        for range in ranges {
            let cost = range.appId.utf8.count + range.conversationId.utf8.count + 80
            if !chunk.isEmpty, size + cost > maxPayload - 200 {
                try await session.execute(
                    "SELECT pg_notify(\(channel), \(try encode(ClusterEnvelope(node: node, committed: chunk))))")
                chunk = []
                size = 0
            }
            chunk.append(range)
            size += cost
        }
        if !chunk.isEmpty {
            try await session.execute(
                "SELECT pg_notify(\(channel), \(try encode(ClusterEnvelope(node: node, committed: chunk))))")
        }
    }

    // MARK: Events with their recipients

    public func routedEvents(appId: String, conversationId: String, afterSeq: Int64, throughSeq: Int64, limit: Int)
        async throws -> [RoutedEvent]
    {
        let eventRows = try await store.rows(
            """
            SELECT e.body FROM events e JOIN conversations c ON c.pk = e.conversation_pk
            WHERE c.id = \(conversationId) AND c.app_id = \(appId) AND e.seq > \(afterSeq) AND e.seq <= \(throughSeq)
            ORDER BY e.seq LIMIT \(limit)
            """
        )
        let decoder = JSONDecoder()
        let events = try eventRows.map { row in
            let json = Array(try row.decode(ByteBuffer.self).readableBytesView)
            return StoredEvent(event: try decoder.decode(Event.self, from: Data(json)), json: json)
        }
        guard let first = events.first?.event.seq else { return [] }
        // The participants now and every join or departure since the first event, in one statement (one snapshot):
        // undoing the changes made after an event gives the participants at that event.
        let membershipRows = try await store.rows(
            """
            WITH c AS (SELECT pk FROM conversations WHERE id = \(conversationId) AND app_id = \(appId))
            SELECT p.uid, NULL::boolean, NULL::bigint FROM participants p, c WHERE p.conversation_pk = c.pk
            UNION ALL
            SELECT m.uid, m.joined, m.seq FROM memberships m, c WHERE m.conversation_pk = c.pk AND m.seq >= \(first)
            """
        )
        var members = Set<String>()
        var changes: [(uid: String, joined: Bool, seq: Int64)] = []
        for row in membershipRows {
            let (uid, joined, seq) = try row.decode((String, Bool?, Int64?).self)
            if let joined, let seq { changes.append((uid, joined, seq)) } else { members.insert(uid) }
        }
        return Self.route(events, members: members, changes: changes)
    }

    /// Gives each event (ascending) its recipients from the participants now and the changes at or after the first
    /// event: the participants after every change up to the event, whoever left by the event itself, and the user a
    /// ban or an unban names.
    static func route(
        _ events: [StoredEvent], members current: Set<String>, changes: [(uid: String, joined: Bool, seq: Int64)]
    ) -> [RoutedEvent] {
        var members = current
        // Newest first: undo changes while walking the events backwards.
        let undo = changes.sorted { $0.seq > $1.seq }
        var next = undo.startIndex
        var routed: [RoutedEvent] = []
        routed.reserveCapacity(events.count)
        for stored in events.reversed() {
            let seq = stored.event.seq ?? 0
            while next < undo.endIndex, undo[next].seq > seq {
                if undo[next].joined { members.remove(undo[next].uid) } else { members.insert(undo[next].uid) }
                next += 1
            }
            var recipients = members
            for change in undo[next...].prefix(while: { $0.seq == seq }) where !change.joined {
                recipients.insert(change.uid)
            }
            // A ban or an unban also reaches the user it names, who is not (or no longer) a participant.
            switch stored.event.payload {
            case .participantBanned(let ban), .participantUnbanned(let ban): recipients.insert(ban.uid)
            default: break
            }
            routed.append(RoutedEvent(stored: stored, recipients: recipients.sorted()))
        }
        return routed.reversed()
    }

    // MARK: Presence

    public func userOnline(appId: String, uid: String) async throws -> Bool {
        let user = UserRef(appId: appId, uid: uid)
        return try await store.withSession { session in
            try await session.transaction {
                try await session.execute("SELECT pg_advisory_xact_lock(\(Self.presenceLockKey(user)))")
                let others = try await session.value(
                    """
                    SELECT count(*) FROM presence_sessions s JOIN cluster_nodes n ON n.node_id = s.node_id
                    WHERE s.app_id = \(appId) AND s.uid = \(uid) AND s.node_id <> \(nodeId)
                    """,
                    as: Int64.self
                )
                try await session.execute(
                    """
                    INSERT INTO presence_sessions (app_id, uid, node_id) VALUES (\(appId), \(uid), \(nodeId))
                    ON CONFLICT (app_id, uid, node_id) DO UPDATE SET sockets_closed_at = NULL
                    """
                )
                return others == 0
            }
        }
    }

    /// Users registered per transaction by ``usersOnline(_:)`` (an advisory lock each, held to its end).
    static let presenceBatch = 200

    /// ``userOnline(appId:uid:)`` for many users: per ``presenceBatch`` users, one transaction takes their locks in
    /// (app, uid) order, the reaper's order (so neither waits on the other in a cycle), counts where else each one is
    /// online and records them all, three statements instead of three per user. Measured in `parley-bench rooms` on
    /// two nodes: registering 10,000 arrivals one transaction each took PostgreSQL's CPU and ran on into the
    /// measured phase (BENCHMARKS.md).
    public func usersOnline(_ users: [UserRef]) async throws -> [Bool] {
        var online: [UserRef: Bool] = [:]
        let ordered = Set(users).sorted { ($0.appId, $0.uid) < ($1.appId, $1.uid) }
        var start = ordered.startIndex
        while start < ordered.endIndex {
            let chunk = Array(ordered[start..<min(start + Self.presenceBatch, ordered.endIndex)])
            start += chunk.count
            let apps = chunk.map(\.appId)
            let uids = chunk.map(\.uid)
            let keys = chunk.map(Self.presenceLockKey)
            let counts = try await store.withSession { session in
                try await session.transaction {
                    // In the array's order (a function scan of `unnest` reads it in order).
                    try await session.execute("SELECT pg_advisory_xact_lock(k) FROM unnest(\(keys)) AS k")
                    let counts = try await session.rows(
                        """
                        SELECT u.i, (
                            SELECT count(*) FROM presence_sessions s JOIN cluster_nodes n ON n.node_id = s.node_id
                            WHERE s.app_id = u.app_id AND s.uid = u.uid AND s.node_id <> \(nodeId)
                        ) FROM unnest(\(apps), \(uids)) WITH ORDINALITY AS u(app_id, uid, i)
                        """
                    ).map { try $0.decode((Int64, Int64).self) }
                    // A row already there (a stalled node registering its users again) counts a socket open, as a
                    // new one does: `recordSocketsClosed` follows with the users who have none.
                    try await session.execute(
                        """
                        INSERT INTO presence_sessions (app_id, uid, node_id)
                        SELECT app_id, uid, \(nodeId) FROM unnest(\(apps), \(uids)) AS u(app_id, uid)
                        ON CONFLICT (app_id, uid, node_id) DO UPDATE SET sockets_closed_at = NULL
                        """
                    )
                    return counts
                }
            }
            for (position, others) in counts where position >= 1 && position <= chunk.count {
                online[chunk[Int(position) - 1]] = others == 0
            }
        }
        // A user the answer missed (it cannot be) is announced: a change is never hidden.
        return users.map { online[$0] ?? true }
    }

    public func userOffline(appId: String, uid: String) async throws -> Bool {
        let user = UserRef(appId: appId, uid: uid)
        return try await store.withSession { session in
            try await session.transaction {
                try await session.execute("SELECT pg_advisory_xact_lock(\(Self.presenceLockKey(user)))")
                try await session.execute(
                    "DELETE FROM presence_sessions WHERE app_id = \(appId) AND uid = \(uid) AND node_id = \(nodeId)"
                )
                let others = try await session.value(
                    """
                    SELECT count(*) FROM presence_sessions s JOIN cluster_nodes n ON n.node_id = s.node_id
                    WHERE s.app_id = \(appId) AND s.uid = \(uid)
                    """,
                    as: Int64.self
                )
                return others == 0
            }
        }
    }

    public func isOnline(appId: String, uid: String) async throws -> Bool {
        try await hasPresenceRow(appId: appId, uid: uid, elsewhereWithSocketSince: nil)
    }

    public func recordSocketsClosed(_ users: [UserRef], at closedAt: [Int64?]) async throws {
        guard !users.isEmpty else { return }
        let changes = zip(users, closedAt)
        let closed = changes.compactMap { user, at in at.map { (user, $0) } }
        let reopened = changes.filter { $0.1 == nil }.map(\.0)
        // Only this node's own rows: no lock needed (the reaper deletes rows of other nodes only).
        try await store.withSession { session in
            try await session.transaction {
                if !closed.isEmpty {
                    try await session.execute(
                        """
                        UPDATE presence_sessions s SET sockets_closed_at = u.closed_at
                        FROM unnest(\(closed.map(\.0.appId)), \(closed.map(\.0.uid)), \(closed.map(\.1)))
                            AS u(app_id, uid, closed_at)
                        WHERE s.app_id = u.app_id AND s.uid = u.uid AND s.node_id = \(nodeId)
                        """
                    )
                }
                if !reopened.isEmpty {
                    try await session.execute(
                        """
                        UPDATE presence_sessions s SET sockets_closed_at = NULL
                        FROM unnest(\(reopened.map(\.appId)), \(reopened.map(\.uid))) AS u(app_id, uid)
                        WHERE s.app_id = u.app_id AND s.uid = u.uid AND s.node_id = \(nodeId)
                        """
                    )
                }
            }
        }
    }

    public func hasSocketElsewhere(appId: String, uid: String, since: Int64) async throws -> Bool {
        try await hasPresenceRow(appId: appId, uid: uid, elsewhereWithSocketSince: since)
    }

    /// Whether a live node has a presence row of the user: any node (`since` nil), or another node whose row has a
    /// socket open, or had one at `since`.
    private func hasPresenceRow(appId: String, uid: String, elsewhereWithSocketSince since: Int64?) async throws
        -> Bool
    {
        try await store.rows(
            """
            SELECT EXISTS (
                SELECT 1 FROM presence_sessions s JOIN cluster_nodes n ON n.node_id = s.node_id
                WHERE s.app_id = \(appId) AND s.uid = \(uid) AND (\(since)::bigint IS NULL OR (s.node_id <> \(nodeId)
                    AND (s.sockets_closed_at IS NULL OR s.sockets_closed_at >= \(since))))
            )
            """
        ).first?.decode(Bool.self) ?? false
    }

    // MARK: Helpers

    /// The database's clock in epoch milliseconds: every node compares heartbeats on this one clock.
    static let databaseNow = "(extract(epoch from clock_timestamp()) * 1000)::bigint"

    static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }

    /// The advisory lock that orders one user's presence changes across nodes.
    static func presenceLockKey(_ user: UserRef) -> Int64 {
        // FNV-1a over "presence|app|uid": stable across processes (Swift's hashValue is seeded per process).
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in "presence|\(user.appId)|\(user.uid)".utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return Int64(bitPattern: hash)
    }

    static func encode(_ envelope: ClusterEnvelope) throws -> String {
        String(decoding: try JSONEncoder().encode(envelope), as: UTF8.self)
    }
}

/// The payload of a notification.
struct ClusterEnvelope: Codable {
    /// The node that sent it.
    var node: String
    var committed: [CommittedRange]?
    var signal: ClusterSignal?
    /// The row of `cluster_signals` that holds a signal too large for a payload.
    var storedSignal: Int64?
}
