import Foundation
import NIOConcurrencyHelpers
import Parley
import ParleyServer
import ParleyTesting
import Testing

/// Tokens that expire, against the real server: the app's token provider is asked for a fresh token before expiry and
/// when the server refuses the token, once at a time; the SDK reconnects and resumes with nothing lost. The server and
/// the SDK share one virtual clock, so tokens expire when the test says.
@Suite(.timeLimit(.minutes(2))) struct TokenRefreshTests {
    /// The app's server as a token provider: issues a token with the REST API key; can be held (a slow server) or made
    /// to fail, and counts its calls.
    final class AppServer: Sendable {
        let admin: ParleyAdmin
        let lifetime: Int64?
        private let state = NIOLockedValueBox(State())

        struct State {
            var calls = 0
            var tokens: [String] = []
            var failing = false
            var tokenFor: String?
            var held: [CheckedContinuation<Void, Never>]?
            var callWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
        }

        init(admin: ParleyAdmin, lifetime: Int64?) {
            self.admin = admin
            self.lifetime = lifetime
        }

        var calls: Int { state.withLockedValue { $0.calls } }
        var tokens: [String] { state.withLockedValue { $0.tokens } }

        var provider: TokenProvider { { uid in try await self.token(for: uid) } }

        func token(for uid: String) async throws -> String {
            let (held, waiters) = state.withLockedValue { state -> (Bool, [CheckedContinuation<Void, Never>]) in
                state.calls += 1
                let calls = state.calls
                let due = state.callWaiters.filter { $0.count <= calls }.map(\.continuation)
                state.callWaiters.removeAll { $0.count <= calls }
                return (state.held != nil, due)
            }
            for waiter in waiters { waiter.resume() }
            if held {
                await withCheckedContinuation { continuation in
                    let stillHeld = state.withLockedValue { state -> Bool in
                        guard state.held != nil else { return false }
                        state.held?.append(continuation)
                        return true
                    }
                    if !stillHeld { continuation.resume() }
                }
            }
            let (failing, other) = state.withLockedValue { ($0.failing, $0.tokenFor) }
            if failing { throw ParleyError(.serverUnreachable, "The app's server is down.") }
            let token = try await admin.issueAuthToken(uid: other ?? uid, ttlSeconds: lifetime).authToken
            state.withLockedValue { $0.tokens.append(token) }
            return token
        }

        /// Holds every call until ``release()``.
        func hold() { state.withLockedValue { $0.held = $0.held ?? [] } }

        func release() {
            let held = state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
                defer { state.held = nil }
                return state.held ?? []
            }
            for continuation in held { continuation.resume() }
        }

        func fail(_ failing: Bool) { state.withLockedValue { $0.failing = failing } }

        /// Gives tokens of `uid` whoever asks (a provider with a bug).
        func giveTokens(of uid: String?) { state.withLockedValue { $0.tokenFor = uid } }

        /// Returns once the provider has been called `count` times in all.
        func called(_ count: Int) async {
            await withCheckedContinuation { continuation in
                let done = state.withLockedValue { state -> Bool in
                    if state.calls >= count { return true }
                    state.callWaiters.append((count, continuation))
                    return false
                }
                if done { continuation.resume() }
            }
        }
    }

    struct Rig {
        let server: TestServer
        let clock: ManualClock
        let admin: ParleyAdmin
        let appServer: AppServer
        let alice: ParleyClient
        let bob: ParleyClient
        let aliceInbox: RecordingListener
        let storage: TemporaryDirectory

        func stop() async throws {
            await alice.shutdown()
            await bob.shutdown()
            try await server.stop()
        }

        /// What alice received of bob's messages, by text, in order.
        var received: [String] {
            aliceInbox.receivedEvents.compactMap { event in
                guard case .messageSent(let message) = event.payload, message.sender == "bob" else { return nil }
                return message.text
            }
        }
    }

    /// Alice signs in through the app's server (tokens of `lifetime` seconds), bob with the Auth Key; both connected
    /// at time zero, with a direct conversation.
    static func rig(lifetime: Int64?, tuning: ConnectionTuning = Self.tuning()) async throws -> Rig {
        let clock = ManualClock()
        let server = try await TestServer.start(clock: clock) { $0.metrics.token = Self.metricsToken }
        let admin = ParleyAdmin(serverURL: server.baseURL, restAPIKey: server.app.restAPIKey)
        for uid in ["alice", "bob"] { try await admin.createUser(uid: uid) }
        let appServer = AppServer(admin: admin, lifetime: lifetime)
        let storage = try TemporaryDirectory(prefix: "parley-sdk")
        let alice = try ParleyClient(
            appId: server.app.appId, settings: testSettings(server: server, storage: storage, tuning: tuning),
            clock: clock
        )
        let inbox = RecordingListener()
        alice.addEventListener("inbox", inbox)
        alice.addConnectionListener("inbox", inbox)
        try await alice.start()
        try await alice.login(uid: "alice", tokenProvider: appServer.provider)
        await alice.waitUntilConnected()
        let bob = try ParleyClient(
            appId: server.app.appId, settings: testSettings(server: server, tuning: Self.tuning()), clock: clock
        )
        try await bob.start()
        try await bob.login(uid: "bob", authKey: server.app.authKey)
        await bob.waitUntilConnected()
        return Rig(
            server: server, clock: clock, admin: admin, appServer: appServer, alice: alice, bob: bob,
            aliceInbox: inbox, storage: storage
        )
    }

    static let metricsToken = "metrics-token-of-the-token-tests"

    /// How many requests the server answered with `status` on a route containing `route`.
    static func answered(_ status: Int, route: String, by server: TestServer) async throws -> Int {
        let answer = try await server.request("GET", "/metrics", headers: ["Authorization": "Bearer \(metricsToken)"])
        var count = 0.0
        for line in String(decoding: answer.body, as: UTF8.self).split(separator: "\n")
        where line.hasPrefix("parley_http_requests_total{") && line.contains(#"status="\#(status)""#)
            && line.contains(route)
        {
            count += Double(line.split(separator: " ").last ?? "") ?? 0
        }
        return Int(count)
    }

    /// Heartbeats out of the way (time jumps in these tests; the pings are not what they test).
    static func tuning(lead: Duration = .seconds(10), maximumFailures: Int = 5) -> ConnectionTuning {
        var tuning = ConnectionTuning()
        tuning.heartbeatInterval = .seconds(100_000)
        tuning.tokenRefreshLead = lead
        tuning.maximumTokenRefreshFailures = maximumFailures
        return tuning
    }

    /// Bob sends `texts`; returns once alice received all of them.
    static func bobSends(_ texts: [String], in rig: Rig) async throws {
        for text in texts { _ = try await rig.bob.sendTextMessage(text, to: .user("alice")) }
    }

    static func waitUntilAliceHas(_ count: Int, in rig: Rig) async {
        if rig.received.count >= count { return }
        while await rig.aliceInbox.next(where: { $0.name == .messageSent }) != nil {
            if rig.received.count >= count { return }
        }
    }

    @Test func anExpiringTokenIsReplacedBeforeItsExpiryWithNothingLost() async throws {
        let rig = try await Self.rig(lifetime: 100)
        #expect(rig.appServer.calls == 1)  // the login's token
        try await Self.bobSends(["one"], in: rig)
        await Self.waitUntilAliceHas(1, in: rig)
        // A second socket on the first token: the server ends it at the token's expiry, which tells the test when
        // that expiry has passed on the server.
        let first = rig.appServer.tokens[0]
        let witness = WebSocketProbe(url: rig.server.webSocketURL, token: first)
        _ = try await witness.nextFrame()

        // 90 s: the refresh is due (10 s before the expiry); the provider is held while bob writes.
        rig.appServer.hold()
        _ = await rig.clock.sleeper(at: .seconds(90))
        rig.clock.advance(by: .seconds(90))
        await rig.appServer.called(2)
        #expect(rig.alice.connectionStatus == .connected)  // the old socket runs while the provider works
        try await Self.bobSends(["two", "three"], in: rig)
        let sending = Task { try await rig.alice.sendTextMessage("during the refresh", to: .user("bob")) }
        // The socket is replaced once the fresh token is saved: connecting, then connected again.
        var statuses = rig.alice.connectionStatusUpdates().makeAsyncIterator()
        rig.appServer.release()
        var seen: [ConnectionStatus] = []
        while seen.last != .connected || !seen.contains(.connecting), let status = await statuses.next() {
            seen.append(status)
        }
        #expect(seen.first == .connecting && seen.last == .connected)
        try await Self.bobSends(["four"], in: rig)
        await Self.waitUntilAliceHas(4, in: rig)
        let sent = try await sending.value
        #expect(sent.text == "during the refresh")

        // 101 s: the first token expired on the server; alice's socket is on the second one.
        rig.clock.advance(by: .seconds(11))
        let ended = await witness.closure()
        #expect(ended.code == 4001 && ended.reason == "ERR_AUTH_TOKEN_INVALID")
        #expect(rig.alice.connectionStatus == .connected)
        #expect(rig.appServer.calls == 2)
        #expect(rig.received == ["one", "two", "three", "four"])
        let reported = rig.aliceInbox.receivedStatuses
        #expect(reported.filter { $0 == .connecting }.count == 2)  // the login's socket, then the refreshed one
        #expect(!reported.contains { if case .failed = $0 { true } else { false } })
        // Bob got alice's message once.
        let history = try await rig.bob.fetchMessages(conversationId: sent.conversationId)
        #expect(history.messages.filter { $0.text == "during the refresh" }.count == 1)
        try await rig.stop()
    }

    @Test func aRevokedTokenIsRefreshedOnceForTheSocketAndARequestAndNothingIsMissed() async throws {
        let rig = try await Self.rig(lifetime: nil)
        try await Self.bobSends(["before"], in: rig)
        await Self.waitUntilAliceHas(1, in: rig)
        rig.appServer.hold()
        try await rig.admin.revokeAllAuthTokens(uid: "alice")
        await rig.appServer.called(2)  // the socket's 4001
        #expect(rig.alice.connectionStatus == .connecting)
        try await Self.bobSends(["while out 1", "while out 2", "while out 3"], in: rig)
        // A request with the revoked token waits for the refresh under way, then goes again with the fresh token.
        let before = try await Self.answered(401, route: "/v1/conversations", by: rig.server)
        let request = Task { try await rig.alice.conversations() }
        var refused = before
        let deadline = ContinuousClock.now + .seconds(10)
        while refused == before, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
            refused = try await Self.answered(401, route: "/v1/conversations", by: rig.server)
        }
        #expect(refused == before + 1)  // refused once with the revoked token, while the provider is held
        rig.appServer.release()
        let list = try await request.value
        #expect(list.conversations.count == 1)
        await rig.alice.waitUntilConnected()
        await Self.waitUntilAliceHas(4, in: rig)
        #expect(rig.received == ["before", "while out 1", "while out 2", "while out 3"])
        #expect(rig.appServer.calls == 2)
        try await rig.stop()
    }

    @Test func aProviderThatKeepsFailingStopsTheConnectionWithADocumentedStatus() async throws {
        let rig = try await Self.rig(lifetime: nil)
        rig.appServer.fail(true)
        try await rig.admin.revokeAllAuthTokens(uid: "alice")
        var attempts: [Int] = []
        while true {
            let seen = attempts
            let status = await rig.alice.waitForStatus {
                switch $0 {
                case .reconnecting(let attempt, _, _): !seen.contains(attempt)
                case .failed: true
                default: false
                }
            }
            if case .reconnecting(let attempt, let delay, let error) = status {
                #expect(error.code == .tokenRefreshFailed)
                attempts.append(attempt)
                // The next request comes when the backoff has passed, not before.
                let now = rig.clock.now.offset
                _ = await rig.clock.sleeper { $0.offset == now + delay }
                let calls = rig.appServer.calls
                rig.clock.advance(by: delay)
                await rig.appServer.called(calls + 1)
                continue
            }
            guard case .failed(let error) = status else { break }
            #expect(error.code == .tokenRefreshFailed)
            #expect(error.underlying?.contains("ERR_SERVER_UNREACHABLE") == true)
            break
        }
        #expect(attempts == [1, 2, 3, 4])
        #expect(rig.appServer.calls == 1 + 5)
        // The provider works again: connect() starts over.
        rig.appServer.fail(false)
        try await rig.alice.connect()
        #expect(rig.alice.connectionStatus == .connected)
        #expect(rig.appServer.calls == 1 + 6)
        try await rig.stop()
    }

    @Test func aTokenOfAnotherUserIsRefusedAndNeverUsed() async throws {
        let rig = try await Self.rig(lifetime: nil, tuning: Self.tuning(maximumFailures: 1))
        rig.appServer.giveTokens(of: "bob")
        try await rig.admin.revokeAllAuthTokens(uid: "alice")
        let status = await rig.alice.waitForStatus { if case .failed = $0 { true } else { false } }
        guard case .failed(let error) = status else {
            Issue.record("\(status)")
            return
        }
        #expect(error.code == .tokenRefreshFailed)
        #expect(error.underlying?.contains("another user") == true)
        #expect(rig.alice.getLoggedInUser()?.uid == "alice")
        // The saved session still has alice's (revoked) token, not bob's: a relaunched app without a provider is
        // refused, where bob's token would have listed bob's conversations.
        #expect(rig.appServer.tokens.count == 2)  // alice's at login, then bob's, made and thrown away
        let relaunched = try ParleyClient(
            appId: rig.server.app.appId, settings: testSettings(server: rig.server, storage: rig.storage),
            clock: rig.clock
        )
        #expect(relaunched.getLoggedInUser()?.uid == "alice")
        await #expect(throws: ParleyError.self) { try await relaunched.conversations() }
        do {
            _ = try await relaunched.conversations()
        } catch let error as ParleyError {
            #expect(error.code == .authTokenInvalid)
        }
        await relaunched.shutdown()
        try await rig.stop()
    }

    @Test func aRelaunchedAppWithAnExpiredSavedTokenGetsAFreshOneFromTheProvider() async throws {
        let rig = try await Self.rig(lifetime: nil)
        await rig.alice.shutdown()
        try await rig.admin.revokeAllAuthTokens(uid: "alice")
        try await Self.bobSends(["while the app was closed"], in: rig)
        var settings = try testSettings(server: rig.server, storage: rig.storage, tuning: Self.tuning())
        settings.tokenProvider = rig.appServer.provider
        let relaunched = try ParleyClient(appId: rig.server.app.appId, settings: settings, clock: rig.clock)
        let inbox = RecordingListener()
        relaunched.addEventListener("inbox", inbox)
        try await relaunched.start()
        await relaunched.waitUntilConnected()
        #expect(rig.appServer.calls == 2)
        let page = try await relaunched.fetchMessages(with: .user("bob"))
        #expect(page.messages.last?.text == "while the app was closed")
        await relaunched.shutdown()
        try await rig.bob.logout()
        await rig.bob.shutdown()
        try await rig.server.stop()
    }
}
