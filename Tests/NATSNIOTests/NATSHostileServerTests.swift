import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import ParleyTesting
import Testing

@testable import NATSNIO

/// The client against servers that misbehave: it closes, reports, stays bounded, and moves on to a real server.
@Suite("Live: hostile servers", .enabled(if: liveServerAvailable, "nats-server not found"), .timeLimit(.minutes(3)))
struct NATSHostileServerTests {
    @Test(arguments: [
        (HostileServer.Behavior.garbage, "unknown operation"),
        (.hugeInfo, "control line longer than 65536 bytes"),
        (.hugeMessage, "declared payload of 2147483648 bytes"),
        (.authorizationViolation, "Authorization Violation"),
    ])
    func aHostileServerIsLeftForTheRealOne(_ behavior: HostileServer.Behavior, _ expected: String) async throws {
        let hostile = try await HostileServer.start(behavior)
        let real = try await NATSServerProcess.start()
        defer { real.stop() }
        let client = try await TestClient.connected("\(hostile.url),\(real.url)")
        let events = try await client.events.wait(for: "connected") { $0.contains(where: \.isConnected) }
        let failure = try #require(events.compactMap(\.attemptFailure).first)
        #expect(failure.contains(expected), "\(failure)")
        #expect(events.last(where: { $0.connectedServer != nil })?.connectedServer?.port == real.port)
        // It works.
        let inbox = client.connection.makeInbox()
        let received = client.consume(inbox)
        _ = try client.connection.subscribe(to: "real.x", into: inbox)
        try client.connection.publish(ByteBuffer(string: "ok"), to: "real.x")
        try await received.wait(for: "a message from the real server") { !$0.isEmpty }
        _ = await client.close()
        await hostile.stop()
    }

    @Test(arguments: [
        (HostileServer.Behavior.garbage, NATSError.Code.maxReconnectsExceeded),
        (.hugeInfo, .maxReconnectsExceeded),
        (.hugeMessage, .maxReconnectsExceeded),
        (.authorizationViolation, .authorizationViolation),
    ])
    func onlyAHostileServerEndsRunWithAnError(_ behavior: HostileServer.Behavior, _ code: NATSError.Code) async throws {
        let hostile = try await HostileServer.start(behavior)
        let client = TestClient(try testConfiguration(hostile.url) { $0.maxReconnectAttempts = 2 })
        let result = try await client.runResult(timeout: .seconds(20))
        guard case .failure(let error) = result else {
            Issue.record("run() should fail")
            return
        }
        #expect((error as? NATSError)?.code == code, "\(error)")
        #expect(!client.connection.isConnected)
        #expect(client.connection.pendingBytes == 0)
        await hostile.stop()
    }
}
