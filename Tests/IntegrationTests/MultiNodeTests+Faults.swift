import Foundation
import NIOConcurrencyHelpers
import Parley
import ParleyProtocol
import ParleyServer
import ParleyStore
import ParleyStorePostgres
import ParleyTesting
import Testing

/// Faults under several nodes: a node killed, the NATS server restarted, one server of a NATS cluster killed, a node's
/// NATS connection stalled. NATS delivers at most once; the database is the truth, and every acknowledged message still
/// reaches every recipient on every node once, in order.
extension MultiNodeTests {
    /// Users writing to one group from their nodes, each through a balancer (a ``TCPProxy``) that can move them.
    struct Writers {
        var clients: [ParleyClient] = []
        var recorders: [RecordingListener] = []
        var balancers: [TCPProxy] = []
        var uids: [String] = []

        func shutdown() async throws {
            for client in clients { await client.shutdown() }
            for balancer in balancers { try await balancer.stop() }
        }
    }

    /// `uids` connected to the nodes through balancers (the i-th to `nodes[i % count]`), in one group made by the first.
    static func writers(_ uids: [String], nodes: [ServerProcess], app: ProvisionedApp) async throws
        -> (Writers, Conversation)
    {
        var writers = Writers(uids: uids)
        for (index, uid) in uids.enumerated() {
            let balancer = try await TCPProxy.start(targetPort: nodes[index % nodes.count].port)
            let recorder = RecordingListener()
            let client = try await client(
                uid, url: URL(string: "http://127.0.0.1:\(balancer.port)")!, app: app, recorder: recorder)
            writers.clients.append(client)
            writers.recorders.append(recorder)
            writers.balancers.append(balancer)
        }
        let group = try await writers.clients[0].createGroup(name: "faults", participants: Array(uids.dropFirst()))
        for recorder in writers.recorders.dropFirst() {
            _ = await recorder.next(where: { $0.conversationId == group.id && $0.name == .participantAdded })
        }
        return (writers, group)
    }

