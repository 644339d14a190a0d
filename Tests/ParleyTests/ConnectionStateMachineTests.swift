import Testing

@testable import Parley

/// Drives a ``ConnectionStateMachine`` in virtual time and keeps what it asked for.
struct Harness {
    typealias Action = ConnectionStateMachine.Action
    var machine: ConnectionStateMachine
    var now: Duration = .zero

    init(
        auto: Bool = true, seed: UInt64 = 42, configure: (inout ConnectionStateMachine.Configuration) -> Void = { _ in }
    ) {
        var configuration = ConnectionStateMachine.Configuration()
        configuration.autoConnect = auto
        configure(&configuration)
        machine = ConnectionStateMachine(configuration: configuration, seed: seed)
    }

    var status: ConnectionStatus { machine.status }
    var generation: Int? {
        switch machine.phase {
        case .connecting(let generation, _), .connected(let generation, _, _, _): return generation
        default: return nil
        }
    }

    /// Sets the time, then does `body`.
    mutating func at<R>(_ time: Duration, _ body: (inout Harness) -> R) -> R {
        now = time
        return body(&self)
    }

    mutating func loggedIn() -> [Action] { machine.loggedIn(now: now) }
    mutating func loggedOut() -> [Action] { machine.loggedOut(now: now) }
    mutating func connect() -> Result<[Action], ParleyError> { machine.connectRequested(now: now) }
    mutating func disconnect() -> [Action] { machine.disconnectRequested(now: now) }
    mutating func ping() -> Result<[Action], ParleyError> { machine.pingRequested(now: now) }
    mutating func background() -> [Action] { machine.appEnteredBackground(now: now) }
    mutating func foreground() -> [Action] { machine.appEnteredForeground(now: now) }
    mutating func network(_ available: Bool) -> [Action] { machine.networkChanged(available: available, now: now) }
    mutating func tick() -> [Action] { machine.tick(now: now) }

    /// The server's hello on the current attempt.
    mutating func opened() -> [Action] { machine.transportOpened(generation: generation ?? -1, now: now) }
    mutating func frame() -> [Action] { machine.frameReceived(generation: generation ?? -1, now: now) }

    /// The current transport ends (an error, or a close code from the server).
    mutating func ended(code: UInt16? = nil, error: ParleyError = ParleyError(.webSocketError, "lost")) -> [Action] {
        machine.transportEnded(generation: generation ?? -1, closeCode: code, error: error, now: now)
    }

    /// Logs in and completes the first connection.
    mutating func connected(auto: Bool = true) {
        _ = loggedIn()
        if !auto { _ = try? connect().get() }
        _ = opened()
    }

    mutating func tick(at time: Duration) -> [Action] {
        now = time
        return tick()
    }
}

extension Array where Element == ConnectionStateMachine.Action {
    var opens: Bool { contains { if case .openTransport = $0 { true } else { false } } }
    var closes: Bool { contains { if case .closeTransport = $0 { true } else { false } } }
    var pings: Bool { contains { if case .sendPing = $0 { true } else { false } } }
    var reported: [ConnectionStatus] { compactMap { if case .report(let status) = $0 { status } else { nil } } }
}

// MARK: The documented rules

@Suite struct DefaultBehaviourRules {
    @Test func loginOpensTheSocketAndTheHelloConnectsIt() throws {
        var harness = Harness()
        #expect(harness.loggedIn() == [.openTransport(generation: 1), .report(.connecting)])
        #expect(harness.opened() == [.report(.connected)])
        #expect(harness.status.value == "connected")
    }

    @Test func nothingConnectsBeforeLogin() throws {
        var harness = Harness()
        #expect(harness.tick(at: .seconds(100)).isEmpty)
        #expect(harness.foreground().isEmpty)
        #expect(harness.network(false).isEmpty && harness.network(true).isEmpty)
        #expect(harness.status == .disconnected)
    }

    @Test func logoutClosesTheSocket() throws {
        var harness = Harness()
        harness.connected()
        #expect(harness.loggedOut() == [.closeTransport(generation: 1, code: 1000), .report(.disconnected)])
        #expect(harness.tick(at: .seconds(100)).isEmpty)
    }
}

@Suite struct AutoModeRules {
    @Test func autoModeIsConnectedInTheForeground() throws {
        var harness = Harness()
        harness.connected()
        #expect(harness.status == .connected)
        #expect(!harness.tick(at: .seconds(10)).closes)
    }

