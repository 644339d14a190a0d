import Foundation
import ParleyProtocol
import ParleyServer
import ParleyTesting
import Testing

/// docs/PROTOCOL.md, Limits: "events waiting for one connection: 4 MiB, close 4008 ERR_SLOW_CONSUMER". A client
/// that stops reading must not make the server hold its events without bound.
@Suite(.timeLimit(.minutes(3))) struct SlowConsumerTests {
    /// Bob, on a raw socket with a small receive buffer, reads his hello and then nothing; Alice sends him far more
    /// than the queue limit plus everything the kernel and NIO can buffer on the way, each send waiting for its ack
    /// (the server keeps serving Alice while Bob is stuck).
    struct Flood {
        var slow: RawSocket
        var sender: WebSocketProbe
        /// What may sit between the server's queue and Bob: the kernel's buffers, NIO's, one message.
        var inFlightCeiling: Int
        var sentBytes: Int
    }

    func flood(_ server: TestServer, limit: Int) async throws -> Flood {
        let alice = try await server.login("alice")
        let bob = try await server.login("bob")
        let conversation = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        let slow = try await RawSocket.openWebSocket(port: server.port, token: bob, receiveBuffer: 16 * 1024)
        let hello = try await slow.readFrame()
        #expect(hello.opcode == 0x1 && String(decoding: hello.payload, as: UTF8.self).contains(#""type":"hello""#))
        let messageBytes = 60 * 1024
        let inFlightCeiling = RawSocket.kernelSendBufferMaximum + 2 * 16 * 1024 + 256 * 1024 + messageBytes
        let messages = (limit + inFlightCeiling) * 2 / messageBytes + 1
        let (sender, _) = try await connect(server, token: alice)
        let text = String(repeating: "x", count: messageBytes - 16)
        for number in 0..<messages {
            try await sender.send(
                .send(SendFrame(ref: "\(number)", conversationId: conversation.id, parts: [.text("\(number):" + text)]))
            )
            let answer = try await sender.nextFrame { frame in
                switch frame {
                case .ack, .error: true
                default: false
                }
            }
            guard case .ack = answer else { throw FloodRefused(number: number, answer: "\(answer)") }
        }
        return Flood(
            slow: slow, sender: sender, inFlightCeiling: inFlightCeiling, sentBytes: messages * messageBytes)
    }

    struct FloodRefused: Error {
        var number: Int
        var answer: String
    }

    @Test func aClientThatDoesNotReadIsClosedWith4008AndWhatTheServerHeldForItStayedBounded() async throws {
        let limit = 512 * 1024
        // Bob's raw client stops reading, so it stops answering pings too: with the default heartbeat, a slow
        // machine (the sends below take long under CPU load) can reach the ping timeout (1001) before the queue
        // fills. An hour-long heartbeat leaves the slow-consumer rule as the only thing that can close him.
        let server = try await TestServer.start {
            $0.outboundQueueLimitBytes = limit
            $0.heartbeatInterval = .seconds(3600)
            // Alice sends ~170 messages one after the other: on a fast machine that is quicker than the per-user send
            // budget (100 at once, 20 a second) refills, which is not what this test is about.
            $0.edge.messagesPerUser = nil
            // Bob reads only after the flood: the close frame waits behind what his socket holds until then.
            $0.closeTimeout = .seconds(120)
        }
        let flood = try await flood(server, limit: limit)

        // Now Bob reads what reached him: some of the events, then the server's close frame.
        let (texts, close) = try await flood.slow.readUntilClose()
        let received = texts.reduce(0) { $0 + $1.utf8.count }
        // A client that got its close leaves (the server waits for that before it lets the connection go).
        flood.slow.close()
        #expect(close?.code == WebSocketCloseCode.slowConsumer)
        #expect(close?.reason == ErrorCode.slowConsumer.rawValue)
        // What the server held for Bob: at most its queue limit, plus what was already handed to NIO and the kernel.
        #expect(received <= limit + flood.inFlightCeiling, "Bob received \(received) of \(flood.sentBytes) bytes")
        #expect(received < flood.sentBytes)
        await flood.sender.close()
        try await server.stop()
    }

    /// A client that never reads again is closed all the same: the overflow starts the close at once (the close frame
    /// queued behind what the full socket holds), and the close timeout ends the connection. It once waited for the
    /// socket to drain, which never came: such a client held its connection until the heartbeat's 1001, 45-65 s later
    /// (found by the soak, docs/BENCHMARKS.md).
    @Test func aClientThatNeverReadsAgainIsClosedWithinTheCloseTimeout() async throws {
        let limit = 256 * 1024
        let server = try await TestServer.start {
            $0.outboundQueueLimitBytes = limit
            $0.heartbeatInterval = .seconds(3600)
            $0.edge.messagesPerUser = nil
            $0.closeTimeout = .seconds(1)
            $0.metrics.token = Self.metricsToken
        }
        let flood = try await flood(server, limit: limit)
        // Bob has read nothing since his hello: the server ends his connection anyway, as a slow consumer.
        #expect(try await Self.closes(server, code: 4008, reach: 1), "no 4008 while the client does not read")
        // Only Alice is connected now; what Bob's socket still holds ends without more.
        let scrape = try await server.request(
            "GET", "/metrics", headers: ["Authorization": "Bearer \(Self.metricsToken)"])
        #expect(String(decoding: scrape.body, as: UTF8.self).contains("\nparley_websocket_connections 1.0\n"))
        let (texts, _) = try await flood.slow.readUntilClose()
        #expect(texts.reduce(0) { $0 + $1.utf8.count } <= limit + flood.inFlightCeiling)
        flood.slow.close()
        await flood.sender.close()
        try await server.stop()
    }

    static let metricsToken = "metrics-token-of-the-slow-consumer-tests"

    /// Whether the server's count of closes with `code` reaches `count` within 10 s (scraped every 20 ms).
    static func closes(_ server: TestServer, code: UInt16, reach count: Int) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        let series = "parley_websocket_closes_total{code=\"\(code)\"} "
        while true {
            let scrape = try await server.request(
                "GET", "/metrics", headers: ["Authorization": "Bearer \(metricsToken)"])
            let text = String(decoding: scrape.body, as: UTF8.self)
            let value = text.split(separator: "\n").first { $0.hasPrefix(series) }.flatMap {
                Double($0.dropFirst(series.count))
            }
            if let value, value >= Double(count) { return true }
            guard ContinuousClock.now < deadline else { return false }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    func connect(_ server: TestServer, token: String) async throws -> (WebSocketProbe, HelloFrame) {
        let probe = WebSocketProbe(url: server.webSocketURL, token: token)
        guard case .hello(let hello) = try await probe.nextFrame() else { throw ProbeError.connectionEnded(code: nil) }
        return (probe, hello)
    }
}
