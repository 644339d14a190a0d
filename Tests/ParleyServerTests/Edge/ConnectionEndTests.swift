import Foundation
import ParleyProtocol
import ParleyServer
import ParleyTesting
import Testing

/// docs/PROTOCOL.md, "The connection edge": every accepted connection ends. A peer that leaves is noticed at once
/// whatever state its connection is in; one that stays silent or slow is closed at its deadline; the server holds
/// nothing for it afterwards. (The deadlines are two seconds here: `TestServer.startForEdgeTests`.)
@Suite(.timeLimit(.minutes(3))) struct ConnectionEndTests {
    /// What a load balancer's TCP health check does, 200 times: the server closes its side of every one at once.
    @Test func connectThenCloseLeavesNothingOpen() async throws {
        let server = try await TestServer.startForEdgeTests()
        for _ in 0..<200 {
            let socket = try await RawSocket.connected(port: server.port)
            socket.close()
        }
        let after = await server.snapshot { $0.openConnections == 0 }
        #expect(after.openConnections == 0, "\(after)")
        #expect(after.connectionsInSetup == 0, "\(after)")
        try await server.stop()
    }

    /// Graceful shutdown asks the connections that are not WebSockets to finish at once: an idle keep-alive connection
    /// and one that has sent nothing yet are closed then, long before the close timeout (60 s here) would close them.
    @Test func gracefulShutdownClosesIdleConnectionsAtOnce() async throws {
        let server = try await TestServer.start {
            TestServer.patientDeadlines(&$0)
            $0.closeTimeout = .seconds(60)
        }
        let idle = try await RawSocket.connected(port: server.port, readTimeout: .seconds(20))
        try await idle.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try await idle.readResponse().status == 200)
        let silent = try await RawSocket.connected(port: server.port, readTimeout: .seconds(20))
        #expect(await server.snapshot { $0.openConnections >= 2 }.openConnections >= 2)
        async let stopped: Void = server.stop()
        for (name, socket) in [("idle", idle), ("silent", silent)] {
            let (bytes, ending) = try await socket.readToEnd()
            #expect(ending == .closed && bytes.isEmpty, "\(name): \(ending), \(bytes.count) bytes")
            socket.close()
        }
        try await stopped
    }

    /// A server cancelled instead of shut down gracefully (its service group cancels it when another service fails)
    /// stops at once: it still sends its WebSockets 1001, but does not wait the close timeout (60 s here) for a peer
    /// that never answers the close frame.
    @Test func aCancelledServerDropsItsWebSocketsWithoutWaiting() async throws {
        let server = try await TestServer.start {
            TestServer.patientDeadlines(&$0)
            $0.closeTimeout = .seconds(60)
        }
        let token = try await server.login("alice")
        let deaf = try await RawSocket.openWebSocket(port: server.port, token: token, readTimeout: .seconds(50))
        // Caught up: the server has read the `connect` (unread, it would make the close a reset).
        _ = try await deaf.readText(containing: #""type":"caughtUp""#)
        let started = ContinuousClock.now
        let error = await server.cancel()
        let took = ContinuousClock.now - started
        #expect(error == nil || error is CancellationError, "\(String(describing: error))")
        #expect(took < .seconds(30), "the cancelled server took \(took) to stop")
        let (_, close) = try await deaf.readUntilClose()
        #expect(close?.code == 1001)
        let (bytes, ending) = try await deaf.readToEnd()
        #expect(ending == .closed && bytes.isEmpty, "\(ending), \(bytes.count) bytes")
        deaf.close()
    }

    /// A WebSocket leaves the admission gate's connections once upgraded (the registry has it): it counts once, and
    /// graceful shutdown's quiesce and final close of the gate's connections do not reach it.
    @Test func anUpgradedWebSocketCountsOnceAndNotAsAnHTTPConnection() async throws {
        let server = try await TestServer.start { TestServer.patientDeadlines(&$0) }
        // Logged in on a connection that closes after the answer: URLSession.shared would otherwise keep it, and close
        // it whenever other tests' requests crowd its pool (the count then moved between two snapshots).
        let login = try await server.request(
            "POST", "/v1/login", headers: ["Connection": "close"],
            body: LoginRequest(appId: server.app.appId, uid: "alice", authKey: server.app.authKey))
        let token = try login.decode(LoginResponse.self).authToken
        let before = await server.snapshot { $0.openConnections == 0 }
        #expect(before.openConnections == 0, "\(before)")
        var sockets: [RawSocket] = []
        for _ in 0..<3 { sockets.append(try await RawSocket.openWebSocket(port: server.port, token: token)) }
        let after = await server.snapshot { $0.webSockets == 3 && $0.liveConnections == 3 }
        #expect(after.webSockets == 3 && after.openConnections == 3, "\(after)")
        for socket in sockets { socket.close() }
        try await server.stop()
    }

    enum HalfWay: String, CaseIterable, Sendable {
        case nothing
        case halfARequestHead
        case halfAnUpgradeHead
        case anUpgradeWithoutConnect
        case aRequestWithHalfItsBody
        case aRequestServed
    }

    static func send(_ halfWay: HalfWay, on socket: RawSocket, token: String) async throws {
        switch halfWay {
        case .nothing:
            break
        case .halfARequestHead:
            try await socket.send("GET /health HTTP/1.1\r\nHo")
        case .halfAnUpgradeHead:
            try await socket.send("GET /v1/ws HTTP/1.1\r\nUpgrade: websocket\r\n")
        case .anUpgradeWithoutConnect:
            try await socket.send(RawSocket.upgradeRequest(port: 0, token: token))
            _ = try await socket.readHead()
        case .aRequestWithHalfItsBody:
            try await socket.send("POST /v1/login HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"a")
        case .aRequestServed:
            try await socket.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = try await socket.readResponse()
        }
    }

    /// The peer half-closes (FIN) at any stage: the server closes the connection at once, long before any deadline.
    @Test(arguments: HalfWay.allCases) func aHalfCloseEndsTheConnectionAtOnce(_ halfWay: HalfWay) async throws {
        let server = try await TestServer.startForEdgeTests {
            $0.edge.requestHeadTimeout = .seconds(60)
            $0.edge.requestBodyTimeout = .seconds(60)
            $0.edge.idleTimeout = .seconds(60)
            $0.handshakeTimeout = .seconds(60)
        }
        let token = try await server.login("alice")
        // The login's keep-alive connection (URLSession's) may still be open: it counts in both snapshots.
        let before = await server.snapshot()
        let socket = try await RawSocket.connected(port: server.port, readTimeout: .seconds(20))
        try await Self.send(halfWay, on: socket, token: token)
        socket.halfClose()
        let (_, ending) = try await socket.readToEnd()
        #expect(ending == .closed, "\(halfWay)")
        // (The login's connection may close meanwhile, so the count alone does not tell that this one is gone.)
        // (The registry lets a closed WebSocket go a moment after the close reached the peer.)
        let after = await server.snapshot {
            $0.openConnections <= before.openConnections && $0.connectionsInSetup == 0 && $0.webSockets == 0
        }
        #expect(after.openConnections <= before.openConnections && after.webSockets == 0, "\(halfWay): \(after)")
        #expect(after.connectionsInSetup == 0, "\(halfWay): \(after)")
        socket.close()
        try await server.stop()
    }

    /// A peer that stays silent at any stage is closed at that stage's deadline: the head deadline, the body deadline,
    /// the keep-alive idle timeout, the WebSocket handshake timeout (4400).
    @Test(arguments: HalfWay.allCases) func aSilentPeerIsClosedAtItsDeadline(_ halfWay: HalfWay) async throws {
        let server = try await TestServer.startForEdgeTests { $0.handshakeTimeout = .seconds(2) }
        let token = try await server.login("alice")
        let socket = try await RawSocket.connected(port: server.port, readTimeout: .seconds(20))
        try await Self.send(halfWay, on: socket, token: token)
        let (bytes, ending) = try await socket.readToEnd()
        #expect(ending == .closed, "\(halfWay)")
        let answer = String(decoding: bytes, as: UTF8.self)
        switch halfWay {
        case .halfARequestHead, .halfAnUpgradeHead, .aRequestWithHalfItsBody:
            #expect(
                answer.hasPrefix("HTTP/1.1 408 Request Timeout\r\n") && answer.contains("ERR_REQUEST_TIMEOUT"),
                "\(halfWay)")
        case .anUpgradeWithoutConnect:
            // A close frame: 4400 ERR_HANDSHAKE_FAILED.
            #expect(bytes.starts(with: [0x88]) && bytes.count > 4 && bytes[2] == 0x11 && bytes[3] == 0x30, "\(bytes)")
        case .nothing, .aRequestServed:
            #expect(bytes.isEmpty)
        }
        socket.close()
        let after = await server.snapshot { $0.openConnections == 0 }
        #expect(after.openConnections == 0 && after.webSockets == 0, "\(halfWay): \(after)")
        try await server.stop()
    }

    /// A head sent a byte at a time (slowloris) is cut off at the head deadline, however often bytes come.
    @Test func aHeadTrickledByteByByteIsCutOffAtTheDeadline() async throws {
        let server = try await TestServer.startForEdgeTests()
        let socket = try await RawSocket.connected(port: server.port, readTimeout: .seconds(20))
        let head =
            Array("GET /health HTTP/1.1\r\nHost: x\r\n".utf8) + Array(repeating: UInt8(ascii: "X"), count: 10_000)
        let started = ContinuousClock.now
        var refused = false
        for byte in head {
            do {
                try await socket.send([byte])
            } catch {
                refused = true
                break
            }
            // One byte per 20 ms would take 200 s; the deadline is 2 s.
            if ContinuousClock.now - started > .seconds(10) { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        let (bytes, ending) = try await socket.readToEnd()
        #expect(refused || ending != .stillOpen)
        #expect(String(decoding: bytes, as: UTF8.self).hasPrefix("HTTP/1.1 408"))
        try await server.stop()
    }

    /// A WebSocket peer that leaves with FIN and no close frame is noticed at once: its user goes offline after the
    /// presence grace, not at the next heartbeat (an hour here).
    @Test func aWebSocketPeerThatLeavesWithoutACloseFrameGoesOfflineAfterTheGrace() async throws {
        let server = try await TestServer.startForEdgeTests {
            $0.heartbeatInterval = .seconds(3600)
            $0.presenceGrace = .milliseconds(100)
        }
        let alice = try await server.login("alice")
        let bob = try await server.login("bob")
        _ = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        let watcher = try await RawSocket.openWebSocket(port: server.port, token: alice)
        _ = try await watcher.readText(containing: #""type":"caughtUp""#)
        let leaving = try await RawSocket.openWebSocket(port: server.port, token: bob)
        _ = try await leaving.readText(containing: #""type":"caughtUp""#)
        _ = try await watcher.readText(containing: #""online":true"#)
        let left = ContinuousClock.now
        leaving.halfClose()
        _ = try await leaving.readToEnd()
        let offline = try await watcher.readText(containing: #""online":false"#)
        #expect(offline.text.contains(#""uid":"bob""#))
        // Noticed at once, then the grace: nowhere near the heartbeat.
        #expect(ContinuousClock.now - left < .seconds(30))
        watcher.close()
        leaving.close()
        try await server.stop()
    }
}
