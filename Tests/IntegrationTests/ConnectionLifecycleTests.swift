import Foundation
import NIOConcurrencyHelpers
import Parley
import ParleyServer
import ParleyTesting
import Testing

/// The connection rules against the real server, with faults from a TCP proxy and timers on a virtual clock:
/// the test moves time only once the SDK is waiting for it.
@Suite(.timeLimit(.minutes(2))) struct ConnectionLifecycleTests {
    struct Rig {
        let server: TestServer
        let proxy: TCPProxy
        let clock: ManualClock
        let client: ParleyClient

        func stop() async throws {
            await client.shutdown()
            try await proxy.stop()
            try await server.stop()
        }
    }

    /// A logged-in client whose socket goes through a proxy, on a virtual clock, connected at time zero.
    func rig(auto: Bool = true, uid: String = "alice") async throws -> Rig {
        let server = try await TestServer.start()
        let proxy = try await TCPProxy.start(targetPort: server.port)
        let clock = ManualClock()
        let settings = AppSettings.Builder()
            .serverURL(URL(string: "http://127.0.0.1:\(proxy.port)")!)
            .storageDirectory(try TemporaryDirectory().url)
            .autoEstablishSocketConnection(auto)
            .appLifecycle(nil)
            .networkReachability(nil)
            .build()
        let client = try ParleyClient(appId: server.app.appId, settings: settings, clock: clock)
        try await client.start()
        try await client.login(uid: uid, authKey: server.app.authKey)
        if !auto { try await client.connect() }
        await client.waitUntilConnected()
        return Rig(server: server, proxy: proxy, clock: clock, client: client)
    }

    static func isReconnecting(_ status: ConnectionStatus) -> Bool {
        if case .reconnecting = status { return true }
        return false
    }

    @Test func theHeartbeatNoticesAStalledConnectionAndReconnects() async throws {
        let rig = try await rig()
        await rig.clock.sleeper(at: .seconds(25))
        rig.proxy.stall(true)
        rig.clock.advance(by: .seconds(25))  // the heartbeat ping goes out, and the proxy drops it
        await rig.clock.sleeper(at: .seconds(35))
        #expect(rig.client.connectionStatus == .connected)
        rig.clock.advance(by: .seconds(10))  // no pong by the deadline
        let lost = await rig.client.waitForStatus(Self.isReconnecting)
        guard case .reconnecting(1, _, let error) = lost else {
            Issue.record("\(lost)")
            return
        }
        #expect(error.code == .webSocketError)

        rig.proxy.stall(false)
        await rig.clock.sleeper { $0.offset > .seconds(35) }
        rig.clock.advanceToNextDeadline()
        await rig.client.waitUntilConnected()
        #expect(rig.proxy.acceptedConnections >= 3)  // login's HTTP, the first socket, the new socket
        try await rig.stop()
    }

    @Test func aConnectionCutByTheNetworkIsReestablished() async throws {
        let rig = try await rig()
        let before = rig.proxy.acceptedConnections
        rig.proxy.cutAll()
        _ = await rig.client.waitForStatus(Self.isReconnecting)
        await rig.clock.sleeper { _ in true }
        rig.clock.advanceToNextDeadline()
        await rig.client.waitUntilConnected()
        #expect(rig.proxy.acceptedConnections == before + 1)
        try await rig.stop()
    }

    @Test func refusedConnectionsBackOffThenRecoverAsSoonAsAllowed() async throws {
        let rig = try await rig()
        let statuses = rig.client.connectionStatusUpdates()
        var iterator = statuses.makeAsyncIterator()
        rig.proxy.refuse(true)
        rig.proxy.cutAll()
        var attempts: [(attempt: Int, delay: Duration)] = []
        while attempts.count < 6 {
            guard let status = await iterator.next() else { break }
            guard case .reconnecting(let attempt, let delay, _) = status else { continue }
            attempts.append((attempt, delay))
            // The next attempt runs when its delay has passed, and is refused again.
            await rig.clock.sleeper { _ in true }
            rig.clock.advanceToNextDeadline()
        }
        #expect(attempts.map(\.attempt) == [1, 2, 3, 4, 5, 6])
        let ceilings: [Duration] = [
            .milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16),
        ]
        for (index, attempt) in attempts.enumerated() { #expect(attempt.delay <= ceilings[index]) }
        #expect(rig.proxy.refusedConnections >= 5)  // attempts 2 to 6 (the first loss was the cut)

        // The server is reachable again, and the device says the network is back: the SDK tries at once instead
        // of finishing a backoff of up to 30 s.
        rig.proxy.refuse(false)
        let before = rig.clock.now
        await rig.client.networkStatusChanged(available: false)
        await rig.client.networkStatusChanged(available: true)
        await rig.client.waitUntilConnected()
        // Connected with no virtual time passed: no backoff was waited out.
        #expect(rig.clock.now == before)
        #expect(await rig.server.snapshot { $0.liveConnections == 1 }.liveConnections == 1)
        try await rig.stop()
    }

    @Test func aRevokedTokenStopsTheSocketWithoutAReconnectLoop() async throws {
        let rig = try await rig()
        let admin = ParleyAdmin(serverURL: rig.server.baseURL, restAPIKey: rig.server.app.restAPIKey)
        try await admin.revokeAllAuthTokens(uid: "alice")
        let status = await rig.client.waitForStatus { if case .failed = $0 { true } else { false } }
        guard case .failed(let error) = status else {
            Issue.record("\(status)")
            return
        }
        #expect(error.code == .authTokenInvalid && error.status == 4001)
        let accepted = rig.proxy.acceptedConnections
        rig.clock.advance(by: .seconds(3600))
        await rig.client.appWillEnterForeground()
        #expect(rig.proxy.acceptedConnections == accepted)
        #expect(rig.client.connectionStatus == status)
        try await rig.stop()
    }

    @Test func anExpiredTokenEndsTheSocketWithAnAuthError() async throws {
        // The server runs on a virtual clock: the token expires when the test says so, however slow the machine.
        let serverClock = ManualClock()
        let server = try await TestServer.start(clock: serverClock)
        let admin = ParleyAdmin(serverURL: server.baseURL, restAPIKey: server.app.restAPIKey)
        try await admin.createUser(uid: "frank")
        let token = try await admin.issueAuthToken(uid: "frank", ttlSeconds: 60)
        let client = try await ParleyClient.initialize(appId: server.app.appId, settings: testSettings(server: server))
        try await client.login(authToken: token.authToken)
        await client.waitUntilConnected()
        _ = await serverClock.sleeper(at: .seconds(60))
        serverClock.advance(by: .seconds(60))
        let status = await client.waitForStatus { if case .failed = $0 { true } else { false } }
        guard case .failed(let error) = status else {
            Issue.record("\(status)")
            return
        }
        #expect(error.code == .authTokenInvalid)
        await client.shutdown()
        try await server.stop()
    }

    @Test func clientsComeBackAfterTheServerRestarts() async throws {
        let server = try await TestServer.start(port: RestartablePort.take())
        let clock = ManualClock()
        func client(_ uid: String) async throws -> ParleyClient {
            let client = try ParleyClient(appId: server.app.appId, settings: testSettings(server: server), clock: clock)
            try await client.start()
            try await client.login(uid: uid, authKey: server.app.authKey)
            await client.waitUntilConnected()
            return client
        }
        let alice = try await client("alice")
        let bob = try await client("bob")
        try await server.stop()
        for client in [alice, bob] {
            let status = await client.waitForStatus(Self.isReconnecting)
            guard case .reconnecting(_, _, let error) = status else { continue }
            #expect(error.code == .serverShuttingDown || error.code == .webSocketError)
        }
        let restarted = try await TestServer.start(dataDirectory: server.dataDirectory, port: server.port)
        // Each client retries when its backoff ends; keep moving time to the next retry until both are back.
        while alice.connectionStatus != .connected || bob.connectionStatus != .connected {
            await clock.sleeper { _ in true }
            clock.advanceToNextDeadline()
            await Task.yield()
            if alice.connectionStatus == .connecting || bob.connectionStatus == .connecting {
                _ = await alice.waitForStatus { $0 != .connecting }
                _ = await bob.waitForStatus { $0 != .connecting }
            }
        }
        let inbox = RecordingListener()
        bob.addEventListener("inbox", inbox)
        let message = try await alice.sendTextMessage("still here", to: .user("bob"))
        #expect(await inbox.next { $0.name == .messageSent }?.payload == .messageSent(message))
        await alice.shutdown()
        await bob.shutdown()
        try await restarted.stop()
    }

    @Test func autoModeDropsTheSocketInTheBackgroundAndReconnectsInTheForeground() async throws {
        let rig = try await rig()
        await rig.client.appDidEnterBackground()
        #expect(rig.client.connectionStatus == .disconnected)
        let accepted = rig.proxy.acceptedConnections
        rig.clock.advance(by: .seconds(600))
        #expect(rig.proxy.acceptedConnections == accepted)
        await rig.client.appWillEnterForeground()
        await rig.client.waitUntilConnected()
        #expect(rig.proxy.acceptedConnections == accepted + 1)
        try await rig.stop()
    }

    @Test func theLifecycleAndReachabilitySourcesDriveTheRules() async throws {
        let server = try await TestServer.start()
        let lifecycle = ManualAppLifecycle()
        let reachability = ManualReachability()
        let settings = AppSettings.Builder()
            .serverURL(server.baseURL)
            .storageDirectory(try TemporaryDirectory().url)
            .appLifecycle(lifecycle)
            .networkReachability(reachability)
            .build()
        let client = try await ParleyClient.initialize(appId: server.app.appId, settings: settings)
        let listener = ErrorRecordingListener()
        client.addConnectionListener("errors", listener)
        try await client.login(uid: "gina", authKey: server.app.authKey)
        await client.waitUntilConnected()
        #expect(await server.snapshot { $0.liveConnections == 1 }.liveConnections == 1)
        // The lifecycle source alone (no call to the client) closes the socket in the background...
        lifecycle.set(.background)
        _ = await client.waitForStatus { $0 == .disconnected }
        #expect(await server.snapshot { $0.liveConnections == 0 }.liveConnections == 0)
        // ... and opens a new one in the foreground.
        lifecycle.set(.foreground)
        await client.waitUntilConnected()
        #expect(await server.snapshot { $0.liveConnections == 1 }.liveConnections == 1)
        // The reachability source: offline is ERR_NO_INTERNET, for the listener and for connect().
        reachability.set(available: false)
        _ = await client.waitForStatus { $0 == .waitingForNetwork }
        // Listeners are called on the callback queue, queued before the status streams hear of the change.
        await withCheckedContinuation { continuation in client.settings.callbackQueue.async { continuation.resume() } }
        #expect(listener.errors.map(\.code) == [.noInternet])
        let offline = await #expect(throws: ParleyError.self) { try await client.connect() }
        #expect(offline?.code == .noInternet)
        #expect(await server.snapshot { $0.liveConnections == 0 }.liveConnections == 0)
        reachability.set(available: true)
        await client.waitUntilConnected()
        #expect(await server.snapshot { $0.liveConnections == 1 }.liveConnections == 1)
        await client.shutdown()
        try await server.stop()
    }

    /// Keeps the errors a connection listener is given.
    final class ErrorRecordingListener: ConnectionListener {
        private let recorded = NIOLockedValueBox<[ParleyError]>([])
        var errors: [ParleyError] { recorded.withLockedValue { $0 } }
        func onConnectionError(_ error: ParleyError) { recorded.withLockedValue { $0.append(error) } }
    }

    @Test func connectInManualModeWhileStillInTheBackgroundKeepsTheSocketForTheGrace() async throws {
        // Manual mode, the app in the background before it asks for the socket: connect() opens it, and it lives for
        // the background grace from that call (30 s), then closes, as a background ping() would extend it.
        let rig = try await rig(auto: false)
        await rig.client.disconnect()
        await rig.client.appDidEnterBackground()
        #expect(rig.client.connectionStatus == .disconnected)
        let since = rig.clock.now.offset
        try await rig.client.connect()
        #expect(rig.client.connectionStatus == .connected)
        _ = await rig.clock.sleeper { $0.offset == since + .seconds(25) }  // the heartbeat first
        rig.clock.advance(by: .seconds(25))
        _ = await rig.clock.sleeper { $0.offset == since + .seconds(30) }
        #expect(rig.client.connectionStatus == .connected)
        rig.clock.advance(by: .seconds(5))
        _ = await rig.client.waitForStatus { $0 == .disconnected }
        #expect(await rig.server.snapshot { $0.liveConnections == 0 }.liveConnections == 0)
        try await rig.stop()
    }

    @Test func manualModeKeepsABackgroundSocketOnlyWhilePingsArrive() async throws {
        let rig = try await rig(auto: false)
        let already = await #expect(throws: ParleyError.self) { try await rig.client.connect() }
        #expect(already?.code == .alreadyConnected)
        await rig.client.appDidEnterBackground()
        #expect(rig.client.connectionStatus == .connected)
        await rig.clock.sleeper(at: .seconds(25))  // the heartbeat comes first
        rig.clock.advance(by: .seconds(20))
        try await rig.client.ping()  // at 20 s: the socket now lives until 50 s
        await rig.clock.sleeper(at: .seconds(45))
        rig.clock.advance(by: .seconds(25))  // 45 s: a heartbeat, still connected
        await rig.clock.sleeper(at: .seconds(50))
        #expect(rig.client.connectionStatus == .connected)
        rig.clock.advance(by: .seconds(5))  // 50 s: no ping for 30 s
        _ = await rig.client.waitForStatus { $0 == .disconnected }
        await rig.client.appWillEnterForeground()
        #expect(rig.client.connectionStatus == .disconnected)
        try await rig.client.connect()
        #expect(rig.client.connectionStatus == .connected)
        try await rig.stop()
    }

    @Test func callbackFormsReportSuccessAndErrorsOnTheCallbackQueue() async throws {
        let rig = try await rig(auto: false)
        await rig.client.disconnect()
        // Every callback below records where it ran: off the settings' callback queue, it records "off queue".
        let key = DispatchSpecificKey<Bool>()
        rig.client.settings.callbackQueue.setSpecific(key: key, value: true)
        let outcomes = NIOLockedValueBox<[String]>([])
        @Sendable func record(_ outcome: String) {
            outcomes.withLockedValue { $0.append(DispatchQueue.getSpecific(key: key) == true ? outcome : "off queue") }
        }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            rig.client.connect(
                onSuccess: {
                    record("connected")
                    done.resume()
                },
                onError: { error in
                    record(error.errorCode)
                    done.resume()
                })
        }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            rig.client.ping(
                onSuccess: {
                    record("pong")
                    done.resume()
                },
                onError: { error in
                    record(error.errorCode)
                    done.resume()
                })
        }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            rig.client.connect(
                onSuccess: { done.resume() },
                onError: { error in
                    record(error.errorCode)
                    done.resume()
                })
        }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            rig.client.disconnect(onSuccess: {
                record("disconnected")
                done.resume()
            })
        }
        #expect(
            outcomes.withLockedValue { $0 } == [
                "connected", "pong", "ERROR_WEBSOCKETS_ALLREADY_IN_CONNECTED_STATE", "disconnected",
            ])
        try await rig.stop()
    }

    @Test func connectionListenersHearEveryChange() async throws {
        let rig = try await rig()
        let listener = RecordingListener()
        rig.client.addConnectionListener("banner", listener)
        await rig.client.appDidEnterBackground()
        await rig.client.appWillEnterForeground()
        await rig.client.waitUntilConnected()
        // Listeners run on the callback queue: a ping through it (a no-op callback) flushes what came before.
        await withCheckedContinuation { done in rig.client.settings.callbackQueue.async { done.resume() } }
        #expect(listener.receivedStatuses == [.disconnected, .connecting, .connected])
        rig.client.removeConnectionListener("banner")
        await rig.client.appDidEnterBackground()
        await withCheckedContinuation { done in rig.client.settings.callbackQueue.async { done.resume() } }
        #expect(listener.receivedStatuses.count == 3)
        try await rig.stop()
    }

    @Test func everyPublicCallIsSafeFromManyTasksAtOnce() async throws {
        let rig = try await rig(auto: false)
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    var generator = SystemRandomNumberGenerator()
                    for step in 0..<150 {
                        switch Int.random(in: 0..<9, using: &generator) {
                        case 0: try? await rig.client.connect()
                        case 1: await rig.client.disconnect()
                        case 2: try? await rig.client.ping()
                        case 3: await rig.client.appDidEnterBackground()
                        case 4: await rig.client.appWillEnterForeground()
                        case 5: await rig.client.networkStatusChanged(available: Bool.random(using: &generator))
                        case 6: _ = rig.client.connectionStatus.value
                        case 7: rig.client.addEventListener("w\(worker)-\(step % 3)", RecordingListener())
                        default: rig.client.removeEventListener("w\(worker)-\(step % 3)")
                        }
                    }
                }
            }
        }
        await rig.client.networkStatusChanged(available: true)
        await rig.client.appWillEnterForeground()
        if rig.client.connectionStatus != .connected { try await rig.client.connect() }
        #expect(rig.client.connectionStatus == .connected)
        #expect(rig.client.getLoggedInUser()?.uid == "alice")
        try await rig.stop()
    }
}
