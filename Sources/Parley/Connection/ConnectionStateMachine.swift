/// The rules of the real-time connection, as a pure state machine.
///
/// No I/O, no tasks, no clock: every input carries `now` (time since the client started, from the injected clock),
/// every output is an ``Action`` for the driver to perform, and timers are deadlines the driver reads from
/// ``nextDeadline`` and reports back through ``tick(now:)``. Tests feed inputs and check actions, in virtual time.
///
/// The rules (docs/SDK.md maps each to its test):
/// - Auto mode: connected while logged in and in the foreground; disconnected at once in the background;
///   reconnects on foreground, on network return, and after a lost connection (backoff with full jitter).
/// - Manual mode: nothing connects until `connect()`; `disconnect()` stops until the next `connect()`; in the
///   background the socket stays for `backgroundGrace` after entering the background or after the last `ping()`,
///   then closes; a lost connection is re-established in the foreground only.
/// - A server that stops answering pings within `pongTimeout` is a lost connection, unless the deadline is noticed
///   so late that the device must have been asleep: then the connection is probed again instead.
/// - A token the server rejects (close 4001) stops reconnection until the next login or `connect()`, unless the app
///   gave a token provider: then the SDK asks it for a fresh token (also `tokenRefreshLead` before the token expires,
///   as the server's hello says), one request at a time, and reconnects with it; a provider that fails
///   `maximumTokenRefreshFailures` times in a row (retried after backoffs) stops the connection with
///   `ERR_TOKEN_REFRESH_FAILED`.
struct ConnectionStateMachine: Sendable {
    struct Configuration: Sendable, Hashable {
        /// Auto mode (`autoEstablishSocketConnection(true)`) or manual mode.
        var autoConnect = true
        /// Time between heartbeat pings while no frame arrives.
        var heartbeatInterval: Duration = .seconds(25)
        /// How long to wait for a pong (or any frame) after a ping.
        var pongTimeout: Duration = .seconds(10)
        /// How long an attempt may take until the server's hello.
        var connectTimeout: Duration = .seconds(15)
        /// Manual mode: how long the socket outlives the background without a `ping()`.
        var backgroundGrace: Duration = .seconds(30)
        /// Reconnection delays: a random delay in `0...min(maximum, initial * 2^(attempt-1))`.
        var initialBackoff: Duration = .milliseconds(500)
        var maximumBackoff: Duration = .seconds(30)
        /// A connection that lasted this long resets the backoff.
        var stableConnection: Duration = .seconds(60)
        /// A deadline noticed later than this is a sign the device slept (the timer could not fire).
        var lateTimerTolerance: Duration = .seconds(5)
        /// How long before a token's expiry a fresh one is asked for (at half the time left when that is shorter).
        var tokenRefreshLead: Duration = .seconds(60)
        /// How long the app's token provider may take.
        var tokenRefreshTimeout: Duration = .seconds(30)
        /// Failed refreshes in a row before the connection stops with `ERR_TOKEN_REFRESH_FAILED`.
        var maximumTokenRefreshFailures = 5
    }

    enum AppState: Sendable, Hashable {
        case foreground
        case background
    }

    struct PendingPing: Sendable, Hashable {
        var id: Int
        var deadline: Duration
    }

    /// A request to the app's token provider under way.
    struct TokenRefresh: Sendable, Hashable {
        var id: Int
        var deadline: Duration
    }

    enum Phase: Sendable, Hashable {
        /// Not connected and not trying.
        case idle
        /// Waiting for the server's hello on transport `generation`.
        case connecting(generation: Int, deadline: Duration)
        case connected(generation: Int, since: Duration, nextPingAt: Duration, pendingPing: PendingPing?)
        /// Waiting until `until` for reconnection attempt `attempt`.
        case backingOff(until: Duration, attempt: Int)
        /// Wanting a connection, but the device is offline.
        case waitingForNetwork
        /// Wanting a connection, waiting for a fresh token from the app's provider (asked now, or again at
        /// `refreshAt` after a failure).
        case awaitingToken
        /// Stopped: the server rejected the credentials.
        case failed(ParleyError)
    }