    @Test func autoModeDisconnectsAtOnceInTheBackground() throws {
        var harness = Harness()
        harness.connected()
        #expect(
            harness.at(.seconds(5)) { $0.background() } == [
                .closeTransport(generation: 1, code: 1000), .report(.disconnected),
            ])
        #expect(harness.tick(at: .seconds(500)).isEmpty)
    }

    @Test func autoModeReconnectsWhenBackInTheForeground() throws {
        var harness = Harness()
        harness.connected()
        _ = harness.background()
        #expect(harness.at(.seconds(60)) { $0.foreground() } == [.openTransport(generation: 2), .report(.connecting)])
        #expect(harness.opened() == [.report(.connected)])
    }

    @Test func autoModeReconnectsByItselfWhenTheNetworkReturnsInTheForeground() throws {
        var harness = Harness()
        harness.connected()
        #expect(harness.network(false) == [.closeTransport(generation: 1, code: 1000), .report(.waitingForNetwork)])
        #expect(harness.tick(at: .seconds(120)).isEmpty)
        #expect(harness.network(true) == [.openTransport(generation: 2), .report(.connecting)])
    }

    @Test func autoModeReconnectsAfterALostConnection() throws {
        var harness = Harness()
        harness.connected()
        let actions = harness.at(.seconds(3)) { $0.ended() }
        guard case .reconnecting(1, let delay, let error)? = actions.reported.first else {
            Issue.record("expected reconnecting, got \(actions)")
            return
        }
        #expect(error.code == .webSocketError && delay <= .milliseconds(500))
        #expect(harness.tick(at: .seconds(3) + delay - .milliseconds(1)).isEmpty || delay == .zero)
        #expect(harness.tick(at: .seconds(3) + delay).opens)
    }
}

@Suite struct ManualModeRules {
    @Test func manualModeConnectsNothingUntilConnect() throws {
        var harness = Harness(auto: false)
        #expect(harness.loggedIn().isEmpty)
        #expect(harness.tick(at: .seconds(100)).isEmpty && harness.status == .disconnected)
        #expect(try harness.connect().get() == [.openTransport(generation: 1), .report(.connecting)])
    }

    @Test func connectBeforeLoginFailsWithNotLoggedIn() throws {
        var harness = Harness(auto: false)
        #expect(harness.connect().failure?.code == .notLoggedIn)
        var auto = Harness(auto: true)
        #expect(auto.connect().failure?.code == .notLoggedIn)
    }

    @Test func connectWhileConnectedFailsWithAlreadyConnected() throws {
        var harness = Harness(auto: false)
        harness.connected(auto: false)
        #expect(harness.connect().failure?.code == .alreadyConnected)
        #expect(ErrorCode.alreadyConnected.rawValue == "ERROR_WEBSOCKETS_ALLREADY_IN_CONNECTED_STATE")
    }

    @Test func disconnectClosesAndTheStatusSaysDisconnected() throws {
        var harness = Harness(auto: false)
        harness.connected(auto: false)
        #expect(harness.disconnect() == [.closeTransport(generation: 1, code: 1000), .report(.disconnected)])
        #expect(harness.status.value == "disconnected")
    }

    @Test func afterDisconnectOnlyConnectBringsTheSocketBack() throws {
        for auto in [false, true] {
            var harness = Harness(auto: auto)
            harness.connected(auto: auto)
            _ = harness.disconnect()
            #expect(harness.background().isEmpty && harness.foreground().isEmpty)
            #expect(harness.network(false).isEmpty && harness.network(true).isEmpty)
            #expect(harness.tick(at: .seconds(300)).isEmpty)
            #expect(try harness.connect().get().opens)
        }
    }

    @Test func manualModeKeepsTheSocketThirtySecondsInTheBackgroundThenCloses() throws {
        var harness = Harness(auto: false)
        harness.connected(auto: false)
        #expect(harness.at(.seconds(10)) { $0.background() }.isEmpty)
        #expect(!harness.tick(at: .seconds(39)).closes)
        _ = harness.machine.frameReceived(generation: 1, now: .seconds(39))
        #expect(harness.tick(at: .seconds(40)) == [.closeTransport(generation: 1, code: 1000), .report(.disconnected)])
        // Coming back to the foreground does not reconnect: only connect() does.
        #expect(harness.foreground().isEmpty)
        #expect(try harness.connect().get().opens)
    }

    @Test func eachPingExtendsTheBackgroundByThirtySeconds() throws {
        var harness = Harness(auto: false)
        harness.connected(auto: false)
        _ = harness.at(.seconds(10)) { $0.background() }
        #expect(try harness.at(.seconds(30)) { $0.ping() }.get() == [.sendPing(generation: 1, id: 1)])
        _ = harness.frame()
        #expect(try harness.at(.seconds(55)) { $0.ping() }.get().pings)
        _ = harness.frame()
        #expect(!harness.tick(at: .seconds(84)).closes)
        _ = harness.frame()
        #expect(harness.tick(at: .seconds(85)).closes)
        #expect(harness.status == .disconnected)
    }

