import Foundation
import NIOConcurrencyHelpers
import Parley
import ParleyTesting
import Testing

/// Background time against the real server (docs/SDK.md, "Background time"): UIKit's background tasks stand behind
/// `BackgroundTimeSource`, so the rule runs here with a source that records what it is asked and can take the time
/// back as the system does.
@Suite(.timeLimit(.minutes(2))) struct BackgroundTimeTests {
    final class RecordingBackgroundTime: BackgroundTimeSource {
        private struct State {
            var log: [String] = []
            var expirations: [Int: @Sendable () -> Void] = [:]
            var next = 0
        }

        private let state = NIOLockedValueBox(State())

        var log: [String] { state.withLockedValue { $0.log } }

        func begin(name: String, expiration: @escaping @Sendable () -> Void) async -> Int? {
            state.withLockedValue { state in
                state.next += 1
                state.log.append("begin \(state.next)")
                state.expirations[state.next] = expiration
                return state.next
            }
        }

        func end(_ id: Int) async {
            state.withLockedValue { state in
                state.log.append("end \(id)")
                state.expirations[id] = nil
            }
        }

        /// The system takes time `id` back.
        func expire(_ id: Int) {
            state.withLockedValue { $0.expirations[id] }?()
        }
    }

    final class Rig: Sendable {
        let server: NIOLockedValueBox<TestServer>
        let clock: ManualClock
        let time: RecordingBackgroundTime
        let client: ParleyClient
        let conversation: String

        init(
            server: TestServer, clock: ManualClock, time: RecordingBackgroundTime, client: ParleyClient,
            conversation: String
        ) {
            self.server = NIOLockedValueBox(server)
            self.clock = clock
            self.time = time
            self.client = client
            self.conversation = conversation
        }

        /// The server goes away (its port refuses connections: socket and HTTP fail at once).
        func serverDown() async throws {
            try await server.withLockedValue { $0 }.stop()
            _ = await client.waitForStatus { $0 != .connected }
        }

        /// The server comes back on the same port with the same data.
        func serverUp() async throws {
            let old = server.withLockedValue { $0 }
            let restarted = try await TestServer.start(dataDirectory: old.dataDirectory, port: old.port)
            server.withLockedValue { $0 = restarted }
        }

        func stop() async throws {
            await client.shutdown()
            try await server.withLockedValue { $0 }.stop()
        }

        /// Moves virtual time to the next timer until `done` holds (at most 100 steps, each waiting at most 5 s for
        /// a timer or for `done`): the outbox retries on the client's clock.
        func advanceUntil(_ done: @Sendable () -> Bool) async -> Bool {
            for _ in 0..<100 where !done() {
                _ = await eventually(timeout: .seconds(5)) { clock.sleeperCount > 0 || done() }
                clock.advanceToNextDeadline()
                _ = await eventually(timeout: .milliseconds(200)) { done() }
            }
            return done()
        }
    }

    static func rig() async throws -> Rig {
        // A port the test may stop and start the server on again (RestartablePort: out of the ephemeral range).
        let server = try await TestServer.start(port: RestartablePort.take())
        let clock = ManualClock()
        let time = RecordingBackgroundTime()
        var settings = try testSettings(server: server)
        settings.backgroundTime = time
        settings.appLifecycle = nil
        let client = try ParleyClient(appId: server.app.appId, settings: settings, clock: clock)
        try await client.start()
        _ = try await server.login("bob")
        try await client.login(uid: "alice", authKey: server.app.authKey)
        await client.waitUntilConnected()
        let conversation = try await client.directConversation(with: "bob")
        return Rig(server: server, clock: clock, time: time, client: client, conversation: conversation.id)
    }

    @Test func aSendLeftAsTheAppLeavesKeepsBackgroundTimeUntilItIsStored() async throws {
        let rig = try await Self.rig()
        // The server out of reach: the send waits in the outbox.
        try await rig.serverDown()
        let entry = try rig.client.queueMessage(parts: [.text("as I leave")], to: .conversation(rig.conversation))
        #expect(rig.time.log.isEmpty)  // in the foreground: no background time
        await rig.client.appDidEnterBackground()
        #expect(await eventually { rig.time.log == ["begin 1"] })
        // The server back: the outbox sends over HTTP (the socket stays closed in the background), then the time ends.
        try await rig.serverUp()
        #expect(await rig.advanceUntil { rig.time.log == ["begin 1", "end 1"] })
        #expect(rig.client.outgoingMessages().isEmpty)
        let page = try await rig.client.fetchMessages(conversationId: rig.conversation)
        #expect(page.messages.filter { $0.clientMessageId == entry.clientMessageId }.count == 1)
        #expect(rig.client.connectionStatus == .disconnected)
        // Back in the foreground with nothing to do: nothing more is asked.
        await rig.client.appWillEnterForeground()
        await rig.client.waitUntilConnected()
        #expect(rig.time.log == ["begin 1", "end 1"])
        try await rig.stop()
    }

    @Test func nothingToSendAsksForNoTime() async throws {
        let rig = try await Self.rig()
        _ = try await rig.client.sendTextMessage("sent before", to: .conversation(rig.conversation))
        await rig.client.appDidEnterBackground()
        await rig.client.appWillEnterForeground()
        await rig.client.waitUntilConnected()
        #expect(rig.time.log.isEmpty)
        try await rig.stop()
    }

    @Test func timeTheSystemTakesBackEndsAtOnceAndIsAskedForAgainOnlyAfterTheNextForeground() async throws {
        let rig = try await Self.rig()
        try await rig.serverDown()
        _ = try rig.client.queueMessage(parts: [.text("one")], to: .conversation(rig.conversation))
        await rig.client.appDidEnterBackground()
        #expect(await eventually { rig.time.log == ["begin 1"] })
        rig.time.expire(1)
        #expect(await eventually { rig.time.log == ["begin 1", "end 1"] })
        // More work in the same stay in the background: no new request.
        _ = try rig.client.queueMessage(parts: [.text("two")], to: .conversation(rig.conversation))
        #expect(rig.client.outgoingMessages().count == 2)
        await rig.client.appWillEnterForeground()
        await rig.client.appDidEnterBackground()
        #expect(await eventually { rig.time.log == ["begin 1", "end 1", "begin 2"] })
        try await rig.serverUp()
        #expect(await rig.advanceUntil { rig.time.log == ["begin 1", "end 1", "begin 2", "end 2"] })
        #expect(rig.client.outgoingMessages().isEmpty)
        try await rig.stop()
    }
}
