import NIOCore
import ParleyTesting
import Testing

@testable import NATSNIO

/// Failures of real servers: killed, restarted, clustered, frozen.
@Suite("Live: reconnect", .enabled(if: liveServerAvailable, "nats-server not found"), .timeLimit(.minutes(3)))
struct NATSReconnectTests {
    @Test func aRestartedServerGetsTheSubscriptionsAndTheBufferedPublishesInOrder() async throws {
        let server = try await NATSServerProcess.startRestartable()
        defer { server.stop() }
        let client = try await TestClient.connected(server.url)
        let other = try await TestClient.connected(server.url)
        let inbox = client.connection.makeInbox()
        let received = client.consume(inbox)
        _ = try client.connection.subscribe(to: "restart.x", into: inbox)
        try await client.connection.flush(timeout: .seconds(10))

        server.kill()
        try await client.events.wait(for: "disconnected") { $0.contains(where: \.isDisconnected) }
        #expect(!client.connection.isConnected)
        await #expect {
            try await client.connection.flush(timeout: .seconds(5))
        } throws: { ($0 as? NATSError)?.code == .notConnected }
        // Published while the server is down: buffered, sent after the re-subscription.
        for index in 0..<100 {
            try client.connection.publish(ByteBuffer(string: "down-\(index)"), to: "restart.x")
        }
        #expect(client.connection.pendingBytes > 0)

        try await server.restart()
        let events = try await client.events.wait(for: "reconnected") { $0.contains(where: \.isReconnected) }
        let kinds = events.filter { $0.isConnected || $0.isDisconnected || $0.isReconnected }
        #expect(kinds.first?.isConnected == true)
        #expect(kinds.dropFirst().first?.isDisconnected == true)
        #expect(kinds.last?.isReconnected == true)
        let messages = try await received.wait(for: "100 buffered messages") { $0.count >= 100 }
        #expect(messages.map { String(buffer: $0.payload) } == (0..<100).map { "down-\($0)" })
        #expect(client.connection.statistics.reconnects == 1)

