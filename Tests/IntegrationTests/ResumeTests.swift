import Foundation
import Parley
import ParleyTesting
import Testing

/// Nothing lost, nothing twice: what a client misses while disconnected (or while its app is not running) arrives
/// in order before live events; what cannot be replayed is announced; sends go through a durable outbox.
@Suite struct ResumeTests {
    /// A manual-mode client (the test decides when it is connected) with a recorder.
    struct Member {
        let client: ParleyClient
        let recorder: RecordingListener
        let storage: TemporaryDirectory
    }

    func member(_ uid: String, on server: TestServer, storage: TemporaryDirectory? = nil, login: Bool = true)
        async throws -> Member
    {
        let storage = try storage ?? TemporaryDirectory(prefix: "parley-resume")
        let client = try ParleyClient(
            appId: server.app.appId, settings: testSettings(server: server, storage: storage, autoConnect: false)
        )
        let recorder = RecordingListener()
        client.addEventListener("recorder", recorder)
        try await client.start()
        if login { try await client.login(uid: uid, authKey: server.app.authKey) }
        try await client.connect()
        return Member(client: client, recorder: recorder, storage: storage)
    }

    static func messages(_ events: [Event], in conversationId: String) -> [String] {
        events.compactMap { event in
            guard event.conversationId == conversationId, case .messageSent(let message) = event.payload else {
                return nil
            }
            return message.text
        }
    }

    /// Waits for `recorder`'s next `parley.caughtUp`.
    static func caughtUp(_ recorder: RecordingListener) async -> CaughtUpFrame? {
        guard case .caughtUp(let frame) = await recorder.next(where: { $0.name == .caughtUp })?.payload else {
            return nil
        }
        return frame
    }

