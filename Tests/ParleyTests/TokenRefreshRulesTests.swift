import Testing

@testable import Parley

extension Harness {
    /// The server's hello on the current attempt, with the token's time left, then the connection is live.
    mutating func helloConnects(expiresIn remaining: Duration?) -> [Action] {
        machine.tokenExpires(in: remaining, generation: generation ?? -1, now: now)
            + machine.transportOpened(generation: generation ?? -1, now: now)
    }

    /// The server closes the current transport with 4001 and `code` as its reason.
    mutating func refused(_ code: ErrorCode = .authTokenInvalid) -> [Action] {
        ended(code: 4001, error: ParleyError(code, "The server closed the connection.", status: 4001))
    }

    mutating func refreshed(_ id: Int) -> [Action] { machine.tokenRefreshed(id: id, now: now) }
    mutating func refreshFailed(_ id: Int, _ code: ErrorCode = .serverUnreachable) -> [Action] {
        machine.tokenRefreshFailed(id: id, error: ParleyError(code, "the app's server is down"), now: now)
    }
}

extension Array where Element == ConnectionStateMachine.Action {
    var tokenRequests: [Int] { compactMap { if case .requestToken(let id) = $0 { id } else { nil } } }
}

/// The token provider's rules (docs/SDK.md, "Tokens that expire"), in virtual time.
@Suite struct TokenRefreshRules {
    /// A harness with a provider, logged in and connected with a token that has `remaining` left at time zero.
    static func connected(expiresIn remaining: Duration? = .seconds(600), seed: UInt64 = 42) -> Harness {
        var harness = Harness(seed: seed)
        harness.machine.tokenProviderChanged(present: true)
        _ = harness.loggedIn()
        _ = harness.helloConnects(expiresIn: remaining)
        return harness
    }

