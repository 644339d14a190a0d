import Foundation
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyServer
import ParleyStore
import ParleyTesting
import Testing

/// What the server holds over many connections, and what it does at its limits: nothing leaks per connection (the
/// registries return to zero, memory and descriptors stay flat), silent clients hold no setup slot, the
/// file-descriptor limit is backed off from and logged once, and a graceful shutdown ends within its bound whatever
/// the connections are doing, with every acknowledged message stored. The `parley-server` process is the real one
/// where memory, descriptors, CPU and signals are measured.
@Suite(.serialized, .timeLimit(.minutes(5))) struct ServerHoldingsTests {
    /// One WebSocket's life: upgrade, `connect`, `hello`... `caughtUp`, a close handshake.
    /// One connection caught up and closed by the client; false when the server closed it first for a handshake not
    /// done within its 10 s (4400 `ERR_HANDSHAKE_FAILED`: seen once when the whole suite held the two cores, in a test
    /// that counts what stays behind, which such a close must not leave either).
    @discardableResult
    static func webSocketCycle(port: Int, token: String) async throws -> Bool {
        let socket = try await RawSocket.openWebSocket(port: port, token: token, readTimeout: .seconds(20))
        defer { socket.close() }
        do {
            _ = try await socket.readText(containing: #""type":"caughtUp""#)
        } catch let failure as RawSocket.Failure where failure.description.contains("ERR_HANDSHAKE_FAILED") {
            return false
        }
        try await socket.send(RawSocket.clientFrame([0x03, 0xE8], opcode: 0x8))
        _ = try await socket.readUntilClose()
        return true
    }

    /// `count` cycles, `parallel` at a time, over `tokens` in turn; fails when more than one in a hundred was refused
    /// a handshake (``webSocketCycle(port:token:)``).
    static func cycles(_ count: Int, parallel: Int, port: Int, tokens: [String]) async throws {
        let refused = NIOLockedValueBox(0)
        defer {
            let refused = refused.withLockedValue { $0 }
            #expect(refused <= count / 100, "\(refused) of \(count) handshakes refused")
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for lane in 0..<parallel {
                group.addTask {
                    for index in stride(from: lane, to: count, by: parallel) {
                        if try await !webSocketCycle(port: port, token: tokens[index % tokens.count]) {
                            refused.withLockedValue { $0 += 1 }
                        }
                        if index % 4 == 0 {
                            // A REST request on a connection of its own, every fourth time.
                            let rest = try await RawSocket.connected(port: port)
                            try await rest.send("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                            _ = try await rest.readToEnd()
                            rest.close()
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    @Test func thousandsOfConnectionsLeaveNothingInTheServersRegistries() async throws {
        let server = try await TestServer.startForEdgeTests { configuration in
            configuration.presenceGrace = .milliseconds(50)
            // This test counts what stays behind, not deadlines: the edge's 2 s for a request head was missed when
            // the whole suite held a two-core machine at a load of 13, and the server rightly closed the socket. (The
            // idle timeout stays short: it closes the kept-alive connection of the logins above.)
            configuration.edge.requestHeadTimeout = .seconds(30)
        }
        let tokens = try await (0..<20).asyncMap { try await server.login("user\($0)") }
        try await Self.cycles(2000, parallel: 8, port: server.port, tokens: tokens)
        let after = await server.snapshot {
            $0.openConnections == 0 && $0.webSockets == 0 && $0.liveConnections == 0 && $0.onlineUsers == 0
        }
        #expect(after.openConnections == 0 && after.connectionsInSetup == 0, "\(after)")
        #expect(after.webSockets == 0 && after.liveConnections == 0 && after.expiringConnections == 0, "\(after)")
        #expect(after.handshakesInProgress == 0 && after.handshakesWaiting == 0, "\(after)")
        #expect(after.connectedUsers == 0 && after.onlineUsers == 0, "\(after)")
        #expect(after.typingIndicators == 0 && after.pendingTypingChanges == 0, "\(after)")
        try await server.stop()
    }

    /// A server started the way the README starts it, with the given options, on a provisioned data directory.
    static func serverProcess(_ label: String, arguments: [String] = [], fileDescriptorLimit: Int? = nil) async throws
        -> (ServerProcess, TemporaryDirectory)
    {
        let directory = try TemporaryDirectory(prefix: "parley-holdings")
        let store = try openSQLiteStore(in: directory.path)
        let app = try await AppProvisioning.createApp(in: store, name: label)
        try await store.close()
        let server = try await ServerProcess.start(
            label: label, app: app,
            arguments: [
                "--data-dir", directory.path, "--connections-per-second-per-address", "0",
                "--logins-per-second-per-address", "0", "--messages-per-second-per-user", "0",
            ] + arguments,
            fileDescriptorLimit: fileDescriptorLimit
        )
        return (server, directory)
    }

    /// The per-connection leak (about 5 KiB per WebSocket that was never freed): rounds of thousands of connections,
    /// after a first round that warms the server's caches and allocator, no longer grow the process.
    @Test(.enabled(if: ServerProcess.isAvailable)) func memoryAndDescriptorsStayFlatOverRoundsOfConnections()
        async throws
    {
        let (server, _) = try await Self.serverProcess("leak", arguments: ["--heartbeat-seconds", "1"])
        let tokens = try await (0..<20).asyncMap { try await server.login("user\($0)") }
        var resident: [Int] = []
        var descriptors: [Int] = []
        for _ in 0..<3 {
            try await Self.cycles(3000, parallel: 8, port: server.port, tokens: tokens)
            resident.append(try #require(server.residentBytes))
            // Descriptors come back to where the first round left them (after it, the database's reader connections
            // and the like are open): the server closes its side of every connection.
            var now = server.openDescriptors ?? 0
            let deadline = ContinuousClock.now + .seconds(10)
            while let first = descriptors.first, now > first, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
                now = server.openDescriptors ?? 0
            }
            descriptors.append(now)
        }
        #expect(
            descriptors[1] <= descriptors[0] && descriptors[2] <= descriptors[0],
            "descriptors after each round: \(descriptors)")
        // 3,000 connections that each kept 5 KiB would add 15 MB; allocator noise is a few MB.
        let growth = resident[2] - resident[1]
        #expect(growth < 6 * 1024 * 1024, "resident memory per round: \(resident.map { $0 / 1024 }) KiB")
        _ = await server.terminate(timeout: .seconds(20))
    }

    /// Silent clients do not hold the setup gate shut: a thousand upgraded sockets that never send `connect` leave it open, and
    /// a normal client logs in, connects, sends and receives while they stay; so does a client while a hundred TCP
    /// connections that send nothing are open: the gate's sweep frees their slots 10 ms after their accept while it is
    /// full (before, a second per 16 of them, and the last few kept theirs once the gate was no longer full).
    @Test func silentSocketsHoldNoSetupSlot() async throws {
        let server = try await TestServer.startForEdgeTests {
            $0.handshakeTimeout = .seconds(60)
            $0.edge.requestHeadTimeout = .seconds(60)
            $0.maxConnectionsInSetup = 16
        }
        let token = try await server.login("mallory")
        var silent: [RawSocket] = []
        for _ in 0..<1000 {
            let socket = try await RawSocket.connected(port: server.port)
            try await socket.send(RawSocket.upgradeRequest(port: server.port, token: token))
            _ = try await socket.readHead()
            silent.append(socket)
        }
        // They do not keep the gate full: a connection whose client sends nothing gives its slot up after 10 ms (or,
        // if the server's loop was too busy to tell, after a second once the gate is full). While the test opened them
        // one by one, the server went on accepting, or the loop above would have waited seconds per 16 sockets.
        let upgraded = await server.snapshot { $0.webSockets == 1000 && $0.connectionsInSetup == 0 }
        #expect(upgraded.webSockets == 1000, "\(upgraded)")
        #expect(upgraded.connectionsInSetup + upgraded.handshakesInProgress < 16, "\(upgraded)")
        for _ in 0..<100 { silent.append(try await RawSocket.connected(port: server.port)) }
        let held = await server.snapshot { $0.openConnections >= 1100 }
        #expect(held.openConnections >= 1100, "\(held)")
        // A health check on a new connection is not kept waiting behind them.
        #expect(try await server.request("GET", "/health/live").status == 200)

        let alice = try await server.login("alice")
        _ = try await server.login("bob")
        let conversation = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        let socket = WebSocketProbe(url: server.webSocketURL, token: alice)
        _ = try await socket.nextFrame()
        try await socket.send(.send(SendFrame(ref: "r", conversationId: conversation.id, parts: [.text("through")])))
        _ = try await socket.nextFrame { if case .ack = $0 { true } else { false } }
        await socket.close()
        for socket in silent { socket.close() }
        try await server.stop()
    }

    /// At its file-descriptor limit the server stops accepting (the connections it holds and the descriptors it needs
    /// otherwise fill the limit) instead of failing accepts in a busy loop, says so once in its log, and accepts again
    /// as connections close.
    @Test(.enabled(if: ServerProcess.isAvailable))
    func atTheDescriptorLimitTheServerStopsAcceptingAndLogsOnce() async throws {
        let (server, _) = try await Self.serverProcess("fd-limit", fileDescriptorLimit: 128)
        var held: [RawSocket] = []
        for _ in 0..<150 { held.append(try await RawSocket.connected(port: server.port)) }
        let descriptors = try #require(server.openDescriptors)
        let before = try #require(server.cpuTime)
        let start = ContinuousClock.now
        // A second of wall time at the limit (what is measured, not waited for).
        try await Task.sleep(for: .seconds(1))
        let used = try #require(server.cpuTime) - before
        let elapsed = ContinuousClock.now - start
        #expect(used < elapsed / 2, "the server used \(used) of CPU in \(elapsed) at its descriptor limit")
        #expect(descriptors < 128, "descriptors: \(descriptors)")
        #expect(server.log.components(separatedBy: "Not accepting new connections").count - 1 == 1, "\(server.log)")
        #expect(!server.log.contains("Accepting connections failed"), "\(server.log)")
        for socket in held { socket.close() }
        // Accepting again.
        let health = try await server.request("GET", "/health")
        #expect(health.status == 200)
        _ = await server.terminate(timeout: .seconds(20))
    }

    /// The same with the limit lowered while the server runs (as `prlimit --pid` does): its budget, learnt when it
    /// started listening, no longer holds, and `accept` fails. Before the fix one event loop then retried `accept` in a
    /// busy loop (~15,000 EMFILE a second, a core at 80-100 %) for as long as the connections stayed; now it pauses a
    /// second at a time, learns its budget again from the limit now, stops accepting at it, and accepts again as
    /// connections close.
    @Test(.enabled(if: ServerProcess.isAvailable))
    func aLimitLoweredWhileRunningStopsAcceptingWithoutABusyLoop() async throws {
        // With the per-address connection rate on (its default): connections refused past it free their descriptors
        // while others are accepted, as on a busy server.
        let (server, _) = try await Self.serverProcess(
            "fd-limit-lowered", arguments: ["--connections-per-second-per-address", "100"])
        // util-linux's prlimit (Glibc's prlimit(2) wrapper is not imported into Swift): the soft limit only.
        let prlimit = Process()
        prlimit.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
        prlimit.arguments = ["--pid", "\(server.pid)", "--nofile=256:"]
        try prlimit.run()
        prlimit.waitUntilExit()
        #expect(prlimit.terminationStatus == 0)
        let limits = try String(contentsOfFile: "/proc/\(server.pid)/limits", encoding: .utf8)
        #expect(limits.split(separator: "\n").contains { $0.hasPrefix("Max open files") && $0.contains(" 256 ") })
        // 300 at once, as a burst of clients comes.
        let port = server.port
        let held = try await withThrowingTaskGroup(of: RawSocket.self) { group in
            for _ in 0..<300 { group.addTask { try await RawSocket.connected(port: port) } }
            return try await group.reduce(into: [RawSocket]()) { $0.append($1) }
        }
        // A second at the limit, measured (what is measured, not waited for).
        let before = try #require(server.cpuTime)
        let start = ContinuousClock.now
        try await Task.sleep(for: .seconds(1))
        let used = try #require(server.cpuTime) - before
        let elapsed = ContinuousClock.now - start
        #expect(used < elapsed / 2, "the server used \(used) of CPU in \(elapsed) at its lowered descriptor limit")
        #expect(try #require(server.openDescriptors) <= 256)
        // The server met the limit and, after its pause, stopped at the budget it learnt again: its log says both.
        let met = ContinuousClock.now + .seconds(10)
        while !server.log.contains("Not accepting new connections"), ContinuousClock.now < met {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(server.log.contains("Accepting connections failed"), "\(server.log)")
        // It stops at its budget, learnt again, and says so once.
        #expect(server.log.components(separatedBy: "Not accepting new connections").count - 1 == 1, "\(server.log)")
        for socket in held { socket.close() }
        // Accepting again.
        let health = try await server.request("GET", "/health")
        #expect(health.status == 200)
        _ = await server.terminate(timeout: .seconds(20))
    }

    /// SIGTERM with connections in every state: the process exits within the close timeout (5 s by default) plus a
    /// second for the network and the final commits, and every acknowledged message is in the database.
    @Test(.enabled(if: ServerProcess.isAvailable)) func sigtermEndsWithinItsBoundWhateverTheConnectionsDo() async throws
    {
        let (server, directory) = try await Self.serverProcess("shutdown")
        let alice = try await server.login("alice")
        let bob = try await server.login("bob")
        let conversation: Conversation = try await server.request(
            "POST", "/v1/conversations", token: alice,
            body: CreateConversationRequest(type: .direct, participants: ["bob"])
        ).decode()

        var sockets: [RawSocket] = []
        // Silent; half a head; half a body; an idle keep-alive connection; upgraded without `connect`.
        sockets.append(try await RawSocket.connected(port: server.port))
        let halfHead = try await RawSocket.connected(port: server.port)
        try await halfHead.send("GET /health HTTP/1.1\r\nHo")
        sockets.append(halfHead)
        let halfBody = try await RawSocket.connected(port: server.port)
        try await halfBody.send("POST /v1/login HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        sockets.append(halfBody)
        let idle = try await RawSocket.connected(port: server.port)
        try await idle.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        _ = try await idle.readResponse()
        sockets.append(idle)
        let noConnect = try await RawSocket.connected(port: server.port)
        try await noConnect.send(RawSocket.upgradeRequest(port: server.port, token: bob))
        _ = try await noConnect.readHead()
        sockets.append(noConnect)
        // Half-closed: the server has closed it already.
        let halfClosed = try await RawSocket.connected(port: server.port)
        try await halfClosed.send("GET /health HTTP/1.1\r\n")
        halfClosed.halfClose()
        sockets.append(halfClosed)
        // Live, never reading, its buffers full of pongs: it will not answer the server's close frame.
        let deaf = try await RawSocket.openWebSocket(port: server.port, token: bob, receiveBuffer: 4096)
        let ping = RawSocket.clientFrame([UInt8](repeating: 1, count: 125), opcode: 0x9)
        for _ in 0..<20 { try await deaf.send(Array(repeating: ping, count: 500).flatMap { $0 }) }
        sockets.append(deaf)
        // Live and well-behaved, sending: every acknowledged message must be stored.
        let sender = WebSocketProbe(url: server.webSocketURL, token: alice)
        _ = try await sender.nextFrame()
        var acknowledged: Set<String> = []
        for number in 0..<50 {
            try await sender.send(
                .send(SendFrame(ref: "\(number)", conversationId: conversation.id, parts: [.text("m\(number)")])))
            if case .ack(let ack) = try await sender.nextFrame(where: { if case .ack = $0 { true } else { false } }) {
                if let message = ack.message { acknowledged.insert(message.id) }
            }
        }

        let took = await server.terminate(timeout: .seconds(30))
        let bound = Duration.seconds(5) + .seconds(1)
        #expect(took != nil, "SIGTERM did not end the server within 30 s")
        #expect(
            took.map { $0 < bound + .seconds(2) } ?? false, "SIGTERM took \(String(describing: took)), bound \(bound)")
        #expect(server.exitStatus == 0)
        for socket in sockets { socket.close() }
        await sender.close()

        let store = try openSQLiteStore(in: directory.path)
        let stored = try await store.messages(
            appId: server.app.appId, conversationId: conversation.id, query: HistoryQuery(limit: 200)
        )
        #expect(acknowledged.count == 50)
        #expect(acknowledged.isSubset(of: Set(stored.messages.map(\.id))))
        try await store.close()
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