    enum Action: Sendable, Hashable {
        /// Open a new transport, tagged with `generation`; report what happens to it with that generation.
        case openTransport(generation: Int)
        /// Close the transport of `generation` with a WebSocket close code.
        case closeTransport(generation: Int, code: UInt16)
        /// Send an application ping frame on the transport of `generation`.
        case sendPing(generation: Int, id: Int)
        /// Ask the app's token provider for a fresh token; report with ``tokenRefreshed(id:now:)`` or
        /// ``tokenRefreshFailed(id:error:now:)``.
        case requestToken(id: Int)
        /// The refresh that was under way ended (requests refused for the old token may be tried again when it
        /// succeeded).
        case refreshEnded(succeeded: Bool)
        /// The status changed.
        case report(ConnectionStatus)
    }

    let configuration: Configuration
    private(set) var phase: Phase = .idle
    private(set) var status: ConnectionStatus = .disconnected
    private(set) var isLoggedIn = false
    private(set) var appState: AppState = .foreground
    private(set) var networkAvailable = true
    /// Auto mode: false only after `disconnect()`. Manual mode: true after `connect()`.
    private(set) var wantsConnection: Bool
    /// Manual mode in the background: when the socket closes unless `ping()` extends it.
    private(set) var backgroundDeadline: Duration?
    private(set) var failedAttempts = 0
    /// Whether the app gave a token provider.
    private(set) var hasTokenProvider = false
    /// The provider's request under way.
    private(set) var tokenRefresh: TokenRefresh?
    /// When to ask for a fresh token: before the current one expires, or again after a failed refresh.
    private(set) var refreshAt: Duration?
    /// Failed refreshes in a row.
    private(set) var refreshFailures = 0
    /// The token came from the provider and no connection has been accepted with it yet.
    private var tokenUnproven = false
    private var nextRefreshID = 0
    private var generation = 0
    private var nextPingID = 0
    private var random: SplitMix64

    init(configuration: Configuration, seed: UInt64) {
        self.configuration = configuration
        self.wantsConnection = configuration.autoConnect
        self.random = SplitMix64(seed: seed)
    }

    var isConnected: Bool {
        if case .connected = phase { return true }
        return false
    }

    /// The earliest time at which ``tick(now:)`` has something to do.
    var nextDeadline: Duration? {
        var deadlines: [Duration] = []
        switch phase {
        case .connecting(_, let deadline): deadlines.append(deadline)
        case .connected(_, _, let nextPingAt, let pendingPing): deadlines.append(pendingPing?.deadline ?? nextPingAt)
        case .backingOff(let until, _): deadlines.append(until)
        case .idle, .waitingForNetwork, .failed, .awaitingToken: break
        }
        if let backgroundDeadline { deadlines.append(backgroundDeadline) }
        if let tokenRefresh { deadlines.append(tokenRefresh.deadline) }
        if let refreshAt, refreshDue { deadlines.append(refreshAt) }
        return deadlines.min()
    }

    // MARK: Inputs from the app

    /// A user logged in (or a saved session was restored).
    mutating func loggedIn(now: Duration) -> [Action] {
        isLoggedIn = true
        wantsConnection = configuration.autoConnect
        failedAttempts = 0
        if case .failed = phase { phase = .idle }
        return forgetRefresh() + reconcile(now: now)
    }

    /// The user logged out: close, and forget any intent to connect.
    mutating func loggedOut(now: Duration) -> [Action] {
        isLoggedIn = false
        wantsConnection = configuration.autoConnect
        backgroundDeadline = nil
        if case .failed = phase { phase = .idle }
        return forgetRefresh() + reconcile(now: now)
    }

    /// `connect()`: fails when nobody is logged in or the socket is already connected.
    mutating func connectRequested(now: Duration) -> Result<[Action], ParleyError> {
        guard isLoggedIn else { return .failure(ParleyError(.notLoggedIn, "Log in before connecting.")) }
        if isConnected {
            return .failure(
                ParleyError(.alreadyConnected, "Web sockets connect called while web sockets are already connected.")
            )
        }
        wantsConnection = true
        failedAttempts = 0
        refreshFailures = 0
        if appState == .background && !configuration.autoConnect {
            backgroundDeadline = now + configuration.backgroundGrace
        }
        var actions: [Action] = []
        switch phase {
        case .failed, .backingOff:
            // An explicit connect() retries at once, even after a rejected token or during a backoff.
            phase = .idle
        case .idle, .connecting, .connected, .waitingForNetwork, .awaitingToken:
            break
        }
        actions += reconcile(now: now)
        return .success(actions)
    }

