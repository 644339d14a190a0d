import Foundation
import Parley
import ParleyServer
import ParleyStore
import ParleyStoreSQLite
import ParleyTesting
import Testing

/// Pushes to users without a live socket, end to end: the real server, its real APNs provider (HTTP/2, TLS, ES256
/// provider token) and a local APNs stand-in that checks each request the way APNs does.
@Suite(.timeLimit(.minutes(2))) struct PushTests {
    static let phone = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
    static let tablet = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"
    static let alicePhone = "abababababababababababababababababababababababababababababababab"

    /// A server that pushes through `standIn`; pushes retried after 1 s, 2 s, 4 s ...
    func server(
        _ standIn: APNsStandIn, dataDirectory: String? = nil, clock: any Clock<Duration> = ContinuousClock(),
        configure: (inout ServerConfiguration) -> Void = { _ in }
    ) async throws -> TestServer {
        try await TestServer.start(dataDirectory: dataDirectory, clock: clock) { configuration in
            configuration.apns = standIn.apnsConfiguration()
            configure(&configuration)
        }
    }

    func register(_ token: String, as deviceId: String, for userToken: String, on server: TestServer) async throws {
        let answer = try await server.request(
            "PUT", "/v1/me/devices/\(deviceId)", token: userToken,
            body: RegisterDeviceRequest(token: token, environment: .sandbox)
        )
        #expect(answer.status == 200 || answer.status == 201)
    }

    func send(_ text: String, alert: String? = nil, to conversationId: String, as token: String, on server: TestServer)
        async throws -> Message
    {
        let answer = try await server.request(
            "POST", "/v1/conversations/\(conversationId)/messages", token: token,
            body: SendMessageRequest(parts: [.text(text)], alert: alert)
        )
        #expect(answer.status == 201)
        return try answer.decode()
    }

    /// The server's push queue after a graceful stop (which lets sends in flight finish and be recorded).
    func queueAfterStop(_ server: TestServer) async throws -> (PushQueueDepth, [Device]) {
        try await server.stop()
        let store = try openSQLiteStore(in: server.dataDirectory)
        let depth = try await store.pushQueueDepth()
        let devices = try await store.devices(appId: server.app.appId, uid: "bob")
        try await store.close()
        return (depth, devices)
    }

    /// A push that never comes ends the stand-in's wait, at its timeout or when the waiting task is cancelled (a test's
    /// time limit cancels it): the test then fails on its expectations instead of hanging.
    @Test func aWaitForAPushThatNeverComesEnds() async throws {
        let standIn = try await APNsStandIn.start()
        #expect(await standIn.waitForRequests(1, timeout: .milliseconds(20)).isEmpty)
        let waiting = Task { await standIn.waitForRequests(1, timeout: .seconds(600)) }
        waiting.cancel()
        #expect(await waiting.value.isEmpty)
        try await standIn.stop()
    }

    @Test func anOfflineRecipientGetsOneAPNsPushPerDeviceWithAlertBadgeAndIds() async throws {
        let standIn = try await APNsStandIn.start()
        let server = try await server(standIn)
        let alice = try await server.login("alice")
        let bob = try await server.login("bob")
        try await register(Self.phone, as: "phone", for: bob, on: server)
        try await register(Self.tablet, as: "tablet", for: bob, on: server)
        // The sender's own devices get nothing.
        try await register(Self.alicePhone, as: "phone", for: alice, on: server)
        let group = try await server.createConversation(token: alice, with: ["bob"])

        let first = try await send("See you at 5", to: group.id, as: alice, on: server)
        let firstPushes = await standIn.waitForRequests(2)
        let second = try await send(
            "Bring the slides", alert: "Alice shared a file", to: group.id, as: alice, on: server)
        let pushes = await standIn.waitForRequests(4)
        #expect(Set(pushes.map(\.token)) == [Self.phone, Self.tablet])
        #expect(pushes.allSatisfy { $0.status == 200 })
        #expect(Set(firstPushes.map(\.token)) == [Self.phone, Self.tablet])

        for (push, (message, badge)) in zip(pushes, [(first, 1), (first, 1), (second, 2), (second, 2)]) {
            #expect(push.headers["apns-topic"] == standIn.topic)
            #expect(push.headers["apns-push-type"] == "alert")
            #expect(push.headers["apns-priority"] == "10")
            #expect(push.headers["apns-collapse-id"] == message.id)
            #expect(push.issuedAt != nil)
            let json = push.json
            let aps = json["aps"] as? [String: Any]
            let alert = aps?["alert"] as? [String: String] ?? [:]
            let body = message.id == first.id ? "See you at 5" : "Alice shared a file"
            #expect(alert == ["title": "alice", "subtitle": "test", "body": body])
            #expect(aps?["badge"] as? Int == badge)
            #expect(aps?["thread-id"] as? String == group.id)
            // What the SDK's handleNotification(userInfo:) reads from it.
            let userInfo = Dictionary(uniqueKeysWithValues: json.map { (AnyHashable($0.key), $0.value) })
            #expect(
                ParleyClient.pushPayload(from: userInfo)
                    == PushPayload(conversationId: group.id, messageId: message.id, seq: message.seq)
            )
        }
        let (depth, _) = try await queueAfterStop(server)
        #expect(depth == PushQueueDepth(outbox: 0, jobs: 0))
        #expect(!standIn.requests.contains { $0.token == Self.alicePhone })
        #expect(standIn.requests.count == 4)
        // One HTTP/2 connection carried every request.
        #expect(standIn.connectionCount == 1)
        try await standIn.stop()
    }

    @Test func aRecipientWithALiveSocketGetsNoPushUntilTheAppGoesToTheBackground() async throws {
        let standIn = try await APNsStandIn.start()
        let server = try await server(standIn) { $0.presenceGrace = .milliseconds(1) }
        let alice = try await server.login("alice")
        let bobClient = try await ParleyClient.initialize(
            appId: server.app.appId, settings: testSettings(server: server))
        try await bobClient.setDeviceToken(hex: Self.phone, environment: .sandbox)
        try await bobClient.authorize(uid: "bob", authKey: server.app.authKey)
        await bobClient.waitUntilConnected()
        let group = try await server.createConversation(token: alice, with: ["bob"])
        let watcher = try await ParleyClient.initialize(appId: server.app.appId, settings: testSettings(server: server))
        try await watcher.authorize(uid: "alice", authKey: server.app.authKey)
        await watcher.waitUntilConnected()
        let presence = RecordingListener()
        watcher.addEventListener("presence", presence)

        _ = try await send("in the foreground", to: group.id, as: alice, on: server)
        // Auto mode: the socket drops at once in the background; the server sees bob go.
        await bobClient.appDidEnterBackground()
        _ = await presence.next { event in
            if case .presenceUpdated(let update) = event.payload { return update.uid == "bob" && !update.online }
            return false
        }
        let background = try await send("in the background", to: group.id, as: alice, on: server)
        let pushes = await standIn.waitForRequests(1)
        #expect(pushes.map(\.headers["apns-collapse-id"]) == [background.id])

        await bobClient.shutdown()
        await watcher.shutdown()
        let (depth, _) = try await queueAfterStop(server)
        #expect(depth == PushQueueDepth(outbox: 0, jobs: 0))
        // Nothing for the message sent while bob's socket was live.
        #expect(standIn.requests.map(\.headers["apns-collapse-id"]) == [background.id])
        try await standIn.stop()
    }

    /// docs/PROTOCOL.md, "Mentions": a mentioned participant gets the push even while their app is open (a live
    /// socket), so their other devices ring; the payload says `mentioned`. Without the mention, nothing.
    @Test func aMentionPushesARecipientWhoseAppIsOpen() async throws {
        let standIn = try await APNsStandIn.start()
        let server = try await server(standIn)
        let alice = try await server.login("alice")
        let bobClient = try await ParleyClient.initialize(
            appId: server.app.appId, settings: testSettings(server: server))
        try await bobClient.setDeviceToken(hex: Self.phone, environment: .sandbox)
        try await bobClient.authorize(uid: "bob", authKey: server.app.authKey)
        await bobClient.waitUntilConnected()
        let group = try await server.createConversation(token: alice, with: ["bob"])

        _ = try await send("no mention", to: group.id, as: alice, on: server)
        let answer = try await server.request(
            "POST", "/v1/conversations/\(group.id)/messages", token: alice,
            body: SendMessageRequest(parts: [.text("@bob look")], mentions: ["bob", "alice"])
        )
        let mention: Message = try answer.decode()
        #expect(mention.mentions == ["bob"])
        let pushes = await standIn.waitForRequests(1)
        #expect(pushes.map(\.headers["apns-collapse-id"]) == [mention.id])
        let userInfo = Dictionary(uniqueKeysWithValues: pushes[0].json.map { (AnyHashable($0.key), $0.value) })
        #expect(
            ParleyClient.pushPayload(from: userInfo)
                == PushPayload(conversationId: group.id, messageId: mention.id, seq: mention.seq, mentioned: true)
        )
        await bobClient.shutdown()
        let (depth, _) = try await queueAfterStop(server)
        #expect(depth == PushQueueDepth(outbox: 0, jobs: 0))
        // The message without the mention made no push: bob's socket was live.
        #expect(standIn.requests.map(\.headers["apns-collapse-id"]) == [mention.id])
        try await standIn.stop()
    }

    @Test func anUnregisteredTokenIsRemovedAndItsDeviceGetsNoMorePushes() async throws {
        let standIn = try await APNsStandIn.start()
        let server = try await server(standIn)
        let alice = try await server.login("alice")
        let bob = try await server.login("bob")
        try await register(Self.phone, as: "phone", for: bob, on: server)
        try await register(Self.tablet, as: "tablet", for: bob, on: server)
        let group = try await server.createConversation(token: alice, with: ["bob"])
        // APNs: the phone's token stopped being valid now (after it was registered).
        standIn.script([.unregistered(timestamp: Int64(Date().timeIntervalSince1970 * 1000) + 60_000)], for: Self.phone)

        _ = try await send("one", to: group.id, as: alice, on: server)
        let first = await standIn.waitForRequests(2)
        #expect(Set(first.map { "\($0.token):\($0.status)" }) == ["\(Self.phone):410", "\(Self.tablet):200"])
        // The device is removed before the dispatcher takes the next message (one pass at a time).
        let second = try await send("two", to: group.id, as: alice, on: server)
        let all = await standIn.waitForRequests(3)
        #expect(all[2].token == Self.tablet && all[2].headers["apns-collapse-id"] == second.id && all[2].status == 200)

        let (depth, devices) = try await queueAfterStop(server)
        #expect(devices.map(\.deviceId) == ["tablet"])
        #expect(depth == PushQueueDepth(outbox: 0, jobs: 0))
        #expect(standIn.requests.count == 3)
        try await standIn.stop()
    }

    @Test func failedPushesAreRetriedAfterOneThenTwoSecondsInVirtualTime() async throws {
        let standIn = try await APNsStandIn.start()
        let clock = ManualClock()
        let server = try await server(standIn, clock: clock)
        let alice = try await server.login("alice")
        let bob = try await server.login("bob")
        try await register(Self.phone, as: "phone", for: bob, on: server)
        let group = try await server.createConversation(token: alice, with: ["bob"])
        standIn.script([.status(503, "ServiceUnavailable"), .status(429, "TooManyRequests")], for: Self.phone)

        let message = try await send("hello", to: group.id, as: alice, on: server)
        _ = await standIn.waitForRequests(1)
        // Retry 1 is due 1 s after the failure; only the push dispatcher sleeps until exactly then and 3 s.
        await clock.sleeper(at: .seconds(1))
        clock.advance(by: .seconds(1))
        _ = await standIn.waitForRequests(2)
        await clock.sleeper(at: .seconds(3))
        clock.advance(by: .seconds(2))
        let pushes = await standIn.waitForRequests(3)
        #expect(pushes.map(\.status) == [503, 429, 200])
        #expect(pushes.allSatisfy { $0.headers["apns-collapse-id"] == message.id })

        let (depth, _) = try await queueAfterStop(server)
        #expect(depth == PushQueueDepth(outbox: 0, jobs: 0))
        #expect(standIn.requests.count == 3)
        try await standIn.stop()
    }

    @Test func aRestartWithPushesQueuedSendsEachOnceAndDropsNone() async throws {
        let standIn = try await APNsStandIn.start()
        standIn.answerEveryToken(with: .status(503, "ServiceUnavailable"))
        let first = try await server(standIn, clock: ManualClock())
        let alice = try await first.login("alice")
        let bob = try await first.login("bob")
        try await register(Self.phone, as: "phone", for: bob, on: first)
        try await register(Self.tablet, as: "tablet", for: bob, on: first)
        let group = try await first.createConversation(token: alice, with: ["bob"])
        var sent: [Message] = []
        for text in ["one", "two", "three"] {
            sent.append(try await send(text, to: group.id, as: alice, on: first))
        }
        // Every push tried once and refused; then the server stops with all six waiting for their retry.
        _ = await standIn.waitForRequests(6)
        let (queued, _) = try await queueAfterStop(first)
        #expect(queued == PushQueueDepth(outbox: 0, jobs: 6))

        standIn.answerEveryToken(with: nil)
        let clock = ManualClock()
        let second = try await server(standIn, dataDirectory: first.dataDirectory, clock: clock)
        // The retries were due 1 s after the failures: at the latest 1 s into the new server's (virtual) time.
        clock.advance(by: .seconds(1))
        _ = await standIn.waitForRequests(12)
        sent.append(try await send("four", to: group.id, as: try await second.login("alice"), on: second))
        _ = await standIn.waitForRequests(14)
        let (depth, _) = try await queueAfterStop(second)
        #expect(depth == PushQueueDepth(outbox: 0, jobs: 0))

        let accepted = standIn.accepted.map { "\($0.token) \($0.headers["apns-collapse-id"] ?? "")" }
        let expected = sent.flatMap { message in [Self.phone, Self.tablet].map { "\($0) \(message.id)" } }
        #expect(accepted.count == 8)
        #expect(Set(accepted) == Set(expected))
        #expect(standIn.requests.count == 14)
        try await standIn.stop()
    }

    @Test func aBadKeyOrIdStopsTheServerFromStarting() async throws {
        let standIn = try await APNsStandIn.start()
        let garbage = try TemporaryDirectory(prefix: "bad-key").path + "/AuthKey.p8"
        try "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n".write(
            toFile: garbage, atomically: true, encoding: .utf8
        )
        var badKey = standIn.apnsConfiguration()
        badKey.keyFile = garbage
        var missingKey = standIn.apnsConfiguration()
        missingKey.keyFile = garbage + ".missing"
        var badKeyId = standIn.apnsConfiguration()
        badKeyId.keyId = "short"
        var badCA = standIn.apnsConfiguration()
        badCA.trustRootsFile = garbage
        for (configuration, words) in [
            (badKey, "not a P-256 private key"), (missingKey, "Cannot read the APNs key file"),
            (badKeyId, "key id \"short\""), (badCA, "Cannot read the APNs trust roots"),
        ] {
            let error = await #expect(throws: PushConfigurationError.self) {
                let server = try await TestServer.start { $0.apns = configuration }
                try await server.stop()
            }
            #expect(error?.description.contains(words) == true, "\(error?.description ?? "")")
        }
        try await standIn.stop()
    }

    @Test func withoutAKeyPushIsOffAndNothingIsQueued() async throws {
        let server = try await TestServer.start()
        let alice = try await server.login("alice")
        let bob = try await server.login("bob")
        try await register(Self.phone, as: "phone", for: bob, on: server)
        let group = try await server.createConversation(token: alice, with: ["bob"])
        _ = try await send("hello", to: group.id, as: alice, on: server)
        let (depth, devices) = try await queueAfterStop(server)
        #expect(depth == PushQueueDepth(outbox: 0, jobs: 0))
        #expect(devices.map(\.deviceId) == ["phone"])
    }
}
