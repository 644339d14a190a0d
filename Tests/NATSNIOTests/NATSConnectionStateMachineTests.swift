import ParleyTesting
import Testing

@testable import NATSNIO

/// The state machine: inputs in, exact actions out, virtual time (a `Duration` since start), fixed jitter.
@Suite("NATSConnectionStateMachine")
struct NATSConnectionStateMachineTests {
    typealias Machine = NATSConnectionStateMachine
    typealias Action = NATSConnectionStateMachine.Action

    let a = NATSServerAddress(host: "a", port: 4222)
    let b = NATSServerAddress(host: "b", port: 4222)
    let c = NATSServerAddress(host: "c", port: 4222)

    func makeMachine(
        servers: [NATSServerAddress]? = nil, jitter: Double = 1.0,
        configure: (inout NATSConfiguration) -> Void = { _ in }
    ) -> Machine {
        var configuration = NATSConfiguration(servers: servers ?? [self.a, self.b, self.c])
        configure(&configuration)
        return Machine(configuration: configuration, jitter: .fixed(jitter))
    }

    func ms(_ value: Int) -> Duration { .milliseconds(value) }

    /// Drives a machine from idle to connected with `server` at `now`.
    func connect(_ machine: inout Machine, to server: NATSServerAddress, at now: Duration) -> Action {
        #expect(machine.transportConnected(now: now) == .none)
        #expect(machine.infoReceived(NATSServerInfo(serverID: "S"), now: now) == .sendConnect(server))
        return machine.pongReceived(now: now)
    }

    @Test func startOpensTheFirstServerWithAConnectDeadline() {
        var machine = self.makeMachine()
        #expect(machine.start(now: .zero) == .openTransport(self.a))
        #expect(machine.nextDeadline == .seconds(2))
        #expect(machine.start(now: .zero) == .none)
    }

    @Test func noServersFinishesWithAnError() {
        var machine = self.makeMachine(servers: [])
        guard case .finish(let error?) = machine.start(now: .zero) else {
            Issue.record("expected finish")
            return
        }
        #expect(error.code == .invalidURL)
    }

    @Test func handshakeIsEstablishedOnlyAtThePong() {
        var machine = self.makeMachine()
        _ = machine.start(now: .zero)
        #expect(machine.transportConnected(now: self.ms(10)) == .none)
        #expect(!machine.isConnected)
        #expect(machine.infoReceived(NATSServerInfo(serverID: "S"), now: self.ms(20)) == .sendConnect(self.a))
        #expect(!machine.isConnected)
        #expect(machine.pongReceived(now: self.ms(30)) == .established(self.a, isReconnect: false, discovered: []))
        #expect(machine.isConnected)
        #expect(machine.nextDeadline == self.ms(30) + .seconds(2))
    }

