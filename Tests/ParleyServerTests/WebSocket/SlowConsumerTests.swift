import Foundation
import ParleyProtocol
import ParleyServer
import ParleyTesting
import Testing

/// docs/PROTOCOL.md, Limits: "events waiting for one connection: 4 MiB, close 4008 ERR_SLOW_CONSUMER". A client
/// that stops reading must not make the server hold its events without bound.
@Suite(.timeLimit(.minutes(3))) struct SlowConsumerTests {
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
        }
        let alice = try await server.login("alice")
        let bob = try await server.login("bob")
        let conversation = try await server.createConversation(token: alice, type: .direct, with: ["bob"])

        // Bob connects with a small receive buffer, reads his hello, then reads nothing more.
        let slow = try await RawSocket.openWebSocket(port: server.port, token: bob, receiveBuffer: 16 * 1024)
        let hello = try await slow.readFrame()
        #expect(hello.opcode == 0x1 && String(decoding: hello.payload, as: UTF8.self).contains(#""type":"hello""#))

        // Alice sends far more than the queue limit plus everything the kernel and NIO can buffer on the way.
        // Each send waits for its ack: the server keeps serving Alice while Bob is stuck.
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
            guard case .ack = answer else {
                Issue.record("send \(number) was refused: \(answer)")
                return
            }
        }

        // Now Bob reads what reached him: some of the events, then the server's close frame.
        let (texts, close) = try await slow.readUntilClose()
        let received = texts.reduce(0) { $0 + $1.utf8.count }
        // A client that got its close leaves (the server waits for that before it lets the connection go).
        slow.close()
        #expect(close?.code == WebSocketCloseCode.slowConsumer)
        #expect(close?.reason == ErrorCode.slowConsumer.rawValue)
        let sentBytes = messages * messageBytes
        // What the server held for Bob: at most its queue limit, plus what was already handed to NIO and the kernel.
        #expect(received <= limit + inFlightCeiling, "Bob received \(received) of \(sentBytes) bytes")
        #expect(received < sentBytes)
        await sender.close()
        try await server.stop()
    }

    func connect(_ server: TestServer, token: String) async throws -> (WebSocketProbe, HelloFrame) {
        let probe = WebSocketProbe(url: server.webSocketURL, token: token)
        guard case .hello(let hello) = try await probe.nextFrame() else { throw ProbeError.connectionEnded(code: nil) }
        return (probe, hello)
    }
}