    /// Each writer sends `count` messages (`<uid>-<n>`), one after another; the messages acknowledged, by writer. A send
    /// that fails (its node died under it) is retried by the SDK's outbox; the message it returns is acknowledged.
    static func send(_ writers: Writers, count: Int, in group: Conversation, pause: Duration = .milliseconds(20))
        async throws -> [String: [Message]]
    {
        try await withThrowingTaskGroup(of: (String, [Message]).self) { tasks in
            for (uid, client) in zip(writers.uids, writers.clients) {
                tasks.addTask {
                    var acknowledged: [Message] = []
                    for index in 0..<count {
                        acknowledged.append(
                            try await client.sendTextMessage("\(uid)-\(index)", to: .conversation(group.id)))
                        try await Task.sleep(for: pause)
                    }
                    return (uid, acknowledged)
                }
            }
            return try await tasks.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
    }

    /// Every recorder ends with exactly the acknowledged messages, each once, in sequence order, the same sequence for
    /// everyone.
    static func expectEveryoneHasEverything(
        _ writers: Writers, _ acknowledged: [String: [Message]], in group: Conversation
    ) async {
        let expected = acknowledged.values.joined().sorted { $0.seq < $1.seq }
        for (uid, recorder) in zip(writers.uids, writers.recorders) {
            let arrived = await eventually(timeout: .seconds(60)) {
                messages(recorder, in: group.id).count >= expected.count
            }
            let received = messages(recorder, in: group.id)
            #expect(arrived, "\(uid) received \(received.count) of \(expected.count)")
            expectInOrderOnce(received, uid)
            #expect(received.map(\.seq) == expected.map(\.seq), "\(uid): the sequence numbers")
            #expect(received.map(\.text) == expected.map(\.text), "\(uid): the texts")
        }
    }

    /// kill -9 one of three nodes while clients on every node send: the dead node's clients reconnect to another
    /// through their balancer, and every acknowledged message reaches every recipient on every node once, in order.
    @Test(.timeLimit(.minutes(4)))
    func aNodeKilledWhileEveryoneSendsLosesNothing() async throws {
        let (database, app) = try await Self.provisionedDatabase()
        let nodes = try await Self.startNodes(3, app: app, database: database)
        let (writers, group) = try await Self.writers(
            ["ann", "ben", "cat", "dan", "eve", "fay"], nodes: nodes, app: app)
        do {
            async let sent = Self.send(writers, count: 25, in: group)
            // Once a few messages are through, node 2 dies: its clients (cat and fay) move to node 0.
            _ = await eventually(timeout: .seconds(60)) {
                Self.messages(writers.recorders[0], in: group.id).count >= 30
            }
            nodes[2].kill()
            for (index, balancer) in writers.balancers.enumerated() where index % 3 == 2 {
                balancer.retarget(nodes[0].port)
                balancer.cutAll()
            }
            let acknowledged = try await sent
            #expect(acknowledged.values.map(\.count) == Array(repeating: 25, count: 6))
            await Self.expectEveryoneHasEverything(writers, acknowledged, in: group)
        } catch {
            let logs = nodes.map { node in "\(node.label):\n\(node.log.suffix(2_000))" }
            Issue.record("logs:\n\(logs.joined(separator: "\n"))")
            throw error
        }
        try await writers.shutdown()
        for node in nodes { await node.stop() }
        try await database.drop()
    }

    /// The NATS server restarts while clients on two nodes send: whatever NATS lost while it was down, or dropped with
    /// its connections, the nodes read from the database when they reconnect.
    @Test(.timeLimit(.minutes(4)))
    func theNATSServerRestartingMidStreamLosesNothing() async throws {
        let nats = try await NATSServerProcess.startRestartable()
        let nodes = try await Self.twoNodes(nats: nats.url)
        let (writers, group) = try await Self.writers(
            ["ann", "ben", "cat", "dan"], nodes: [nodes.a, nodes.b], app: nodes.app)
        do {
            async let sent = Self.send(writers, count: 30, in: group)
            _ = await eventually(timeout: .seconds(60)) {
                Self.messages(writers.recorders[1], in: group.id).count >= 20
            }
            nats.kill()
            // Down for a moment while the nodes keep committing, then back on the same port.
            try await Task.sleep(for: .milliseconds(500))
            try await nats.restart()
            let acknowledged = try await sent
            await Self.expectEveryoneHasEverything(writers, acknowledged, in: group)
        } catch {
            Issue.record("node A log:\n\(nodes.a.log.suffix(3_000))\nnode B log:\n\(nodes.b.log.suffix(3_000))")
            throw error
        }
        try await writers.shutdown()
        try await nodes.stop()
        nats.stop()
    }

    /// One server of a 3-server NATS cluster is killed mid-stream: the nodes connected to it move to another server
    /// of the cluster and nothing is lost or twice.
    @Test(.timeLimit(.minutes(4)))
    func aNATSClusterServerKilledMidStreamLosesNothing() async throws {
        let cluster = try await NATSServerProcess.startCluster()
        // Node A knows only the first server; node B the second and third.
        let nodes = try await Self.twoNodes(nats: cluster[0].url, natsB: "\(cluster[1].url),\(cluster[2].url)")
        let (writers, group) = try await Self.writers(
            ["ann", "ben", "cat", "dan"], nodes: [nodes.a, nodes.b], app: nodes.app)
        do {
            async let sent = Self.send(writers, count: 30, in: group)
            _ = await eventually(timeout: .seconds(60)) {
                Self.messages(writers.recorders[1], in: group.id).count >= 20
            }
            // Node A's server dies: node A finds the others through what its server told it (INFO connect_urls).
            cluster[0].kill()
            let acknowledged = try await sent
            await Self.expectEveryoneHasEverything(writers, acknowledged, in: group)
            #expect(nodes.a.log.contains("reconnected to NATS"), "node A moved to another server of the cluster")
        } catch {
            Issue.record("node A log:\n\(nodes.a.log.suffix(3_000))\nnode B log:\n\(nodes.b.log.suffix(3_000))")
            throw error
        }
        try await writers.shutdown()
        try await nodes.stop()
        for server in cluster { server.stop() }
    }

    /// A node whose connection to NATS stalls (no byte either way, the connection open) notices by its pings, connects
    /// again and reads from the database what it missed: its user gets every message once, in order.
    @Test(.timeLimit(.minutes(4)))
    func aNodeWhoseNATSConnectionStallsCatchesUpFromTheDatabase() async throws {
        let natsURL = try #require(NATSServerProcess.sharedURL)
        let natsPort = try #require(Int(natsURL.split(separator: ":").last ?? ""))
        let proxy = try await TCPProxy.start(targetPort: natsPort)
        let nodes = try await Self.twoNodes(natsB: "nats://127.0.0.1:\(proxy.port)")
        let (nodeA, nodeB) = (nodes.a, nodes.b)
        let (writers, group) = try await Self.writers(["ann", "ben"], nodes: [nodeA, nodeB], app: nodes.app)
        do {
            _ = try await writers.clients[0].sendTextMessage("before", to: .conversation(group.id))
            await Self.waitForMessages(writers.recorders[1], count: 1, in: group.id)
            // Node B hears nothing more from NATS, and says nothing: ann (on A) keeps writing.
            proxy.stall(true)
            for index in 0..<10 {
                _ = try await writers.clients[0].sendTextMessage("stalled-\(index)", to: .conversation(group.id))
            }
            // Node B finds its connection stale (its pings go unanswered) and connects again; what NATS held for the
            // stalled connection is lost with it, and node B reads it from the database.
            let reconnected = await eventually(timeout: .seconds(60)) {
                proxy.acceptedConnections >= 2 || nodeB.log.contains("NATS connection was lost")
            }
            #expect(reconnected, "node B gave up its stalled connection")
            proxy.stall(false)
            proxy.cutAll()
            let sentByAnn = Self.messages(writers.recorders[0], in: group.id)
            #expect(sentByAnn.map(\.text) == ["before"] + (0..<10).map { "stalled-\($0)" })
            let arrived = await eventually(timeout: .seconds(60)) {
                Self.messages(writers.recorders[1], in: group.id).count >= sentByAnn.count
            }
            let received = Self.messages(writers.recorders[1], in: group.id)
            #expect(arrived, "ben got \(received.count) of \(sentByAnn.count)")
            Self.expectInOrderOnce(received, "ben")
            #expect(received.map(\.seq) == sentByAnn.map(\.seq))
            #expect(
                await eventually(timeout: .seconds(60)) { nodeB.log.contains("reconnected to NATS") },
                "node B connected again")
        } catch {
            Issue.record("node A log:\n\(nodeA.log.suffix(3_000))\nnode B log:\n\(nodeB.log.suffix(3_000))")
            throw error
        }
        try await writers.shutdown()
        try await nodes.stop()
        try await proxy.stop()
    }

