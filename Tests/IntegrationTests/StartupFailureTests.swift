import Foundation
import ParleyProtocol
import ParleyServer
import ParleyTesting
import Testing

/// A server that cannot listen stops with the reason, whatever its queues were doing: none of its parts keeps going
/// once the others are cancelled.
@Suite struct StartupFailureTests {
    /// The webhook and push queues loop until asked to stop; when the listener fails, they are cancelled instead, and
    /// before, they took the cancellation for a store that is unavailable and looped on it at full speed, forever
    /// (the server never stopped, and its start never returned).
    @Test(.timeLimit(.minutes(1))) func aServerWhosePortIsTakenStopsWithTheReasonWhileItsQueuesHaveWork()
        async throws
    {
        let standIn = try await APNsStandIn.start()
        let receiver = try await WebhookReceiver.start()
        receiver.answerEveryRequest(with: .status(500))
        let configure = { (configuration: inout ServerConfiguration) in
            WebhookTests.fast(&configuration)
            configuration.apns = standIn.apnsConfiguration()
        }
        let server = try await TestServer.start(configure: configure)
        _ = try await WebhookTests.register(server, receiver, events: ["messages"])
        let alice = try await server.login("alice")
        _ = try await server.login("bob")
        let group = try await server.createConversation(token: alice, with: ["bob"])
        _ = try await WebhookTests.send("queued", to: group.id, as: alice, on: server)
        _ = await server.application.webhookAttempts { !$0.isEmpty }
        try await server.stop()

        // Something else listens on a port; the server over the same data (an endpoint, a delivery due) is given it.
        let holder = try await WebhookReceiver.start()
        do {
            let restarted = try await TestServer.start(
                dataDirectory: server.dataDirectory, port: holder.port, configure: configure)
            Issue.record("the server started on a port in use")
            try await restarted.stop()
        } catch {
            #expect(error is AddressInUseError, "\(error)")
        }
        try await holder.stop()
        try await receiver.stop()
        try await standIn.stop()
    }
}