    /// `disconnect()`: close, and stay disconnected until `connect()` (or, in auto mode, the next login).
    mutating func disconnectRequested(now: Duration) -> [Action] {
        wantsConnection = false
        backgroundDeadline = nil
        return reconcile(now: now)
    }

    /// `ping()` (manual mode): keeps the socket alive in the background for another `backgroundGrace`, and
    /// checks that the server answers.
    mutating func pingRequested(now: Duration) -> Result<[Action], ParleyError> {
        guard !configuration.autoConnect else {
            return .failure(
                ParleyError(.pingNotAvailable, "ping() is for manual mode: autoEstablishSocketConnection(false)."))
        }
        guard isLoggedIn else { return .failure(ParleyError(.notLoggedIn, "Log in before pinging.")) }
        guard case .connected(let generation, let since, _, _) = phase else {
            return .failure(ParleyError(.notConnected, "The socket is not connected; call connect()."))
        }
        if appState == .background { backgroundDeadline = now + configuration.backgroundGrace }
        let id = takePingID()
        phase = .connected(
            generation: generation, since: since, nextPingAt: now + configuration.heartbeatInterval,
            pendingPing: PendingPing(id: id, deadline: now + configuration.pongTimeout)
        )
        return .success([.sendPing(generation: generation, id: id)])
    }

    mutating func appEnteredBackground(now: Duration) -> [Action] {
        guard appState == .foreground else { return [] }
        appState = .background
        if !configuration.autoConnect && wantsConnection {
            backgroundDeadline = now + configuration.backgroundGrace
        }
        return reconcile(now: now)
    }

    mutating func appEnteredForeground(now: Duration) -> [Action] {
        guard appState == .background else { return [] }
        appState = .foreground
        backgroundDeadline = nil
        return retryNow(now: now)
    }

    mutating func networkChanged(available: Bool, now: Duration) -> [Action] {
        guard available != networkAvailable else { return [] }
        networkAvailable = available
        if available { return retryNow(now: now) }
        if !configuration.autoConnect && appState == .background {
            // Manual mode does not re-establish a socket lost in the background: only connect() does.
            wantsConnection = false
            backgroundDeadline = nil
        }
        return reconcile(now: now)
    }

    // MARK: Inputs from the transport

    /// The server's hello arrived on transport `generation`.
    mutating func transportOpened(generation: Int, now: Duration) -> [Action] {
        guard case .connecting(let current, _) = phase, current == generation else { return [] }
        phase = .connected(
            generation: generation, since: now, nextPingAt: now + configuration.heartbeatInterval, pendingPing: nil
        )
        tokenUnproven = false
        refreshFailures = 0
        return setStatus(.connected)
    }

    /// A frame (pong included) arrived on transport `generation`: the connection is alive.
    mutating func frameReceived(generation: Int, now: Duration) -> [Action] {
        guard case .connected(let current, let since, _, _) = phase, current == generation else { return [] }
        phase = .connected(
            generation: generation, since: since, nextPingAt: now + configuration.heartbeatInterval, pendingPing: nil
        )
        return []
    }

    /// Transport `generation` ended: it failed to open, or closed (with the server's close code, if any).
    mutating func transportEnded(generation: Int, closeCode: UInt16?, error: ParleyError, now: Duration) -> [Action] {
        let connectedSince: Duration?
        switch phase {
        case .connecting(let current, _) where current == generation:
            connectedSince = nil
        case .connected(let current, let since, _, _) where current == generation:
            connectedSince = since
        default:
            return []
        }
        if closeCode == WebSocketCloseCode.authenticationFailed {
            if hasTokenProvider, isLoggedIn, error.code == .authTokenInvalid {
                return tokenRefused(now: now)
            }
            phase = .failed(error)
            backgroundDeadline = nil
            return setStatus(.failed(error))
        }
        return connectionLost(error: error, connectedSince: connectedSince, now: now)
    }