    @Test func pingInAutoModeFailsWithPingNotAvailable() throws {
        var harness = Harness(auto: true)
        harness.connected()
        #expect(harness.ping().failure?.code == .pingNotAvailable)
        #expect(ErrorCode.pingNotAvailable.rawValue == "ERROR_PING_NOT_AVAILABLE")
    }

    @Test func pingWhileDisconnectedFails() throws {
        var harness = Harness(auto: false)
        #expect(harness.ping().failure?.code == .notLoggedIn)
        _ = harness.loggedIn()
        #expect(harness.ping().failure?.code == .notConnected)
    }

    @Test func manualModeReconnectsByItselfAfterALostNetworkInTheForeground() throws {
        var harness = Harness(auto: false)
        harness.connected(auto: false)
        #expect(harness.network(false).reported == [.waitingForNetwork])
        #expect(harness.network(true).opens)
        _ = harness.opened()
        #expect(harness.ended().reported.first.map { if case .reconnecting = $0 { true } else { false } } == true)
    }

    @Test func manualModeDoesNotReconnectALostConnectionInTheBackground() throws {
        var harness = Harness(auto: false)
        harness.connected(auto: false)
        _ = harness.at(.seconds(1)) { $0.background() }
        #expect(harness.ended() == [.report(.disconnected)])
        #expect(harness.tick(at: .seconds(20)).isEmpty)
        #expect(harness.foreground().isEmpty && harness.network(false).isEmpty && harness.network(true).isEmpty)
        #expect(try harness.connect().get().opens)
    }

    @Test func manualModeDoesNotReconnectALostNetworkInTheBackground() throws {
        var harness = Harness(auto: false)
        harness.connected(auto: false)
        _ = harness.at(.seconds(1)) { $0.background() }
        #expect(harness.network(false) == [.closeTransport(generation: 1, code: 1000), .report(.disconnected)])
        #expect(harness.network(true).isEmpty && harness.foreground().isEmpty)
    }

    @Test func afterDisconnectALostNetworkDoesNotReconnect() throws {
        var harness = Harness(auto: false)
        harness.connected(auto: false)
        _ = harness.disconnect()
        #expect(harness.network(false).isEmpty)
        #expect(harness.network(true).isEmpty)
        #expect(harness.status == .disconnected)
    }
}

// MARK: Better than the references

@Suite struct HeartbeatRules {
    @Test func aSilentServerIsNoticedByTheHeartbeatAndReconnected() throws {
        var harness = Harness()
        harness.connected()
        #expect(harness.tick(at: .seconds(24)).isEmpty)
        #expect(harness.tick(at: .seconds(25)) == [.sendPing(generation: 1, id: 1)])
        #expect(harness.tick(at: .seconds(34)).isEmpty)
        let actions = harness.tick(at: .seconds(35))
        #expect(actions.first == .closeTransport(generation: 1, code: 1001))
        guard case .reconnecting(1, _, let error)? = actions.reported.first else {
            Issue.record("\(actions)")
            return
        }
        #expect(error.code == .webSocketError)
    }

    @Test func anyFrameFromTheServerCountsAsLife() throws {
        var harness = Harness()
        harness.connected()
        _ = harness.tick(at: .seconds(25))
        _ = harness.at(.seconds(30)) { $0.frame() }
        #expect(harness.tick(at: .seconds(40)).isEmpty)
        #expect(harness.tick(at: .seconds(55)).pings)
    }

    @Test func aConnectAttemptThatHangsTimesOutAndCountsAsAFailure() throws {
        var harness = Harness()
        _ = harness.loggedIn()
        #expect(harness.tick(at: .seconds(14)).isEmpty)
        let actions = harness.tick(at: .seconds(15))
        #expect(actions.first == .closeTransport(generation: 1, code: 1000))
        #expect(
            actions.reported.first.map {
                if case .reconnecting(1, _, let error) = $0 { error.code == .timeout } else { false }
            } == true)
    }

    @Test func eventsOfAnEarlierConnectionAreIgnored() throws {
        var harness = Harness()
        harness.connected()
        _ = harness.background()
        _ = harness.foreground()
        #expect(
            harness.machine.transportEnded(
                generation: 1, closeCode: nil, error: ParleyError(.webSocketError, "old"), now: harness.now
            ).isEmpty)
        #expect(harness.machine.transportOpened(generation: 1, now: harness.now).isEmpty)
        #expect(harness.status == .connecting)
    }
}

@Suite struct BackoffRules {
    /// Fails the attempts one after another; returns each scheduled delay.
    func delays(seed: UInt64, failures: Int) -> [Duration] {
        var harness = Harness(seed: seed)
        _ = harness.loggedIn()
        var delays: [Duration] = []
        for _ in 0..<failures {
            guard case .reconnecting(_, let delay, _)? = harness.ended().reported.first else { return delays }
            delays.append(delay)
            _ = harness.tick(at: harness.now + delay)
        }
        return delays
    }