    @Test func whatWasMissedWhileDisconnectedArrivesInOrderBeforeLiveEvents() async throws {
        let server = try await TestServer.start()
        let alice = try await member("alice", on: server)
        let bob = try await member("bob", on: server)
        let group = try await alice.client.createGroup(name: "Team", participants: ["bob"])
        _ = try await alice.client.sendTextMessage("before", to: .conversation(group.id))
        _ = await bob.recorder.next { Self.messages([$0], in: group.id) == ["before"] }

        await bob.client.disconnect()
        for index in 1...5 {
            _ = try await alice.client.sendTextMessage("missed \(index)", to: .conversation(group.id))
        }
        let other = try await alice.client.createGroup(name: "Joined while away", participants: ["bob"])
        _ = try await alice.client.sendTextMessage("in the new group", to: .conversation(other.id))
        let mark = bob.recorder.receivedEvents.count

        try await bob.client.connect()
        let caughtUp = try #require(await Self.caughtUp(bob.recorder))
        #expect(caughtUp.replayed == 9)  // 5 messages; the new group's create, 2 participants added, 1 message
        _ = try await alice.client.sendTextMessage("live", to: .conversation(group.id))
        _ = await bob.recorder.next { Self.messages([$0], in: group.id) == ["live"] }

        let after = Array(bob.recorder.receivedEvents.dropFirst(mark))
        #expect(
            Self.messages(after, in: group.id) == ["missed 1", "missed 2", "missed 3", "missed 4", "missed 5", "live"])
        #expect(Self.messages(after, in: other.id) == ["in the new group"])
        let names = after.filter { $0.conversationId == other.id }.map(\.name)
        #expect(names == [.conversationCreate, .participantAdded, .participantAdded, .messageSent])
        // caughtUp comes after every replayed event and before the live one.
        let caughtUpIndex = try #require(after.firstIndex { $0.name == .caughtUp })
        #expect(after.prefix(caughtUpIndex).count { $0.seq != nil } == 9)
        #expect(caughtUp.conversations[group.id] == group.lastSeq + 6 && caughtUp.conversations[other.id] == 4)
        for member in [alice, bob] { await member.client.shutdown() }
        try await server.stop()
    }

    @Test func aRestartedAppResumesFromItsSavedPositionsAndSeesNothingTwice() async throws {
        let server = try await TestServer.start()
        let alice = try await member("alice", on: server)
        let bob = try await member("bob", on: server)
        let group = try await alice.client.createGroup(name: "Team", participants: ["bob"])
        _ = try await alice.client.sendTextMessage("seen", to: .conversation(group.id))
        _ = await bob.recorder.next { Self.messages([$0], in: group.id) == ["seen"] }
        await bob.client.shutdown()  // the app process ends

        _ = try await alice.client.sendTextMessage("while the app was closed", to: .conversation(group.id))
        let reopened = try await member("bob", on: server, storage: bob.storage, login: false)  // saved session
        let caughtUp = try #require(await Self.caughtUp(reopened.recorder))
        #expect(caughtUp.replayed == 1)
        #expect(Self.messages(reopened.recorder.receivedEvents, in: group.id) == ["while the app was closed"])
        for client in [alice.client, reopened.client] { await client.shutdown() }
        try await server.stop()
    }

    @Test func aConversationLeftWhileAwayEndsWithTheRemovalAndNothingAfter() async throws {
        let server = try await TestServer.start()
        let alice = try await member("alice", on: server)
        let bob = try await member("bob", on: server)
        let group = try await alice.client.createGroup(name: "Team", participants: ["bob"])
        _ = await bob.recorder.next { $0.conversationId == group.id && $0.seq == 3 }
        await bob.client.disconnect()
        _ = try await alice.client.sendTextMessage("for bob", to: .conversation(group.id))
        try await alice.client.removeParticipant("bob", from: group.id)
        _ = try await alice.client.sendTextMessage("after bob left", to: .conversation(group.id))
        let mark = bob.recorder.receivedEvents.count

        try await bob.client.connect()
        let caughtUp = try #require(await Self.caughtUp(bob.recorder))
        let replayed = bob.recorder.receivedEvents.dropFirst(mark).filter { $0.conversationId == group.id }
        #expect(replayed.map(\.name) == [.messageSent, .participantRemoved])
        #expect(Self.messages(Array(replayed), in: group.id) == ["for bob"])
        #expect(caughtUp.conversations[group.id] == nil)
        for member in [alice, bob] { await member.client.shutdown() }
        try await server.stop()
    }

    @Test func tooMuchMissedIsAnnouncedAsAResyncAndTheClientMovesOn() async throws {
        let server = try await TestServer.start { $0.maxReplayedEventsPerConversation = 3 }
        let alice = try await member("alice", on: server)
        let bob = try await member("bob", on: server)
        let group = try await alice.client.createGroup(name: "Team", participants: ["bob"])
        _ = await bob.recorder.next { $0.conversationId == group.id && $0.seq == 3 }
        await bob.client.disconnect()
        for index in 1...5 { _ = try await alice.client.sendTextMessage("m\(index)", to: .conversation(group.id)) }
        try await bob.client.connect()
        let resync = await bob.recorder.next { $0.name == .resyncRequired }
        #expect(
            resync?.payload
                == .resyncRequired(ResyncFrame(conversationId: group.id, reason: .resumeTooFarBehind, lastSeq: 8)))
        _ = try #require(await Self.caughtUp(bob.recorder))
        // Live events continue after the skipped range.
        _ = try await alice.client.sendTextMessage("live", to: .conversation(group.id))
        let live = await bob.recorder.next { Self.messages([$0], in: group.id) == ["live"] }
        #expect(live?.seq == 9)
        for member in [alice, bob] { await member.client.shutdown() }
        try await server.stop()
    }

    // MARK: Outbox

    @Test func messagesQueuedOfflineAreSentInOrderOnceWhenTheSocketIsBack() async throws {
        let server = try await TestServer.start(port: RestartablePort.take())
        let alice = try await member("alice", on: server)
        let bob = try await member("bob", on: server)
        let group = try await alice.client.createGroup(name: "Team", participants: ["bob"])
        await alice.client.disconnect()
        let updates = alice.client.outboxUpdates()
        // The server goes away too, so that HTTP cannot carry them either.
        let port = server.port
        try await server.stop()
        let queued = try (1...4).map {
            try alice.client.queueMessage(parts: [.text("q\($0)")], to: .conversation(group.id))
        }
        #expect(alice.client.outgoingMessages().map(\.clientMessageId) == queued.map(\.clientMessageId))
        #expect(alice.client.outgoingMessages().allSatisfy { $0.state == .pending })

        let restarted = try await TestServer.start(dataDirectory: server.dataDirectory, port: port)
        try await alice.client.connect()
        var sent: [OutgoingMessage] = []
        for await update in updates {
            if case .sent = update.state { sent.append(update) }
            if sent.count == 4 { break }
        }
        #expect(sent.map(\.clientMessageId) == queued.map(\.clientMessageId))
        #expect(alice.client.outgoingMessages().isEmpty)
        let page = try await alice.client.fetchMessages(conversationId: group.id)
        #expect(page.messages.map(\.text) == ["q1", "q2", "q3", "q4"])
        for member in [alice, bob] { await member.client.shutdown() }
        try await restarted.stop()
    }

    @Test func aRefusedMessageFailsWithItsCodeAndCanBeRetriedOrCancelled() async throws {
        let server = try await TestServer.start()
        let alice = try await member("alice", on: server)
        let updates = alice.client.outboxUpdates()
        let refused = try alice.client.queueMessage(parts: [.text("nobody here")], to: .conversation("c_missing"))
        var failed: OutgoingMessage?
        for await update in updates where update.clientMessageId == refused.clientMessageId {
            if case .failed = update.state {
                failed = update
                break
            }
        }
        #expect(
            failed?.state
                == .failed(
                    code: .conversationNotFound,
                    message: failed.map { if case .failed(_, let m) = $0.state { m } else { "" } } ?? ""))
        #expect(alice.client.outgoingMessages().map(\.clientMessageId) == [refused.clientMessageId])
        #expect(throws: ParleyError.self) { try alice.client.retryMessage(clientMessageId: "unknown") }
        try alice.client.retryMessage(clientMessageId: refused.clientMessageId)
        for await update in updates where update.clientMessageId == refused.clientMessageId {
            if case .failed = update.state { break }
        }
        try alice.client.cancelMessage(clientMessageId: refused.clientMessageId)
        #expect(alice.client.outgoingMessages().isEmpty)
        // The awaiting form reports the refusal and leaves nothing behind.
        await #expect(throws: ParleyError.self) {
            try await alice.client.sendTextMessage("x", to: .conversation("c_missing"))
        }
        #expect(alice.client.outgoingMessages().isEmpty)
        await alice.client.shutdown()
        try await server.stop()
    }

    @Test func aRetryAfterALostAcknowledgementDoesNotCreateASecondMessage() async throws {
        let server = try await TestServer.start()
        let alice = try await member("alice", on: server)
        let group = try await alice.client.createGroup(name: "Team")
        let first = try await alice.client.sendTextMessage("once", to: .conversation(group.id), clientMessageId: "cm-1")
        // The same id again, as an outbox retry after a lost ack would send it: the server answers with the original.
        let again = try await alice.client.sendTextMessage("once", to: .conversation(group.id), clientMessageId: "cm-1")
        #expect(again.id == first.id && again.seq == first.seq)
        #expect(try await alice.client.fetchMessages(conversationId: group.id).messages.count == 1)
        await alice.client.shutdown()
        try await server.stop()
    }

    @Test func theOutboxSurvivesAnAppRestart() async throws {
        let server = try await TestServer.start(port: RestartablePort.take())
        let alice = try await member("alice", on: server)
        let group = try await alice.client.createGroup(name: "Team")
        let port = server.port
        try await server.stop()
        _ = try alice.client.queueMessage(
            parts: [.text("written offline")], to: .conversation(group.id), clientMessageId: "cm-2")
        await alice.client.shutdown()  // the app is killed before the server is back

        let restarted = try await TestServer.start(dataDirectory: server.dataDirectory, port: port)
        let reopened = try await member("alice", on: restarted, storage: alice.storage, login: false)
        let updates = reopened.client.outboxUpdates()
        if !reopened.client.outgoingMessages().isEmpty {
            for await update in updates where update.clientMessageId == "cm-2" {
                if case .sent = update.state { break }
            }
        }
        let page = try await reopened.client.fetchMessages(conversationId: group.id)
        #expect(page.messages.map(\.clientMessageId) == ["cm-2"])
        await reopened.client.shutdown()
        try await restarted.stop()
    }

    @Test func eventsOlderThanTheResumeWindowAreAnnouncedNotReplayed() async throws {
        // The server's time is virtual: the 30-day window passes when the test says so.
        let clock = ManualClock()
        let server = try await TestServer.start(clock: clock)
        let alice = try await server.login("alice")
        let bob = try await server.login("bob")
        let group = try await server.createConversation(token: alice, with: ["bob"])

        // Bob's positions, from the caughtUp of a first connection.
        let first = WebSocketProbe(url: server.webSocketURL, token: bob, skipCaughtUp: false)
        guard
            case .caughtUp(let positions) = try await first.nextFrame(where: {
                if case .caughtUp = $0 { true } else { false }
            })
        else {
            Issue.record("no caughtUp")
            return
        }
        await first.close()
        let seen = positions.conversations[group.id] ?? 0

        for text in ["one", "two", "three"] {
            let answer = try await server.request(
                "POST", "/v1/conversations/\(group.id)/messages", token: alice,
                body: SendMessageRequest(parts: [.text(text)])
            )
            #expect(answer.status == 201)
        }
        let last = seen + 3

        // 31 days later bob comes back: the missed events are older than the window.
        clock.advance(by: .seconds(31 * 24 * 3600))
        let late = WebSocketProbe(
            url: server.webSocketURL, token: bob,
            resume: ResumeRequest(userSeq: positions.userSeq, conversations: [group.id: seen]), skipCaughtUp: false
        )
        var frames: [ServerFrame] = []
        while true {
            let frame = try await late.nextFrame()
            if case .hello = frame { continue }
            frames.append(frame)
            if case .caughtUp = frame { break }
        }
        #expect(frames.first == .resync(ResyncFrame(conversationId: group.id, reason: .historyTrimmed, lastSeq: last)))
        #expect(
            !frames.contains { if case .event = $0 { true } else { false } },
            "nothing older than the window is replayed")
        guard case .caughtUp(let caughtUp) = frames.last else {
            Issue.record("\(frames)")
            return
        }
        #expect(caughtUp.replayed == 0 && caughtUp.conversations[group.id] == last)
        await late.close()
        try await server.stop()
    }
}
