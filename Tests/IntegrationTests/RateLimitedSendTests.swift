import Foundation
import Parley
import ParleyServer
import ParleyTesting
import Testing

/// docs/SDK.md, `ERR_RATE_LIMITED`: messages refused for the user's rate are not lost and not failed: the outbox waits
/// what the server says and sends them again, each once, in order.
@Suite(.timeLimit(.minutes(2))) struct RateLimitedSendTests {
    @Test func theOutboxWaitsWhatTheServerSaysAndSendsEveryMessageOnceInOrder() async throws {
        let server = try await TestServer.start { configuration in
            configuration.edge.messagesPerUser = RateLimit(perSecond: 20, burst: 2)
        }
        let alice = try await ParleyClient.initialize(appId: server.app.appId, settings: testSettings(server: server))
        try await alice.login(uid: "alice", authKey: server.app.authKey)
        _ = try await ParleyAdmin(serverURL: server.baseURL, restAPIKey: server.app.restAPIKey).createUser(uid: "bob")
        await alice.waitUntilConnected()
        // Ten messages in a row: two go through at once, the others are refused for the rate, and the outbox sends
        // each again after the retryAfterMs the server gave (a failure would throw here).
        for number in 0..<10 { try await alice.sendTextMessage("m\(number)", to: .user("bob")) }
        let history = try await alice.fetchMessages(with: .user("bob")).messages.map(\.text)
        #expect(history == (0..<10).map { "m\($0)" })
        #expect(alice.outgoingMessages().isEmpty)
        await alice.shutdown()
        try await server.stop()
    }
}