    @Test func reconnectionBacksOffExponentiallyWithFullJitterUpToTheCap() throws {
        let configuration = ConnectionStateMachine.Configuration()
        let ceilings = (1...10).map { ConnectionStateMachine.backoffCeiling(attempt: $0, configuration: configuration) }
        #expect(
            ceilings.prefix(7) == [
                .milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16), .seconds(30),
            ])
        #expect(ceilings.suffix(3).allSatisfy { $0 == .seconds(30) })
        var sums = [Duration](repeating: .zero, count: 10)
        let runs = 400
        for seed in 0..<UInt64(runs) {
            let delays = delays(seed: seed, failures: 10)
            #expect(delays.count == 10)
            for (index, delay) in delays.enumerated() {
                #expect(delay >= .zero && delay <= ceilings[index])
                sums[index] += delay
            }
        }
        // Full jitter: uniform over [0, ceiling], so the mean is about half the ceiling (clients spread out).
        for (index, sum) in sums.enumerated() {
            let mean = sum / runs
            #expect(mean > ceilings[index] * 0.4 && mean < ceilings[index] * 0.6, "attempt \(index + 1): mean \(mean)")
        }
    }

    @Test func theBackoffResetsAfterAStableConnection() throws {
        var harness = Harness()
        _ = harness.loggedIn()
        for _ in 0..<6 {
            guard case .reconnecting(_, let delay, _)? = harness.ended().reported.first else { return }
            _ = harness.tick(at: harness.now + delay)
        }
        #expect(harness.machine.failedAttempts == 6)
        _ = harness.opened()
        let connectedAt = harness.now
        _ = harness.at(connectedAt + .seconds(61)) { $0.frame() }
        guard case .reconnecting(1, let delay, _)? = harness.ended().reported.first else {
            Issue.record("no reset")
            return
        }
        #expect(delay <= .milliseconds(500))
    }

    @Test func aShortLivedConnectionDoesNotResetTheBackoff() throws {
        var harness = Harness()
        _ = harness.loggedIn()
        for _ in 0..<3 {
            guard case .reconnecting(_, let delay, _)? = harness.ended().reported.first else { return }
            _ = harness.tick(at: harness.now + delay)
        }
        _ = harness.opened()
        guard case .reconnecting(4, _, _)? = harness.at(harness.now + .seconds(2)) { $0.ended() }.reported.first else {
            Issue.record("expected attempt 4")
            return
        }
    }

    @Test func theForegroundAndTheNetworkRetryAtOnceDuringABackoff() throws {
        var harness = Harness()
        _ = harness.loggedIn()
        for _ in 0..<8 {
            if case .reconnecting(_, let delay, _)? = harness.ended().reported.first {
                _ = harness.tick(at: harness.now + delay)
            }
        }
        _ = harness.ended()
        #expect(harness.network(false).reported == [.waitingForNetwork])
        #expect(harness.network(true).opens)
        _ = harness.ended()
        _ = harness.background()
        #expect(harness.foreground().opens)
        #expect(harness.machine.failedAttempts == 0)
    }

    @Test func aRejectedTokenStopsReconnectionUntilTheNextLogin() throws {
        var harness = Harness()
        harness.connected()
        let rejection = ParleyError(.authTokenInvalid, "revoked")
        #expect(harness.ended(code: 4001, error: rejection) == [.report(.failed(rejection))])
        #expect(harness.tick(at: .seconds(3600)).isEmpty)
        #expect(harness.foreground().isEmpty && harness.network(false).isEmpty && harness.network(true).isEmpty)
        #expect(harness.loggedIn().opens)
    }
}

@Suite struct TimeJumpRules {
    @Test func aPongDeadlineNoticedLateAfterASleepProbesAgainInsteadOfKilling() throws {
        var harness = Harness()
        harness.connected()
        #expect(harness.tick(at: .seconds(25)).pings)
        // The device slept: the next tick comes ten minutes later, long after the pong deadline (35 s).
        let afterSleep = harness.tick(at: .seconds(625))
        #expect(afterSleep == [.sendPing(generation: 1, id: 2)])
        #expect(harness.status == .connected)
        // A server that answers keeps the connection; one that stays silent is given up on time.
        #expect(harness.tick(at: .seconds(634)).isEmpty)
        #expect(harness.tick(at: .seconds(635)).closes)
    }

    @Test func aHeartbeatDueDuringASleepIsSentAtOnceOnWaking() throws {
        var harness = Harness()
        harness.connected()
        #expect(harness.tick(at: .seconds(900)) == [.sendPing(generation: 1, id: 1)])
    }

    @Test func theBackgroundGraceCountsTimeAsleep() throws {
        var harness = Harness(auto: false)
        harness.connected(auto: false)
        _ = harness.at(.seconds(10)) { $0.background() }
        #expect(harness.tick(at: .seconds(3600)).closes)
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