    @Test func connectTimeoutCoversTheWholeHandshake() {
        var machine = self.makeMachine()
        _ = machine.start(now: .zero)
        _ = machine.transportConnected(now: self.ms(10))
        _ = machine.infoReceived(NATSServerInfo(serverID: "S"), now: self.ms(20))
        #expect(machine.timerFired(now: self.ms(1999)) == .none)
        let action = machine.timerFired(now: .seconds(2))
        let reason = "connect timeout (2.0 seconds)"
        #expect(
            action
                == .disconnect(
                    .init(
                        reason: reason, wasConnected: false,
                        report: [.connectionAttemptFailed(self.a, reason: reason)], next: .connect(self.b))))
    }

    @Test func failedRoundsBackOffDoublingUpToTheMaximum() {
        var machine = self.makeMachine(jitter: 1.0)
        var now = Duration.zero
        #expect(machine.start(now: now) == .openTransport(self.a))
        var waits: [Duration] = []
        for _ in 0..<8 {
            for server in [self.a, self.b, self.c] {
                _ = server
                let action = machine.transportFailed(reason: "refused", now: now)
                guard case .disconnect(let disconnect) = action else {
                    Issue.record("expected disconnect, got \(action)")
                    return
                }
                #expect(!disconnect.wasConnected)
                if case .wait(let until) = disconnect.next {
                    waits.append(until - now)
                    now = until
                    #expect(machine.nextDeadline == until)
                    #expect(machine.timerFired(now: now - .nanoseconds(1)) == .none)
                    #expect(machine.timerFired(now: now) == .openTransport(self.a))
                }
            }
        }
        #expect(waits == [50, 100, 200, 400, 800, 1600, 2000, 2000].map { self.ms($0) })
    }

    @Test func fullJitterScalesTheCap() {
        var machine = self.makeMachine(servers: [self.a], jitter: 0.25)
        _ = machine.start(now: .zero)
        #expect(
            machine.transportFailed(reason: "refused", now: .zero)
                == .disconnect(
                    .init(
                        reason: "refused", wasConnected: false,
                        report: [.connectionAttemptFailed(self.a, reason: "refused")],
                        next: .wait(until: .microseconds(12_500)))))
        #expect(machine.timerFired(now: .microseconds(12_500)) == .openTransport(self.a))
        guard case .disconnect(let second) = machine.transportFailed(reason: "refused", now: .seconds(1)) else {
            Issue.record("expected disconnect")
            return
        }
        #expect(second.next == .wait(until: .seconds(1) + .milliseconds(25)))
    }

    @Test func seededJitterStaysWithinTheBounds() {
        for seed in UInt64(0)..<50 {
            var configuration = NATSConfiguration(servers: [self.a])
            configuration.reconnectWaitMinimum = .milliseconds(50)
            configuration.reconnectWaitMaximum = .seconds(2)
            var machine = Machine(configuration: configuration, jitter: .seeded(seed))
            var now = Duration.zero
            _ = machine.start(now: now)
            for round in 0..<10 {
                guard case .disconnect(let disconnect) = machine.transportFailed(reason: "x", now: now),
                    case .wait(let until) = disconnect.next
                else {
                    Issue.record("expected wait")
                    return
                }
                let cap = machine.backOffCap(failedRounds: round)
                #expect(until - now >= .zero && until - now <= cap)
                now = until
                #expect(machine.timerFired(now: now) == .openTransport(self.a))
            }
        }
    }

    @Test func backOffResetsAfterAGoodConnection() {
        var machine = self.makeMachine(servers: [self.a], jitter: 1.0)
        var now = Duration.zero
        _ = machine.start(now: now)
        for expected in [50, 100, 200] {
            guard case .disconnect(let d) = machine.transportFailed(reason: "x", now: now),
                case .wait(let until) = d.next
            else {
                Issue.record("expected wait")
                return
            }
            #expect(until - now == self.ms(expected))
            now = until
            _ = machine.timerFired(now: now)
        }
        #expect(self.connect(&machine, to: self.a, at: now) == .established(self.a, isReconnect: false, discovered: []))
        // The only server is lost: wait the first back-off, not the fourth.
        let lost = machine.transportClosed(now: now)
        #expect(
            lost
                == .disconnect(
                    .init(
                        reason: "connection closed", wasConnected: true, report: [],
                        next: .wait(until: now + self.ms(50)))))
        now = now + self.ms(50)
        #expect(machine.timerFired(now: now) == .openTransport(self.a))
        #expect(self.connect(&machine, to: self.a, at: now) == .established(self.a, isReconnect: true, discovered: []))
    }

    @Test func aLostConnectionTriesTheOtherServersFirstAndTheLostOneLast() {
        var machine = self.makeMachine()
        _ = machine.start(now: .zero)
        _ = machine.transportFailed(reason: "refused", now: .zero)  // a fails: b next
        #expect(
            self.connect(&machine, to: self.b, at: .zero) == .established(self.b, isReconnect: false, discovered: []))
        guard case .disconnect(let lost) = machine.transportClosed(now: .seconds(1)) else {
            Issue.record("expected disconnect")
            return
        }
        #expect(lost.wasConnected)
        #expect(lost.next == .connect(self.c))
        guard case .disconnect(let failC) = machine.transportFailed(reason: "x", now: .seconds(1)) else { return }
        #expect(failC.next == .connect(self.a))
        guard case .disconnect(let failA) = machine.transportFailed(reason: "x", now: .seconds(1)) else { return }
        #expect(failA.next == .connect(self.b))
        guard case .disconnect(let failB) = machine.transportFailed(reason: "x", now: .seconds(1)) else { return }
        #expect(failB.next == .wait(until: .seconds(1) + self.ms(50)))
    }

    @Test func aConnectionIsStaleWhenMaxPingsOutstandingAreUnanswered() {
        var machine = self.makeMachine { $0.pingInterval = .milliseconds(200) }
        _ = machine.start(now: .zero)
        _ = self.connect(&machine, to: self.a, at: .zero)
        #expect(machine.nextDeadline == self.ms(200))
        #expect(machine.timerFired(now: self.ms(199)) == .none)
        #expect(machine.timerFired(now: self.ms(200)) == .sendPing)
        #expect(machine.nextDeadline == self.ms(400))
        #expect(machine.timerFired(now: self.ms(400)) == .sendPing)
        let reason = "stale connection: 2 PINGs unanswered"
        #expect(
            machine.timerFired(now: self.ms(600))
                == .disconnect(.init(reason: reason, wasConnected: true, report: [], next: .connect(self.b))))
    }

    @Test func aPongResetsTheOutstandingPings() {
        var machine = self.makeMachine { $0.pingInterval = .milliseconds(200) }
        _ = machine.start(now: .zero)
        _ = self.connect(&machine, to: self.a, at: .zero)
        #expect(machine.timerFired(now: self.ms(200)) == .sendPing)
        #expect(machine.timerFired(now: self.ms(400)) == .sendPing)
        #expect(machine.pongReceived(now: self.ms(450)) == .none)
        #expect(machine.timerFired(now: self.ms(600)) == .sendPing)
        #expect(machine.timerFired(now: self.ms(800)) == .sendPing)
        #expect(machine.isConnected)
    }

    @Test func authorizationRefusedByEveryServerFails() {
        var machine = self.makeMachine()
        _ = machine.start(now: .zero)
        var last: Action = .none
        for server in [self.a, self.b, self.c] {
            _ = machine.transportConnected(now: .zero)
            #expect(machine.infoReceived(NATSServerInfo(serverID: "S"), now: .zero) == .sendConnect(server))
            last = machine.serverErrorReceived("Authorization Violation", now: .zero)
        }
        guard case .disconnect(let disconnect) = last, case .fail(let error) = disconnect.next else {
            Issue.record("expected a failure, got \(last)")
            return
        }
        #expect(error.code == .authorizationViolation)
        #expect(disconnect.report.first == .serverError("Authorization Violation"))
        #expect(machine.state == .finished)
        #expect(machine.nextDeadline == nil)
    }

    @Test func authorizationRefusedBySomeServersKeepsTrying() {
        var machine = self.makeMachine()
        _ = machine.start(now: .zero)
        _ = machine.transportConnected(now: .zero)
        _ = machine.infoReceived(NATSServerInfo(serverID: "S"), now: .zero)
        _ = machine.serverErrorReceived("Authorization Violation", now: .zero)  // a
        _ = machine.transportFailed(reason: "refused", now: .zero)  // b
        _ = machine.transportConnected(now: .zero)
        _ = machine.infoReceived(NATSServerInfo(serverID: "S"), now: .zero)
        guard case .disconnect(let d) = machine.serverErrorReceived("Authorization Violation", now: .zero) else {
            Issue.record("expected disconnect")
            return
        }
        #expect(d.next == .wait(until: self.ms(50)))
    }

    @Test func maxReconnectAttemptsGivesUp() {
        var machine = self.makeMachine(servers: [self.a]) { $0.maxReconnectAttempts = 2 }
        var now = Duration.zero
        #expect(machine.start(now: now) == .openTransport(self.a))
        for _ in 0..<2 {
            guard case .disconnect(let d) = machine.transportFailed(reason: "x", now: now), case .wait(let u) = d.next
            else {
                Issue.record("expected wait")
                return
            }
            now = u
            #expect(machine.timerFired(now: now) == .openTransport(self.a))
        }
        guard case .disconnect(let d) = machine.transportFailed(reason: "x", now: now), case .wait(let u) = d.next
        else {
            Issue.record("expected wait")
            return
        }
        guard case .finish(let error?) = machine.timerFired(now: u) else {
            Issue.record("expected finish")
            return
        }
        #expect(error.code == .maxReconnectsExceeded)
    }

    @Test func lameDuckModeMovesToAnotherServer() {
        var machine = self.makeMachine()
        _ = machine.start(now: .zero)
        _ = self.connect(&machine, to: self.a, at: .zero)
        var info = NATSServerInfo(serverID: "S")
        info.lameDuckMode = true
        #expect(
            machine.infoReceived(info, now: .seconds(1))
                == .disconnect(
                    .init(
                        reason: "server entered lame duck mode", wasConnected: true, report: [.lameDuckMode],
                        next: .connect(self.b))))
    }

    @Test func connectURLsAreDiscoveredWithTheCredentialsOfTheServer() {
        let secured = NATSServerAddress(host: "a", port: 4222, user: "u", password: "p")
        var machine = self.makeMachine(servers: [secured])
        _ = machine.start(now: .zero)
        _ = machine.transportConnected(now: .zero)
        let info = NATSServerInfo(serverID: "S", connectURLs: ["a:4222", "d:4223", "[::1]:4224"])
        #expect(machine.infoReceived(info, now: .zero) == .sendConnect(secured))
        let d = NATSServerAddress(host: "d", port: 4223, user: "u", password: "p")
        let v6 = NATSServerAddress(host: "::1", port: 4224, user: "u", password: "p")
        #expect(machine.pongReceived(now: .zero) == .established(secured, isReconnect: false, discovered: [d, v6]))
        #expect(machine.servers == [secured, d, v6])
        let e = NATSServerAddress(host: "e", port: 4222, user: "u", password: "p")
        let update = NATSServerInfo(serverID: "S", connectURLs: ["a:4222", "d:4223", "e:4222"])
        #expect(machine.infoReceived(update, now: .seconds(1)) == .report([.serversDiscovered([e])]))
        #expect(machine.servers == [secured, d, e])
        #expect(machine.infoReceived(update, now: .seconds(2)) == .none)
    }

    @Test func discoveryCanBeTurnedOff() {
        var machine = self.makeMachine { $0.discoverServers = false }
        _ = machine.start(now: .zero)
        _ = machine.transportConnected(now: .zero)
        _ = machine.infoReceived(NATSServerInfo(serverID: "S", connectURLs: ["d:4222"]), now: .zero)
        #expect(machine.pongReceived(now: .zero) == .established(self.a, isReconnect: false, discovered: []))
        #expect(machine.servers == [self.a, self.b, self.c])
    }

    @Test func permissionErrorsAreReportedWithoutDisconnecting() {
        var machine = self.makeMachine()
        _ = machine.start(now: .zero)
        _ = self.connect(&machine, to: self.a, at: .zero)
        let text = "Permissions Violation for Publish to \"x\""
        #expect(machine.serverErrorReceived(text, now: .zero) == .report([.serverError(text)]))
        #expect(machine.isConnected)
        guard case .disconnect(let d) = machine.serverErrorReceived("Stale Connection", now: .zero) else {
            Issue.record("expected disconnect")
            return
        }
        #expect(d.wasConnected && d.report == [.serverError("Stale Connection")])
    }

    @Test func aProtocolErrorDropsTheConnection() {
        var machine = self.makeMachine()
        _ = machine.start(now: .zero)
        _ = self.connect(&machine, to: self.a, at: .zero)
        #expect(
            machine.protocolError("bad", now: .zero)
                == .disconnect(
                    .init(reason: "protocol error: bad", wasConnected: true, report: [], next: .connect(self.b))))
    }

    @Test func aServerRequiringTLSIsSkipped() {
        var machine = self.makeMachine()
        _ = machine.start(now: .zero)
        _ = machine.transportConnected(now: .zero)
        var info = NATSServerInfo(serverID: "S")
        info.tlsRequired = true
        guard case .disconnect(let d) = machine.infoReceived(info, now: .zero) else {
            Issue.record("expected disconnect")
            return
        }
        #expect(d.next == .connect(self.b))
    }

    @Test func shutdownDrainsWhenConnected() {
        var machine = self.makeMachine()
        _ = machine.start(now: .zero)
        _ = self.connect(&machine, to: self.a, at: .zero)
        #expect(machine.shutdownRequested(now: .seconds(1)) == .drain)
        #expect(machine.nextDeadline == .seconds(2))
        #expect(machine.pongReceived(now: .seconds(1)) == .none)
        #expect(machine.drainCompleted(now: .seconds(1)) == .finish(nil))
        #expect(machine.shutdownRequested(now: .seconds(1)) == .none)
        #expect(machine.nextDeadline == nil)
    }

    @Test func drainIsBoundedInTime() {
        var machine = self.makeMachine()
        _ = machine.start(now: .zero)
        _ = self.connect(&machine, to: self.a, at: .zero)
        #expect(machine.shutdownRequested(now: .zero) == .drain)
        #expect(machine.timerFired(now: self.ms(999)) == .none)
        #expect(machine.timerFired(now: .seconds(1)) == .finish(nil))
    }

    @Test func shutdownWhileDisconnectedFinishesAtOnce() {
        var machine = self.makeMachine(servers: [self.a])
        _ = machine.start(now: .zero)
        _ = machine.transportFailed(reason: "x", now: .zero)
        #expect(machine.shutdownRequested(now: .zero) == .finish(nil))
        #expect(machine.timerFired(now: .seconds(10)) == .none)
    }

    @Test func inputsOfOtherStatesAreIgnored() {
        var machine = self.makeMachine()
        #expect(machine.pongReceived(now: .zero) == .none)
        #expect(machine.transportClosed(now: .zero) == .none)
        #expect(machine.timerFired(now: .zero) == .none)
        _ = machine.start(now: .zero)
        #expect(machine.pongReceived(now: .zero) == .none)
        #expect(machine.drainCompleted(now: .zero) == .none)
    }
}