    @Test func aFreshTokenIsAskedForBeforeTheTokenExpiresAndTheSocketIsReplaced() throws {
        var harness = Self.connected(expiresIn: .seconds(600))
        #expect(harness.machine.nextDeadline == .seconds(25))  // the heartbeat comes first
        #expect(harness.machine.refreshAt == .seconds(540))  // the default lead: 60 s
        #expect(harness.tick(at: .seconds(539)).tokenRequests.isEmpty)
        let asked = harness.tick(at: .seconds(540))
        #expect(asked.tokenRequests == [1])
        #expect(harness.status == .connected)  // the socket keeps running while the provider works
        // Another reason to refresh meanwhile (a request refused) joins the one under way.
        #expect(harness.machine.tokenRejected(now: harness.now).isEmpty)
        #expect(
            harness.at(.seconds(541)) { $0.refreshed(1) } == [
                .refreshEnded(succeeded: true), .closeTransport(generation: 1, code: 1000),
                .openTransport(generation: 2), .report(.connecting),
            ])
        // The new connection's hello gives the new token's expiry.
        #expect(harness.helloConnects(expiresIn: .seconds(600)) == [.report(.connected)])
        #expect(harness.machine.refreshAt == .seconds(541 + 540))
    }

    @Test func aShortLivedTokenIsRefreshedAtHalfItsTimeLeft() throws {
        var harness = Self.connected(expiresIn: .seconds(40))
        #expect(harness.machine.refreshAt == .seconds(20))
        #expect(harness.tick(at: .seconds(20)).tokenRequests == [1])
    }

    @Test func aTokenWithoutALifetimeIsNeverRefreshedAhead() throws {
        var harness = Self.connected(expiresIn: nil)
        #expect(harness.machine.refreshAt == nil)
        for minute in 1...120 { #expect(harness.tick(at: .seconds(60 * minute)).tokenRequests.isEmpty) }
    }

    @Test func withoutAProviderAnExpiringTokenIsLeftToTheServer() throws {
        var harness = Harness()
        _ = harness.loggedIn()
        _ = harness.helloConnects(expiresIn: .seconds(100))
        #expect(harness.tick(at: .seconds(99)).tokenRequests.isEmpty)
        let refused = harness.at(.seconds(100)) { $0.refused() }
        #expect(refused.tokenRequests.isEmpty)
        guard case .failed(let error) = harness.status else {
            Issue.record("\(harness.status)")
            return
        }
        #expect(error.code == .authTokenInvalid)
    }

    @Test func aRefusedTokenIsRefreshedAndTheSocketReopensAtOnce() throws {
        var harness = Self.connected()
        let refused = harness.at(.seconds(10)) { $0.refused() }
        #expect(refused == [.report(.connecting), .requestToken(id: 1)])
        #expect(harness.machine.phase == .awaitingToken)
        #expect(!harness.tick(at: .seconds(11)).opens)  // nothing opens with the refused token
        #expect(
            harness.at(.seconds(12)) { $0.refreshed(1) } == [
                .refreshEnded(succeeded: true), .openTransport(generation: 2),
            ])
        #expect(harness.helloConnects(expiresIn: .seconds(600)) == [.report(.connected)])
    }

    @Test func aDeactivatedUserIsNotRefreshed() throws {
        var harness = Self.connected()
        let refused = harness.refused(.userDeactivated)
        #expect(refused.tokenRequests.isEmpty)
        guard case .failed(let error) = harness.status else {
            Issue.record("\(harness.status)")
            return
        }
        #expect(error.code == .userDeactivated)
    }

    @Test func aFailingProviderIsRetriedWithBackoffThenStopsTheConnection() throws {
        var harness = Self.connected()
        _ = harness.refused()
        var id = 1
        var delays: [Duration] = []
        for attempt in 1...4 {
            let failed = harness.refreshFailed(id)
            guard case .reconnecting(let reported, let delay, let error) = failed.reported.last else {
                Issue.record("attempt \(attempt): \(failed)")
                return
            }
            #expect(reported == attempt)
            #expect(error.code == .tokenRefreshFailed && error.underlying?.contains("ERR_SERVER_UNREACHABLE") == true)
            #expect(delay <= ConnectionStateMachine.backoffCeiling(attempt: attempt, configuration: .init()))
            delays.append(delay)
            // Nothing is asked before the delay has passed; then the provider is asked again.
            let before = harness.now + delay - .milliseconds(1)
            if before > harness.now { #expect(harness.tick(at: before).tokenRequests.isEmpty) }
            let again = harness.tick(at: harness.now + .milliseconds(1) + (before > harness.now ? .zero : delay))
            #expect(again.tokenRequests == [id + 1])
            id += 1
        }
        #expect(delays.count == 4)
        let last = harness.refreshFailed(id)
        guard case .failed(let error) = last.reported.last else {
            Issue.record("\(last)")
            return
        }
        #expect(error.code == .tokenRefreshFailed)
        #expect(!harness.tick(at: harness.now + .seconds(3600)).opens)
        // connect() tries again from the start: the old token, then the provider.
        let retried = try harness.connect().get()
        #expect(retried.opens)
    }

    @Test func aProviderThatNeverAnswersTimesOutAndItsLateAnswerIsIgnored() throws {
        var harness = Self.connected()
        _ = harness.at(.seconds(1)) { $0.refused() }
        #expect(harness.machine.nextDeadline == .seconds(31))
        let timedOut = harness.tick(at: .seconds(31))
        guard case .reconnecting(1, _, let error) = timedOut.reported.last else {
            Issue.record("\(timedOut)")
            return
        }
        #expect(error.underlying?.contains("ERR_TIMEOUT") == true)
        #expect(harness.refreshed(1).isEmpty)  // the late answer of the first request
        #expect(harness.machine.phase == .awaitingToken)
    }

    @Test func aRefreshedTokenTheServerRefusesAgainCountsAsAFailure() throws {
        var harness = Self.connected()
        _ = harness.refused()
        _ = harness.refreshed(1)
        let again = harness.refused()  // the new connection is refused before its hello
        #expect(again.tokenRequests.isEmpty)  // not at once: after a backoff
        guard case .reconnecting(1, let delay, let error) = again.reported.last else {
            Issue.record("\(again)")
            return
        }
        #expect(error.code == .tokenRefreshFailed)
        #expect(harness.tick(at: harness.now + delay).tokenRequests == [2])
    }

    @Test func aConnectionAcceptedWithTheRefreshedTokenResetsTheFailures() throws {
        var harness = Self.connected()
        _ = harness.refused()
        _ = harness.refreshFailed(1)
        _ = harness.tick(at: .seconds(60))
        _ = harness.refreshed(2)
        _ = harness.helloConnects(expiresIn: .seconds(600))
        #expect(harness.machine.refreshFailures == 0)
    }

    @Test func aProviderTakenAwayWhileATokenIsAwaitedStopsTheConnection() throws {
        var harness = Self.connected()
        _ = harness.refused()
        #expect(harness.machine.phase == .awaitingToken)
        let removed = harness.machine.tokenProviderChanged(present: false)
        #expect(removed.contains(.refreshEnded(succeeded: false)))
        guard case .failed(let error) = removed.reported.last else {
            Issue.record("\(removed)")
            return
        }
        #expect(error.code == .authTokenInvalid)
        #expect(harness.refreshed(1).isEmpty)  // the provider's late answer changes nothing
        #expect(!harness.tick(at: .seconds(3600)).opens)
        // Taken away while connected: nothing changes until the server refuses the token.
        var connected = Self.connected()
        #expect(connected.machine.tokenProviderChanged(present: false).isEmpty)
        #expect(connected.status == .connected)
    }

    @Test func aLogoutDuringARefreshDropsItsAnswer() throws {
        var harness = Self.connected()
        _ = harness.refused()
        #expect(harness.loggedOut().contains(.refreshEnded(succeeded: false)))
        #expect(harness.refreshed(1).isEmpty)
        #expect(harness.status == .disconnected)
        #expect(harness.loggedIn() == [.openTransport(generation: 2), .report(.connecting)])
    }

    @Test func backFromTheBackgroundPastTheRefreshTimeAFreshTokenComesFirst() throws {
        var harness = Self.connected(expiresIn: .seconds(600))
        _ = harness.at(.seconds(100)) { $0.background() }
        #expect(harness.tick(at: .seconds(550)).tokenRequests.isEmpty)  // nobody needs a token in the background
        let back = harness.at(.seconds(700)) { $0.foreground() }
        #expect(back == [.report(.connecting), .requestToken(id: 1)])
        #expect(harness.refreshed(1) == [.refreshEnded(succeeded: true), .openTransport(generation: 2)])
    }

    @Test func aRequestRefusedOverHTTPStartsOneRefreshWithoutClosingTheSocket() throws {
        var harness = Self.connected()
        #expect(harness.machine.tokenRejected(now: harness.now) == [.requestToken(id: 1)])
        #expect(harness.machine.tokenRejected(now: harness.now).isEmpty)
        // The server ends the socket for the same token meanwhile: still one request.
        #expect(harness.refused().tokenRequests.isEmpty)
        #expect(harness.refreshed(1) == [.refreshEnded(succeeded: true), .openTransport(generation: 2)])
    }

    @Test func aFailingProviderWhileConnectedKeepsTheSocketAndTriesAgain() throws {
        var harness = Self.connected(expiresIn: .seconds(600))
        var id = 0
        var now = Duration.seconds(540)
        for _ in 1...6 {
            let asked = harness.tick(at: now)
            guard let requested = asked.tokenRequests.first else {
                Issue.record("no request at \(now): \(asked)")
                return
            }
            id = requested
            let failed = harness.refreshFailed(id)
            #expect(failed.reported.isEmpty && !failed.closes)
            guard let next = harness.machine.refreshAt else {
                Issue.record("no retry")
                return
            }
            now = next
        }
        #expect(harness.status == .connected)
        // The server ends the socket at the expiry: the failures so far count, and the next one stops it.
        let refused = harness.at(.seconds(600)) { $0.refused() }
        #expect(refused.tokenRequests.isEmpty || refused.tokenRequests == [id + 1])
        #expect(harness.machine.phase == .awaitingToken)
    }
}
