import ArgumentParser
import Foundation
import NIOCore
import ParleyProtocol

/// `rooms`: many small groups all talking at once.
struct RoomsScenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rooms",
        abstract: "Many small groups talking at once (e.g. 2,000 x 5 at 2,000 msg/s in all): latency, lost, duplicated."
    )

    @OptionGroup var load: RoomsLoad
    var rooms: Int { load.rooms }
    var size: Int { load.size }
    var rate: Double { load.rate }
    var duration: Double { load.duration }
    var warmup: Double { load.warmup }

    @Option(help: "Extra bytes of text per message.")
    var padding: Int = 64

    @Option(help: "Seconds to wait for the last deliveries after the last send.")
    var drainTimeout: Double = 30

    enum Phases: String, ExpressibleByArgument, Codable, Sendable {
        /// One message every 1/rate seconds, from a random member each time.
        case even
        /// Every member sends every (members / rate) seconds from a random phase of its own: the sends of all members
        /// come in clumps and gaps, as real users' do (issue 26's harness).
        case random
    }

    @Option(
        help:
            "How sends are spread in time: even (one every 1/rate s, a random member each), or random (each member periodically, from a random phase of its own)."
    )
    var phases: Phases = .even

    @Option(
        help: """
            Quiet groups each member is also in (groups of --size that never get a message): a user of a real app is \
            in many conversations, and what a message costs must not grow with them.
            """
    )
    var quietGroups: Int = 0

    @Option(
        help: """
            parley-server nodes to start on the one --database-url (PostgreSQL), each group's members spread over them \
            (member i of a group on node i % nodes). Not with --server-url: an attached server is one node.
            """
    )
    var nodes: Int = 1

    @Option(
        help: """
            More nodes started beside --nodes with no user connected to them: what a node that follows none of the \
            traffic costs (interest routing).
            """
    )
    var idleNodes: Int = 0

    @Option(
        help: """
            Writes every measured delivery to this file as CSV (sent at, on the monotonic clock, and latency in \
            microseconds; message; receiving socket): to see when slow deliveries come, and line them up with a profile.
            """
    )
    var latencyLog: String?

    @OptionGroup var server: ServerOptions
    @OptionGroup var client: ClientOptions

    struct Parameters: Codable, Sendable {
        var rooms: Int
        var size: Int
        var rate: Double
        var duration: Double
        var warmup: Double
        var padding: Int
        var phases: Phases
        /// Absent for one node (as before the option).
        var nodes: Int?
        /// Absent when 0 (as before the option).
        var quietGroups: Int?
        /// Absent when 0.
        var idleNodes: Int?
    }

    /// The deliveries of one path: sender and receiver on one node, or on two.
    struct PathFigures: Codable, Sendable {
        var expected: Int
        var delivered: Int
        var lost: Int
        var latency: LatencySummary
    }

    struct Figures: Codable, Sendable {
        var messages: Int
        var sentPerSecond: Double
        var expected: Int
        var delivered: Int
        var lost: Int
        var duplicated: Int
        var acked: Int
        var deliveriesPerSecond: Double
        var latency: LatencySummary
        var connectFailures: Int
        var setupSeconds: Double
        /// Server CPU (user + system) while sending and draining, per message; with several nodes, all nodes' together.
        var serverCPUMicrosPerMessage: Double?
        /// The load tool's own CPU over the same span, per message (it shares the machine).
        var benchCPUMicrosPerMessage: Double?
        /// With several nodes: each node's CPU over the same span, per message (of all nodes).
        var nodeServerCPUMicrosPerMessage: [Double]?
        /// With several nodes: deliveries whose sender was connected to the receiver's node.
        var sameNode: PathFigures?
        /// With several nodes: deliveries whose sender was connected to another node than the receiver.
        var crossNode: PathFigures?
        /// With PostgreSQL: the database server's own CPU (all its processes) over the same span, per message.
        var postgresCPUMicrosPerMessage: Double?
        /// With several nodes: the NATS server's CPU over the same span, per message.
        var natsCPUMicrosPerMessage: Double?
        /// With several nodes: the idle nodes' CPU over the same span, per message.
        var idleNodeCPUMicrosPerMessage: [Double]?
        /// With several nodes: seconds from the last socket's `hello` until each node saw a sample of the other
        /// nodes' users online.
        var presenceSettledSeconds: Double?
        /// With PostgreSQL: rows the database wrote (inserted, updated, deleted) while the sockets connected, per
        /// socket (from `pg_stat_database`, through `psql` when it is installed).
        var postgresRowsWrittenPerConnection: Double?
    }

    func run() async throws {
        try await BenchRun.run(scenario: "rooms", server: server, options: client, nodes: nodes + idleNodes) { run in
            let setupStart = Monotonic.nanoseconds()
            let prefix = "r\(run.runID)-"
            let people = rooms * size
            run.note("creating \(people) users and \(rooms) groups")
            let tokens = try await run.provisioner.users(prefix: prefix, count: people)
            let conversations = try await run.provisioner.groups(
                (0..<rooms).map { room in
                    (tokens[room * size], (1..<max(size, 1)).map { "\(prefix)\(room * size + $0)" })
                }
            )
            if quietGroups > 0 {
                run.note("creating \(rooms * quietGroups) quiet groups (\(quietGroups) per member)")
                _ = try await run.provisioner.groups(
                    Self.quietGroups(people: people, size: size, rounds: quietGroups).map {
                        (tokens[$0[0]], $0.dropFirst().map { "\(prefix)\($0)" })
                    })
            }

            // The whole schedule is drawn before the start: who sends message n, and when.
            let (senders, offsets) = Self.schedule(
                phases: phases, people: people, rate: rate, duration: duration
            )
            let count = senders.count
            let warmupCount = offsets.firstIndex { $0 >= warmup * 1e9 } ?? count
            let marker = Marker(runID: run.runID)
            // Member i of a group connects to node i % nodes: every group has members on every node (up to its size).
            // Idle nodes (the last ones) get no member.
            let nodeCount = run.server.nodes.count - idleNodes
            let groupSize = size
            let nodeOf: @Sendable (Int) -> Int = { socket in socket % groupSize % nodeCount }
            // Path 0: sender and receiver on one node; path 1: on two.
            let ledger = DeliveryLedger(
                sockets: people, paths: nodeCount > 1 ? 2 : 1, keepsDeliveries: latencyLog != nil)
            let acks = Counter()
            let callbacks = SocketCallbacks(text: { socket, frame, receivedAt in
                guard FrameKind.isEvent(frame) else {
                    if FrameKind.isAck(frame) { acks.add() } else { ledger.frame() }
                    return
                }
                guard let found = marker.find(in: frame), found.number < senders.count else {
                    ledger.frame()
                    return
                }
                // A sender's own connection gets its message too; only the other members count.
                guard senders[found.number] != Int32(socket.index) else { return }
                ledger.delivered(
                    socket: socket.index, message: found.number, sentAt: found.sentAt, receivedAt: receivedAt,
                    measure: found.number >= warmupCount,
                    path: nodeOf(Int(senders[found.number])) == nodeOf(socket.index) ? 0 : 1
                )
            })
            run.note("connecting \(people) sockets" + (nodeCount > 1 ? " to \(nodeCount) nodes" : ""))
            let rowsBefore = server.databaseURL.flatMap(PostgresStats.rowsWritten)
            // Members of one group connecting make presence events for each other: an attempt that times out in that
            // flood is tried again once the server is quiet.
            let connected = await run.fleet.connect(tokens: tokens, retries: 2, node: nodeOf, callbacks: callbacks) {
                _ = await waitUntilQuiet(quietFor: 1, deadlineSeconds: 120) { ledger.frames }
            }
            let connectedAt = Monotonic.nanoseconds()
            var presenceSettled: Double?
            if nodeCount > 1 {
                presenceSettled = try await Self.presenceSettled(
                    run: run, prefix: prefix, people: people, nodeCount: nodeCount, nodeOf: nodeOf,
                    connected: { connected.sockets[$0] != nil }, since: connectedAt)
            }
            _ = await waitUntilQuiet(quietFor: 1, deadlineSeconds: 120) { ledger.frames }
            // PostgreSQL's counters reach pg_stat_database within a second of a transaction.
            var rowsWritten: Double?
            if let before = rowsBefore {
                try await Task.sleep(for: .milliseconds(1_500))
                rowsWritten = server.databaseURL.flatMap(PostgresStats.rowsWritten).map {
                    Double($0 - before) / Double(max(people, 1))
                }
            }
            let setupSeconds = Monotonic.seconds(since: setupStart)
            run.note(
                "\(connected.connected) connected (\(connected.failed) failed); sending \(count) messages at \(rate)/s")

            run.startMeasuring()
            let nodesBefore = run.server.nodeCPUSeconds()
            let benchBefore = ProcFS.cpuSeconds(pid: getpid())
            let postgresPort = server.databaseURL.map { URL(string: $0)?.port ?? 5432 }
            let postgresBefore = postgresPort.flatMap(ProcFS.postgresCPUSeconds)
            let natsPort = server.natsURL.flatMap {
                URL(string: $0.split(separator: ",").first.map(String.init) ?? "")?.port
            }
            let natsBefore = natsPort.flatMap(ProcFS.natsCPUSeconds)
            var expected = 0
            var expectedByPath = [0, 0]
            for number in 0..<count {
                let from = Int(senders[number])
                guard connected.sockets[from] != nil else { continue }
                let room = from / size
                for member in room * size..<(room + 1) * size where member != from && connected.sockets[member] != nil {
                    expected += 1
                    expectedByPath[nodeOf(from) == nodeOf(member) ? 0 : 1] += 1
                }
            }
            let padding = self.padding
            let start = await PacedSender.run(
                count: count, offset: { offsets[$0] }, sender: { connected.sockets[Int(senders[$0])] }
            ) { number, socket in
                let conversation = conversations[Int(senders[number]) / groupSize]
                let text = marker.text(number: number, sentAt: Monotonic.nanoseconds(), padding: padding)
                socket.send(
                    text:
                        #"{"type":"send","ref":"\#(number)","conversationId":"\#(conversation)","clientMessageId":"\#(TimeOrderedUUID.make().uuidString)","parts":[{"type":"text","text":"\#(text)"}]}"#
                )
            }
            let sendSeconds = Monotonic.seconds(since: start)
            let drainDeadline = Monotonic.nanoseconds() + UInt64(drainTimeout * 1e9)
            while ledger.unique < expected && Monotonic.nanoseconds() < drainDeadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            _ = await waitUntilQuiet(quietFor: 0.5, deadlineSeconds: 5) { acks.count }
            let delivered = ledger.unique
            let perMessage = { (seconds: Double) in seconds * 1e6 / Double(max(count, 1)) }
            let nodeCPU = zip(nodesBefore, run.server.nodeCPUSeconds()).map { before, after in
                before.flatMap { b in after.map { perMessage($0 - b) } }
            }
            let activeCPU = Array(nodeCPU.prefix(nodeCount))
            let idleCPU = Array(nodeCPU.dropFirst(nodeCount))
            let cpu = activeCPU.contains(nil) ? nil : activeCPU.compactMap { $0 }.reduce(0, +)
            let natsCPU = natsBefore.flatMap { b in natsPort.flatMap(ProcFS.natsCPUSeconds).map { perMessage($0 - b) } }
            let postgresCPU = postgresBefore.flatMap { b in
                postgresPort.flatMap(ProcFS.postgresCPUSeconds).map { perMessage($0 - b) }
            }
            let benchCPU = benchBefore.flatMap { b in
                ProcFS.cpuSeconds(pid: getpid()).map { ($0 - b) * 1e6 / Double(max(count, 1)) }
            }
            let span = Double(ledger.lastDelivery &- start) / 1e9
            let latency = ledger.latency
            if let latencyLog { try ledger.writeDeliveries(to: latencyLog) }
            let several = nodeCount > 1
            let paths = (several ? 0..<2 : 0..<0).map { path in
                PathFigures(
                    expected: expectedByPath[path], delivered: ledger.unique(path: path),
                    lost: expectedByPath[path] - ledger.unique(path: path), latency: ledger.latency(path: path)
                )
            }
            var figures = Figures(
                messages: count, sentPerSecond: Double(count) / sendSeconds, expected: expected, delivered: delivered,
                lost: expected - delivered, duplicated: ledger.duplicates, acked: acks.count,
                deliveriesPerSecond: Double(delivered) / max(span, 1e-9), latency: latency,
                connectFailures: connected.failed, setupSeconds: setupSeconds, serverCPUMicrosPerMessage: cpu,
                benchCPUMicrosPerMessage: benchCPU
            )
            if several {
                figures.nodeServerCPUMicrosPerMessage = activeCPU.contains(nil) ? nil : activeCPU.compactMap { $0 }
                figures.sameNode = paths[0]
                figures.crossNode = paths[1]
                figures.natsCPUMicrosPerMessage = natsCPU
                figures.presenceSettledSeconds = presenceSettled
            }
            if !idleCPU.isEmpty, !idleCPU.contains(nil) {
                figures.idleNodeCPUMicrosPerMessage = idleCPU.compactMap { $0 }
            }
            figures.postgresCPUMicrosPerMessage = postgresCPU
            figures.postgresRowsWrittenPerConnection = rowsWritten
            // One node on SQLite prints what it always did; several nodes and PostgreSQL add their figures after it.
            var more = ""
            if several {
                more += " nodes=\(nodeCount)"
                if let perNode = figures.nodeServerCPUMicrosPerMessage {
                    more += " node_cpu/msg=" + perNode.map { Format.fixed($0, 0) }.joined(separator: "/") + "us"
                }
                for (name, path) in [("same_node", paths[0]), ("cross_node", paths[1])] {
                    more += " \(name): \(path.delivered)/\(path.expected) lost=\(path.lost) "
                    more += path.latency.line([("p50", \.p50), ("p99", \.p99)])
                }
            }
            if let idle = figures.idleNodeCPUMicrosPerMessage {
                more += " idle_node_cpu/msg=" + idle.map { Format.fixed($0, 1) }.joined(separator: "/") + "us"
            }
            if let natsCPU = figures.natsCPUMicrosPerMessage { more += " nats_cpu/msg=\(Format.fixed(natsCPU, 0))us" }
            if let postgresCPU { more += " pg_cpu/msg=\(Format.fixed(postgresCPU, 0))us" }
            if let settled = figures.presenceSettledSeconds { more += " presence_settled=\(Format.fixed(settled, 2))s" }
            if let rows = rowsWritten { more += " pg_rows_written/connection=\(Format.fixed(rows, 2))" }
            try run.report(
                line:
                    "rooms=\(rooms)x\(size)" + (quietGroups > 0 ? " quiet_groups=\(quietGroups)" : "")
                    + " phases=\(phases.rawValue) messages=\(count) rate=\(Int(figures.sentPerSecond))/s delivered=\(delivered)/\(expected) "
                    + "lost=\(figures.lost) dup=\(figures.duplicated) acked=\(figures.acked) "
                    + latency.line([("p50", \.p50), ("p90", \.p90), ("p99", \.p99), ("max", \.max)])
                    + (cpu.map { " server_cpu/msg=\(Format.fixed($0, 0))us" } ?? "")
                    + (benchCPU.map { " bench_cpu/msg=\(Format.fixed($0, 0))us" } ?? "") + more,
                parameters: Parameters(
                    rooms: rooms, size: size, rate: rate, duration: duration, warmup: warmup, padding: padding,
                    phases: phases, nodes: several ? nodeCount : nil, quietGroups: quietGroups > 0 ? quietGroups : nil,
                    idleNodes: idleNodes > 0 ? idleNodes : nil
                ),
                figures: figures
            )
            for socket in connected.sockets { socket?.close(abort: true) }
        }
    }

    /// Seconds from `since` until every node sees a sample of 50 users of each other node online (through
    /// `GET /v1/users/{uid}/presence`, 20 ms apart); nil after 60 s.
    static func presenceSettled(
        run: BenchRun, prefix: String, people: Int, nodeCount: Int, nodeOf: @Sendable (Int) -> Int,
        connected: (Int) -> Bool, since: UInt64
    ) async throws -> Double? {
        var checks: [(node: Int, uid: String)] = []
        var generator = SystemRandomNumberGenerator()
        for observer in 0..<nodeCount {
            let others = (0..<people).filter { nodeOf($0) != observer && connected($0) }
            for member in others.shuffled(using: &generator).prefix(50) {
                checks.append((observer, "\(prefix)\(member)"))
            }
        }
        let nodes = run.server.nodes
        let apiKey = run.server.restAPIKey
        var connections: [HTTPConnection] = []
        for node in nodes.prefix(nodeCount) {
            connections.append(
                try await HTTPConnection.connect(
                    to: try SocketAddress(ipAddress: node.host, port: node.port), host: "\(node.host):\(node.port)",
                    group: run.group))
        }
        defer { for connection in connections { Task { await connection.close() } } }
        let deadline = since + 60_000_000_000
        while !checks.isEmpty {
            var waiting: [(node: Int, uid: String)] = []
            for check in checks {
                let answer = try await connections[check.node].request(
                    .GET, "/v1/users/\(check.uid)/presence", headers: [("X-Parley-Api-Key", apiKey)])
                if (try? answer.decode(Presence.self).online) != true { waiting.append(check) }
            }
            checks = waiting
            if checks.isEmpty { break }
            guard Monotonic.nanoseconds() < deadline else { return nil }
            try await Task.sleep(for: .milliseconds(20))
        }
        return Double(Monotonic.nanoseconds() - since) / 1e9
    }

    /// `rounds` times, every member in one more group of `size` (the members shuffled each round; the last group of a
    /// round is smaller when `size` does not divide `people`): each group's members by index, its creator first.
    static func quietGroups(people: Int, size: Int, rounds: Int) -> [[Int]] {
        var generator = SystemRandomNumberGenerator()
        var groups: [[Int]] = []
        for _ in 0..<rounds {
            let shuffled = Array(0..<people).shuffled(using: &generator)
            for start in stride(from: 0, to: people, by: max(size, 2)) {
                let members = Array(shuffled[start..<min(start + max(size, 2), people)])
                if members.count > 1 { groups.append(members) }
            }
        }
        return groups
    }

    /// Who sends each message and when (nanoseconds after the start), in time order.
    static func schedule(phases: Phases, people: Int, rate: Double, duration: Double) -> ([Int32], [Double]) {
        var generator = SystemRandomNumberGenerator()
        switch phases {
        case .even:
            let count = Int(rate * duration)
            let senders = (0..<count).map { _ in Int32(Int.random(in: 0..<people, using: &generator)) }
            return (senders, (0..<count).map { Double($0) * 1e9 / rate })
        case .random:
            let period = Double(people) / rate * 1e9
            var sends: [(Double, Int32)] = []
            sends.reserveCapacity(Int(rate * duration) + people)
            for member in 0..<people {
                var at = Double.random(in: 0..<period, using: &generator)
                while at < duration * 1e9 {
                    sends.append((at, Int32(member)))
                    at += period
                }
            }
            sends.sort { $0.0 < $1.0 }
            return (sends.map(\.1), sends.map(\.0))
        }
    }
}