        // Subscriptions work again without re-subscribing by hand, also for another client's publishes.
        try await other.connection.waitUntilConnected(timeout: .seconds(15))
        try await client.connection.flush(timeout: .seconds(10))
        try other.connection.publish(ByteBuffer(string: "after"), to: "restart.x")
        let all = try await received.wait(for: "the other client's message") { $0.count >= 101 }
        #expect(String(buffer: all[100].payload) == "after")
        _ = await client.close()
        _ = await other.close()
    }

    @Test func theOutboundBufferIsBoundedWhileTheServerIsDown() async throws {
        let server = try await NATSServerProcess.startRestartable()
        defer { server.stop() }
        let client = try await TestClient.connected(server.url) { $0.maxPendingBytes = 64 * 1024 }
        let inbox = client.connection.makeInbox()
        let received = client.consume(inbox)
        _ = try client.connection.subscribe(to: "bound.x", into: inbox)
        try await client.connection.flush(timeout: .seconds(10))
        server.kill()
        try await client.events.wait(for: "disconnected") { $0.contains(where: \.isDisconnected) }

        let payload = ByteBuffer(repeating: 0x62, count: 1000)
        var accepted = 0
        var refusal: NATSError?
        while refusal == nil, accepted < 1000 {
            do {
                try client.connection.publish(payload, to: "bound.x")
                accepted += 1
            } catch {
                refusal = error
            }
        }
        #expect(refusal?.code == .outboundBufferFull)
        #expect(accepted > 50 && accepted < 66, "about 64 KiB of 1 KB messages: \(accepted)")
        #expect(client.connection.pendingBytes <= 64 * 1024)
        // Still refused: nothing was sent.
        #expect(throws: NATSError.self) { try client.connection.publish(payload, to: "bound.x") }

        try await server.restart()
        try await client.events.wait(for: "reconnected") { $0.contains(where: \.isReconnected) }
        try await client.connection.flush(timeout: .seconds(10))
        try client.connection.publish(ByteBuffer(string: "again"), to: "bound.x")
        let acceptedCount = accepted
        let messages = try await received.wait(for: "the buffered and the new message") {
            $0.count >= acceptedCount + 1
        }
        #expect(messages.count == accepted + 1)
        #expect(String(buffer: messages[accepted].payload) == "again")
        _ = await client.close()
    }

    @Test func aClusterMemberKilledMovesTheClientToAnotherMember() async throws {
        let servers = try await NATSServerProcess.startCluster(name: "failover")
        defer {
            for server in servers { server.stop() }
        }
        // Given only server 1: the others come from INFO connect_urls.
        let client = try await TestClient.connected(servers[0].url)
        let discovered = try await client.events.wait(for: "discovered servers") { events in
            events.contains { if case .serversDiscovered = $0 { true } else { false } }
        }
        let discoveredPorts = Set(
            discovered.flatMap { event -> [Int] in
                if case .serversDiscovered(let servers) = event { return servers.map(\.port) }
                return []
            })
        #expect(discoveredPorts == [servers[1].port, servers[2].port])

        let inbox = client.connection.makeInbox()
        let received = client.consume(inbox)
        _ = try client.connection.subscribe(to: "cluster.x", into: inbox)
        try await client.connection.flush(timeout: .seconds(10))

        servers[0].kill()
        let events = try await client.events.wait(for: "reconnected") { $0.contains(where: \.isReconnected) }
        let newPort = try #require(events.last(where: \.isReconnected)?.connectedServer?.port)
        #expect(newPort == servers[1].port || newPort == servers[2].port)
        try await client.connection.flush(timeout: .seconds(10))

        // A client on the member the client did not move to publishes; interest crosses the route asynchronously,
        // so publish until one arrives (bounded), then check it is what was published.
        let otherServer = newPort == servers[1].port ? servers[2] : servers[1]
        let publisher = try await TestClient.connected(otherServer.url)
        var delivered = false
        for attempt in 0..<100 where !delivered {
            try publisher.connection.publish(ByteBuffer(string: "\(attempt)"), to: "cluster.x")
            delivered =
                (try? await received.wait(for: "a message across the cluster", timeout: .milliseconds(200)) {
                    !$0.isEmpty
                }) != nil
        }
        #expect(delivered)
        #expect(received.items.first?.subject == "cluster.x")
        _ = await publisher.close()
        _ = await client.close()
    }

    @Test func aFrozenServerIsDetectedAsStaleAndTheClientMovesOn() async throws {
        let frozen = try await NATSServerProcess.start()
        let healthy = try await NATSServerProcess.start()
        defer {
            frozen.resume()
            frozen.stop()
            healthy.stop()
        }
        let client = try await TestClient.connected("\(frozen.url),\(healthy.url)") {
            $0.pingInterval = .milliseconds(200)
            $0.maxPingsOutstanding = 2
        }
        let connected = try await client.events.wait(for: "connected") { $0.contains(where: \.isConnected) }
        #expect(connected.first(where: \.isConnected)?.connectedServer?.port == frozen.port)
        let start = ContinuousClock.now
        frozen.pause()
        let events = try await client.events.wait(for: "reconnected to the healthy server") {
            $0.contains(where: \.isReconnected)
        }
        let elapsed = ContinuousClock.now - start
        let reason = try #require(events.first(where: \.isDisconnected)?.disconnectReason)
        #expect(reason.contains("stale"), "\(reason)")
        #expect(events.last(where: \.isReconnected)?.connectedServer?.port == healthy.port)
        #expect(elapsed < .seconds(10))
        // It works on the healthy server.
        let inbox = client.connection.makeInbox()
        let received = client.consume(inbox)
        _ = try client.connection.subscribe(to: "stale.x", into: inbox)
        try client.connection.publish(ByteBuffer(string: "ok"), to: "stale.x")
        try await received.wait(for: "a message") { !$0.isEmpty }
        frozen.resume()
        _ = await client.close()
    }

    @Test func lameDuckModeMovesTheClientToAnotherServer() async throws {
        let leaving = try await NATSServerProcess.start()
        let staying = try await NATSServerProcess.start()
        defer {
            leaving.kill()
            leaving.stop()
            staying.stop()
        }
        let client = try await TestClient.connected("\(leaving.url),\(staying.url)")
        let inbox = client.connection.makeInbox()
        let received = client.consume(inbox)
        _ = try client.connection.subscribe(to: "ldm.x", into: inbox)
        try await client.connection.flush(timeout: .seconds(10))
        leaving.enterLameDuckMode()
        let events = try await client.events.wait(for: "reconnected") { $0.contains(where: \.isReconnected) }
        let lameDuckIndex = events.firstIndex(of: .lameDuckMode)
        let reconnectedIndex = events.firstIndex { $0.isReconnected }
        let lameDuck = try #require(lameDuckIndex)
        let reconnected = try #require(reconnectedIndex)
        #expect(lameDuck < reconnected)
        #expect(events[reconnected].connectedServer?.port == staying.port)
        try client.connection.publish(ByteBuffer(string: "moved"), to: "ldm.x")
        try await received.wait(for: "a message on the new server") { !$0.isEmpty }
        _ = await client.close()
    }
}