    /// Interest routing: a node with no connected participant of a conversation receives none of its events.
    @Test(.timeLimit(.minutes(4)))
    func aNodeWithNoParticipantConnectedReceivesNoneOfTheConversationsEvents() async throws {
        let (database, app) = try await Self.provisionedDatabase()
        let nodes = try await Self.startNodes(
            3, app: app, database: database, extraArguments: ["--metrics-token", Self.metricsToken])
        let (writers, group) = try await Self.writers(["ann", "ben"], nodes: [nodes[0], nodes[1]], app: app)
        let acknowledged = try await Self.send(writers, count: 20, in: group, pause: .zero)
        await Self.expectEveryoneHasEverything(writers, acknowledged, in: group)
        let metrics = try await nodes.asyncMap { try await Self.metrics(of: $0) }
        #expect((metrics[0]["parley_cluster_events_received_total"] ?? 0) >= 20, "node 0 hears ben's messages")
        #expect((metrics[1]["parley_cluster_events_received_total"] ?? 0) >= 20, "node 1 hears ann's messages")
        #expect((metrics[2]["parley_cluster_events_received_total"] ?? 0) == 0, "node 2 has nobody in the group")
        #expect(metrics[2]["parley_cluster_nodes"] == 2)
        try await writers.shutdown()
        for node in nodes { await node.stop() }
        try await database.drop()
    }

    /// One way to run several nodes: nodes of one database without NATS, or mixed with nodes that have it, refuse to
    /// start, with one line that says why.
    @Test(.timeLimit(.minutes(3)))
    func severalNodesWithoutNATSRefuseToStart() async throws {
        let (database, app) = try await Self.provisionedDatabase()
        let directories = try (0..<3).map { try TemporaryDirectory(prefix: "parley-node-\($0)") }
        let alone = try await ServerProcess.start(
            label: "alone", app: app,
            arguments: ["--database-url", database.url, "--data-dir", directories[0].url.path])
        // A second node without NATS.
        let second = try await Self.refusal(
            ["--database-url", database.url, "--data-dir", directories[1].url.path], app: app)
        #expect(second.contains("ERR_DATABASE_CLAIMED: a node without NATS serves this database"), "\(second)")
        // A node with NATS beside a node without.
        let withNATS = try await Self.refusal(
            Self.nodeArguments(database, dataDirectory: directories[1]), app: app)
        #expect(withNATS.contains("ERR_DATABASE_CLAIMED: a node without NATS serves this database"), "\(withNATS)")
        await alone.stop()
        // Now nodes with NATS serve it: a node without is refused.
        let clustered = try await Self.startNode("A", app: app, database: database, directory: directories[1])
        let without = try await Self.refusal(
            ["--database-url", database.url, "--data-dir", directories[2].url.path], app: app)
        #expect(without.contains("ERR_DATABASE_CLAIMED: other nodes serve this database"), "\(without)")
        await clustered.stop()
        try await database.drop()
    }

    static let metricsToken = "metrics-token-of-the-multi-node-tests"

    /// A node's metrics: `name` (without labels) -> value.
    static func metrics(of node: ServerProcess) async throws -> [String: Double] {
        let text = String(decoding: try await node.request("GET", "/metrics", token: metricsToken).body, as: UTF8.self)
        var samples: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let fields = line.split(separator: " ")
            guard fields.count == 2, let value = Double(fields[1]) else { continue }
            samples[String(fields[0])] = value
        }
        return samples
    }

    /// Runs a node that must refuse to start; what it printed.
    static func refusal(_ arguments: [String], app: ProvisionedApp) async throws -> String {
        do {
            let node = try await ServerProcess.start(label: "refused", app: app, arguments: arguments)
            let stopped = await eventually(timeout: .seconds(60)) { node.exitStatus != nil }
            #expect(stopped && node.exitStatus != 0, "the node started")
            return node.log
        } catch let error as ServerProcessError {
            return error.description
        }
    }
}

extension Array {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var mapped: [T] = []
        for element in self { mapped.append(try await transform(element)) }
        return mapped
    }
}