    // MARK: Time

    /// Does what is due at `now`: heartbeat pings, pong and connect timeouts, reconnection, background expiry.
    mutating func tick(now: Duration) -> [Action] {
        var actions: [Action] = []
        if let refresh = tokenRefresh, now >= refresh.deadline {
            tokenRefresh = nil
            actions += refreshFailed(
                ParleyError(.timeout, "The token provider did not answer within \(configuration.tokenRefreshTimeout)."),
                now: now
            )
        } else if let refreshAt, refreshDue, now >= refreshAt {
            if case .awaitingToken = phase { actions += setStatus(.connecting) }
            actions += requestToken(now: now)
        }
        if let deadline = backgroundDeadline, now >= deadline {
            // Manual mode: the app stayed in the background without ping() for the grace period.
            backgroundDeadline = nil
            wantsConnection = false
            actions += reconcile(now: now)
        }
        switch phase {
        case .connecting(let generation, let deadline) where now >= deadline:
            actions.append(.closeTransport(generation: generation, code: WebSocketCloseCode.normal))
            actions += connectionLost(
                error: ParleyError(.timeout, "The server did not complete the connection in time."),
                connectedSince: nil, now: now
            )
        case .connected(let generation, let since, let nextPingAt, let pendingPing):
            if let pendingPing, now >= pendingPing.deadline {
                if now - pendingPing.deadline > configuration.lateTimerTolerance {
                    // The deadline passed while the device slept: the silence says nothing about the server.
                    // Probe again with a fresh deadline rather than killing a connection that may be fine.
                    actions += ping(generation: generation, since: since, now: now)
                } else {
                    actions.append(.closeTransport(generation: generation, code: WebSocketCloseCode.goingAway))
                    actions += connectionLost(
                        error: ParleyError(.webSocketError, "The server stopped answering pings."),
                        connectedSince: since, now: now
                    )
                }
            } else if pendingPing == nil, now >= nextPingAt {
                actions += ping(generation: generation, since: since, now: now)
            }
        case .backingOff(let until, let attempt) where now >= until:
            actions += open(now: now, attempt: attempt)
        case .idle, .connecting, .backingOff, .waitingForNetwork, .failed, .awaitingToken:
            break
        }
        return actions
    }

    // MARK: Tokens

    /// Whether the app gave a token provider (``ParleyClient/setTokenProvider(_:)``). Taken away while a connection
    /// waits for a token, the refused token stands: the connection stops as it does without a provider.
    @discardableResult
    mutating func tokenProviderChanged(present: Bool) -> [Action] {
        hasTokenProvider = present
        guard !present, case .awaitingToken = phase else { return [] }
        let error = ParleyError(.authTokenInvalid, "The token was refused and no token provider is left to renew it.")
        let ended = tokenRefresh != nil
        tokenRefresh = nil
        refreshAt = nil
        phase = .failed(error)
        backgroundDeadline = nil
        return (ended ? [.refreshEnded(succeeded: false)] : []) + setStatus(.failed(error))
    }

    /// The server's hello on transport `generation`: its token expires in `remaining`, or never (nil).
    mutating func tokenExpires(in remaining: Duration?, generation: Int, now: Duration) -> [Action] {
        guard case .connecting(let current, _) = phase, current == generation else { return [] }
        guard let remaining else {
            refreshAt = nil
            return []
        }
        let lead = min(configuration.tokenRefreshLead, remaining / 2)
        refreshAt = now + max(remaining - lead, .zero)
        return []
    }

    /// A request over HTTP was refused with `ERR_AUTH_TOKEN_INVALID`: with a provider, a fresh token is asked for
    /// (unless one already is). The socket stays as it is; the server closes it if the token is no longer good.
    mutating func tokenRejected(now: Duration) -> [Action] {
        guard hasTokenProvider, isLoggedIn, tokenRefresh == nil else { return [] }
        if case .failed = phase { return [] }
        return requestToken(now: now)
    }

    /// The provider's token for request `id` is the session's token now.
    mutating func tokenRefreshed(id: Int, now: Duration) -> [Action] {
        guard tokenRefresh?.id == id else { return [] }
        tokenRefresh = nil
        refreshAt = nil
        tokenUnproven = true
        var actions: [Action] = [.refreshEnded(succeeded: true)]
        switch phase {
        case .connecting(let generation, _), .connected(let generation, _, _, _):
            // The open connection was authenticated with the old token, which the server will end: replace it now
            // (the replay from the client's positions fills the moment between the two).
            actions.append(.closeTransport(generation: generation, code: WebSocketCloseCode.normal))
            phase = .idle
            actions += reconcile(now: now)
        case .awaitingToken:
            phase = .idle
            actions += reconcile(now: now)
        case .idle, .backingOff, .waitingForNetwork, .failed:
            break
        }
        return actions
    }

    /// The provider failed for request `id` (it threw, or gave a token that is not the user's).
    mutating func tokenRefreshFailed(id: Int, error: ParleyError, now: Duration) -> [Action] {
        guard tokenRefresh?.id == id else { return [] }
        tokenRefresh = nil
        return refreshFailed(error, now: now)
    }

    /// Whether a due `refreshAt` asks for a token now: while connected (before the token expires) or while waiting
    /// for one, and no request is under way.
    private var refreshDue: Bool {
        guard hasTokenProvider, isLoggedIn, tokenRefresh == nil else { return false }
        switch phase {
        case .connected, .awaitingToken: return true
        case .idle, .connecting, .backingOff, .waitingForNetwork, .failed: return false
        }
    }

    private mutating func requestToken(now: Duration) -> [Action] {
        nextRefreshID += 1
        tokenRefresh = TokenRefresh(id: nextRefreshID, deadline: now + configuration.tokenRefreshTimeout)
        return [.requestToken(id: nextRefreshID)]
    }

    /// The server refused the token (close 4001) and there is a provider: wait for a fresh one.
    private mutating func tokenRefused(now: Duration) -> [Action] {
        phase = .awaitingToken
        if tokenUnproven {
            // The provider's last token was refused at once: that refresh failed.
            tokenUnproven = false
            return refreshFailed(ParleyError(.authTokenInvalid, "The server refused the refreshed token."), now: now)
        }
        refreshAt = nil
        return setStatus(.connecting) + (tokenRefresh == nil ? requestToken(now: now) : [])
    }

    /// Counts a failed refresh: asks again after a backoff, or stops once `maximumTokenRefreshFailures` failed in a
    /// row while no connection is up (a connection whose token is still good is left to run until the server ends
    /// it).
    private mutating func refreshFailed(_ error: ParleyError, now: Duration) -> [Action] {
        refreshFailures += 1
        let failure = ParleyError(
            .tokenRefreshFailed, "A fresh auth token could not be had (\(refreshFailures) failure(s) in a row).",
            status: error.status, underlying: "\(error.code): \(error.message)"
        )
        var actions: [Action] = [.refreshEnded(succeeded: false)]
        if refreshFailures >= configuration.maximumTokenRefreshFailures, !isConnected {
            refreshAt = nil
            if case .connecting(let generation, _) = phase {
                actions.append(.closeTransport(generation: generation, code: WebSocketCloseCode.normal))
            }
            phase = .failed(failure)
            backgroundDeadline = nil
            return actions + setStatus(.failed(failure))
        }
        let delay = backoffDelay(attempt: refreshFailures)
        refreshAt = now + delay
        if case .awaitingToken = phase {
            actions += setStatus(.reconnecting(attempt: refreshFailures, delay: delay, error: failure))
        }
        return actions
    }

    /// A new session: nothing of the last one's refreshes counts.
    private mutating func forgetRefresh() -> [Action] {
        let ended = tokenRefresh != nil
        tokenRefresh = nil
        refreshAt = nil
        refreshFailures = 0
        tokenUnproven = false
        if case .awaitingToken = phase { phase = .idle }
        return ended ? [.refreshEnded(succeeded: false)] : []
    }

    // MARK: Rules

    /// Whether the rules want a connection now.
    var shouldBeConnected: Bool {
        guard isLoggedIn, wantsConnection, networkAvailable else { return false }
        if configuration.autoConnect { return appState == .foreground }
        return appState == .foreground || backgroundDeadline != nil
    }

    /// Opens or closes to match the rules.
    private mutating func reconcile(now: Duration) -> [Action] {
        if shouldBeConnected {
            switch phase {
            case .idle, .waitingForNetwork: return open(now: now, attempt: failedAttempts + 1)
            case .connecting, .connected, .backingOff, .failed, .awaitingToken: return []
            }
        }
        var actions: [Action] = []
        switch phase {
        case .connecting(let generation, _), .connected(let generation, _, _, _):
            actions.append(.closeTransport(generation: generation, code: WebSocketCloseCode.normal))
        case .idle, .backingOff, .waitingForNetwork, .awaitingToken:
            break
        case .failed:
            return []
        }
        if isLoggedIn && wantsConnection && !networkAvailable {
            phase = .waitingForNetwork
            return actions + setStatus(.waitingForNetwork)
        }
        phase = .idle
        return actions + setStatus(.disconnected)
    }

    /// Attempts at once after a reason to believe the server is reachable again (foreground, network back).
    private mutating func retryNow(now: Duration) -> [Action] {
        failedAttempts = 0
        if case .backingOff = phase { phase = .idle }
        return reconcile(now: now)
    }

    private mutating func open(now: Duration, attempt: Int) -> [Action] {
        if hasTokenProvider, let refreshAt, now >= refreshAt {
            // The token is about to expire (the app was away when the refresh was due): a fresh one first.
            phase = .awaitingToken
            return setStatus(.connecting) + (tokenRefresh == nil ? requestToken(now: now) : [])
        }
        generation += 1
        phase = .connecting(generation: generation, deadline: now + configuration.connectTimeout)
        return [.openTransport(generation: generation)] + setStatus(.connecting)
    }

    private mutating func connectionLost(error: ParleyError, connectedSince: Duration?, now: Duration) -> [Action] {
        if let connectedSince, now - connectedSince >= configuration.stableConnection { failedAttempts = 0 }
        if !configuration.autoConnect && appState == .background {
            // Manual mode does not re-establish a socket lost in the background: only connect() does.
            wantsConnection = false
            backgroundDeadline = nil
        }
        phase = .idle
        guard shouldBeConnected else { return reconcile(now: now) }
        failedAttempts += 1
        let delay = backoffDelay(attempt: failedAttempts)
        phase = .backingOff(until: now + delay, attempt: failedAttempts + 1)
        return setStatus(.reconnecting(attempt: failedAttempts, delay: delay, error: error))
    }

    private mutating func ping(generation: Int, since: Duration, now: Duration) -> [Action] {
        let id = takePingID()
        phase = .connected(
            generation: generation, since: since, nextPingAt: now + configuration.heartbeatInterval,
            pendingPing: PendingPing(id: id, deadline: now + configuration.pongTimeout)
        )
        return [.sendPing(generation: generation, id: id)]
    }

    /// Full jitter: uniform in `0...min(maximum, initial * 2^(attempt-1))`.
    mutating func backoffDelay(attempt: Int) -> Duration {
        let ceiling = Self.backoffCeiling(attempt: attempt, configuration: configuration)
        return ceiling * random.nextUnitInterval()
    }

    static func backoffCeiling(attempt: Int, configuration: Configuration) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let uncapped = configuration.initialBackoff * Double(1 << exponent)
        return min(uncapped, configuration.maximumBackoff)
    }

    private mutating func takePingID() -> Int {
        nextPingID += 1
        return nextPingID
    }

    private mutating func setStatus(_ new: ConnectionStatus) -> [Action] {
        guard new != status else { return [] }
        status = new
        return [.report(new)]
    }
}

/// A small deterministic random generator (SplitMix64), so that the state machine stays pure and its tests
/// reproducible.
struct SplitMix64: RandomNumberGenerator, Sendable, Hashable {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `0..<1`.
    mutating func nextUnitInterval() -> Double {
        Double(next() >> 11) / Double(1 << 53)
    }
}
