/// The decisions of a ``NATSConnection``: connect, handshake, keep alive, reconnect, shut down.
///
/// Pure: no I/O, no clock. Time arrives with every input as the `Duration` since the driver started, deadlines are
/// returned through ``nextDeadline``, and the random fraction of the back-off's full jitter comes from an injected
/// ``NATSJitter``. Each input returns one ``Action`` that the driver carries out.
///
/// Rules:
/// - Servers are tried in turn: the configured ones, then those learned from INFO `connect_urls`.
/// - A *round* tries each known server once. After a lost connection the round starts with the server after the
///   one that was lost and ends with it (the server that just failed is tried last); when it is the only server,
///   the round starts after a back-off.
/// - A failed round waits `random(0...min(maximum, minimum * 2^n))` (full jitter, `n` failed rounds in a row)
///   before the next one; `n` resets when a connection is established.
/// - A round in which every server refused the credentials ends the connection with `authorizationViolation`.
/// - After the first attempt, at most `maxReconnectAttempts` attempts may fail in a row (reset on success).
/// - When a PING is due and `maxPingsOutstanding` are unanswered, the connection is stale: it is dropped.
/// - INFO with `ldm` (lame duck mode) drops the connection to move to another server.
struct NATSConnectionStateMachine {
    /// The state, with the data each state needs.
    enum State: Equatable {
        /// Not started.
        case idle
        /// TCP connect in flight.
        case connecting(Attempt)
        /// TCP connected, waiting for the server's INFO.
        case awaitingInfo(Attempt)
        /// CONNECT and PING sent, waiting for the PONG that establishes the connection.
        case awaitingPong(Attempt)
        /// Established.
        case connected(Connected)
        /// Backing off until a new round of attempts.
        case waiting(until: Duration)
        /// Shutting down: waiting for the PONG of the final PING (everything buffered was processed).
        case draining(deadline: Duration)
        /// Done; no more actions.
        case finished
    }

    /// One connection attempt.
    struct Attempt: Equatable {
        /// The server tried.
        var server: NATSServerAddress
        /// When the handshake must be complete.
        var deadline: Duration
    }

    /// An established connection.
    struct Connected: Equatable {
        /// The server connected to.
        var server: NATSServerAddress
        /// Keep-alive PINGs sent and not yet answered.
        var pingsOutstanding: Int
        /// When the next keep-alive PING is due.
        var nextPingAt: Duration
    }

    /// What follows a failed attempt or a lost connection.
    enum NextStep: Equatable {
        /// Open a transport to this server now.
        case connect(NATSServerAddress)
        /// Wait until this time (``nextDeadline``), then the timer input starts the next attempt.
        case wait(until: Duration)
        /// Give up: `run()` throws this error.
        case fail(NATSError)
    }

    /// Drop the current transport (close it, forget its buffered control operations), report, and go on.
    struct Disconnect: Equatable {
        /// Why, for logs and the `.disconnected` event.
        var reason: String
        /// Whether the transport was an established connection (the driver emits `.disconnected`).
        var wasConnected: Bool
        /// Events to report before `.disconnected`.
        var report: [NATSConnectionEvent]
        /// What to do next.
        var next: NextStep
    }

    /// What the driver must do.
    enum Action: Equatable {
        /// Nothing.
        case none
        /// Open a TCP connection to the server.
        case openTransport(NATSServerAddress)
        /// Send CONNECT (credentials from the address) and PING on the new transport.
        case sendConnect(NATSServerAddress)
        /// The connection is established: send every subscription, then the buffered publishes, and report
        /// `.connected` (or `.reconnected`) and `.serversDiscovered` when `discovered` is not empty.
        case established(NATSServerAddress, isReconnect: Bool, discovered: [NATSServerAddress])
        /// Send a keep-alive PING.
        case sendPing
        /// Report events.
        case report([NATSConnectionEvent])
        /// Drop the transport and go on.
        case disconnect(Disconnect)
        /// Send a final PING after everything buffered; its PONG is ``drainCompleted(now:)``.
        case drain
        /// Stop: close the transport, finish inboxes and events; `run()` returns, or throws the error.
        case finish(NATSError?)
    }

    /// The configuration.
    let configuration: NATSConfiguration
    /// The current state.
    private(set) var state: State = .idle
    /// Servers learned from INFO `connect_urls`, not among the configured ones.
    private(set) var discovered: [NATSServerAddress] = []
    private var jitter: NATSJitter
    private var round: [NATSServerAddress] = []
    private var roundAttempts = 0
    private var roundAuthRefusals = 0
    private var failedRounds = 0
    private var reconnectAttempts = 0
    private var firstAttemptIsFree = true
    private var hasConnected = false
    private var lastTried: NATSServerAddress?
    private var discoveredDuringHandshake: [NATSServerAddress] = []
    private var lastFailure = ""

    /// Creates a machine.
    /// - Parameters:
    ///   - configuration: The configuration.
    ///   - jitter: The random source of the back-off.
    init(configuration: NATSConfiguration, jitter: NATSJitter) {
        self.configuration = configuration
        self.jitter = jitter
    }

    /// Every known server: configured, then discovered.
    var servers: [NATSServerAddress] {
        self.configuration.servers + self.discovered
    }

    /// When ``timerFired(now:)`` must be called next, if ever.
    var nextDeadline: Duration? {
        switch self.state {
        case .connecting(let attempt), .awaitingInfo(let attempt), .awaitingPong(let attempt):
            attempt.deadline
        case .connected(let connected):
            connected.nextPingAt
        case .waiting(let until):
            until
        case .draining(let deadline):
            deadline
        case .idle, .finished:
            nil
        }
    }

    /// Whether a connection is established.
    var isConnected: Bool {
        if case .connected = self.state { return true }
        return false
    }

    // MARK: - Inputs

    /// `run()` started.
    mutating func start(now: Duration) -> Action {
        guard case .idle = self.state else { return .none }
        guard !self.configuration.servers.isEmpty else {
            self.state = .finished
            return .finish(NATSError(.invalidURL, "no servers configured"))
        }
        self.round = self.servers
        return self.action(for: self.startAttempt(now: now))
    }

    /// The TCP connection of the current attempt is open.
    mutating func transportConnected(now: Duration) -> Action {
        switch self.state {
        case .connecting(let attempt):
            self.state = .awaitingInfo(attempt)
            return .none
        case .idle, .awaitingInfo, .awaitingPong, .connected, .waiting, .draining, .finished:
            return .none
        }
    }

    /// The TCP connection of the current attempt could not be opened.
    mutating func transportFailed(reason: String, now: Duration) -> Action {
        switch self.state {
        case .connecting(let attempt):
            return self.attemptFailed(attempt, reason: reason, authRefused: false, report: [], now: now)
        case .idle, .awaitingInfo, .awaitingPong, .connected, .waiting, .draining, .finished:
            return .none
        }
    }

    /// The server sent INFO.
    mutating func infoReceived(_ info: NATSServerInfo, now: Duration) -> Action {
        switch self.state {
        case .connecting(let attempt), .awaitingInfo(let attempt):
            if info.tlsRequired {
                return self.attemptFailed(
                    attempt, reason: "server requires TLS, which this client does not support yet",
                    authRefused: false, report: [], now: now)
            }
            self.discoveredDuringHandshake = self.absorb(info, from: attempt.server)
            self.state = .awaitingPong(attempt)
            return .sendConnect(attempt.server)
        case .awaitingPong(let attempt):
            self.discoveredDuringHandshake += self.absorb(info, from: attempt.server)
            return .none
        case .connected(let connected):
            let new = self.absorb(info, from: connected.server)
            let discoveredReport: [NATSConnectionEvent] = new.isEmpty ? [] : [.serversDiscovered(new)]
            if info.lameDuckMode {
                return self.connectionLost(
                    connected, reason: "server entered lame duck mode",
                    report: discoveredReport + [.lameDuckMode], now: now)
            }
            return discoveredReport.isEmpty ? .none : .report(discoveredReport)
        case .idle, .waiting, .draining, .finished:
            return .none
        }
    }

    /// The server sent PONG.
    mutating func pongReceived(now: Duration) -> Action {
        switch self.state {
        case .awaitingPong(let attempt):
            let isReconnect = self.hasConnected
            self.hasConnected = true
            self.failedRounds = 0
            self.reconnectAttempts = 0
            self.firstAttemptIsFree = false
            self.roundAttempts = 0
            self.roundAuthRefusals = 0
            self.state = .connected(
                Connected(
                    server: attempt.server, pingsOutstanding: 0,
                    nextPingAt: now + self.configuration.pingInterval))
            let discovered = self.discoveredDuringHandshake
            self.discoveredDuringHandshake = []
            return .established(attempt.server, isReconnect: isReconnect, discovered: discovered)
        case .connected(var connected):
            connected.pingsOutstanding = 0
            self.state = .connected(connected)
            return .none
        case .idle, .connecting, .awaitingInfo, .waiting, .draining, .finished:
            return .none
        }
    }

    /// The server sent `-ERR`.
    mutating func serverErrorReceived(_ text: String, now: Duration) -> Action {
        switch self.state {
        case .connecting(let attempt), .awaitingInfo(let attempt), .awaitingPong(let attempt):
            return self.attemptFailed(
                attempt, reason: "server error: \(text)", authRefused: Self.isAuthorizationError(text),
                report: [.serverError(text)], now: now)
        case .connected(let connected):
            if Self.closesConnection(text) {
                return self.connectionLost(
                    connected, reason: "server error: \(text)", report: [.serverError(text)], now: now)
            }
            return .report([.serverError(text)])
        case .draining:
            return .report([.serverError(text)])
        case .idle, .waiting, .finished:
            return .none
        }
    }

    /// The bytes from the server are not valid protocol, or break a bound.
    mutating func protocolError(_ description: String, now: Duration) -> Action {
        switch self.state {
        case .connecting(let attempt), .awaitingInfo(let attempt), .awaitingPong(let attempt):
            return self.attemptFailed(
                attempt, reason: "protocol error: \(description)", authRefused: false, report: [], now: now)
        case .connected(let connected):
            return self.connectionLost(connected, reason: "protocol error: \(description)", report: [], now: now)
        case .draining:
            self.state = .finished
            return .finish(nil)
        case .idle, .waiting, .finished:
            return .none
        }
    }

    /// The transport closed (by the server, the network, or an error).
    mutating func transportClosed(now: Duration) -> Action {
        switch self.state {
        case .connecting(let attempt), .awaitingInfo(let attempt), .awaitingPong(let attempt):
            return self.attemptFailed(
                attempt, reason: "connection closed during the handshake", authRefused: false, report: [], now: now)
        case .connected(let connected):
            return self.connectionLost(connected, reason: "connection closed", report: [], now: now)
        case .draining:
            self.state = .finished
            return .finish(nil)
        case .idle, .waiting, .finished:
            return .none
        }
    }

    /// A deadline may have passed (the driver's timer woke up).
    mutating func timerFired(now: Duration) -> Action {
        switch self.state {
        case .connecting(let attempt), .awaitingInfo(let attempt), .awaitingPong(let attempt):
            guard now >= attempt.deadline else { return .none }
            return self.attemptFailed(
                attempt, reason: "connect timeout (\(self.configuration.connectTimeout))", authRefused: false,
                report: [], now: now)
        case .connected(var connected):
            guard now >= connected.nextPingAt else { return .none }
            if connected.pingsOutstanding >= self.configuration.maxPingsOutstanding {
                return self.connectionLost(
                    connected, reason: "stale connection: \(connected.pingsOutstanding) PINGs unanswered",
                    report: [], now: now)
            }
            connected.pingsOutstanding += 1
            connected.nextPingAt = now + self.configuration.pingInterval
            self.state = .connected(connected)
            return .sendPing
        case .waiting(let until):
            guard now >= until else { return .none }
            return self.action(for: self.startAttempt(now: now))
        case .draining(let deadline):
            guard now >= deadline else { return .none }
            self.state = .finished
            return .finish(nil)
        case .idle, .finished:
            return .none
        }
    }

    /// `run()` was cancelled: drain when connected, else stop.
    mutating func shutdownRequested(now: Duration) -> Action {
        switch self.state {
        case .connected:
            self.state = .draining(deadline: now + self.configuration.drainTimeout)
            return .drain
        case .finished:
            return .none
        case .idle, .connecting, .awaitingInfo, .awaitingPong, .waiting, .draining:
            self.state = .finished
            return .finish(nil)
        }
    }

    /// The final PING was answered: everything buffered was processed by the server.
    mutating func drainCompleted(now: Duration) -> Action {
        switch self.state {
        case .draining:
            self.state = .finished
            return .finish(nil)
        case .idle, .connecting, .awaitingInfo, .awaitingPong, .connected, .waiting, .finished:
            return .none
        }
    }

    // MARK: - Rules

    private func action(for next: NextStep) -> Action {
        switch next {
        case .connect(let server): .openTransport(server)
        case .wait: .none
        case .fail(let error): .finish(error)
        }
    }

    private mutating func attemptFailed(
        _ attempt: Attempt, reason: String, authRefused: Bool, report: [NATSConnectionEvent], now: Duration
    ) -> Action {
        if authRefused {
            self.roundAuthRefusals += 1
        }
        self.lastFailure = "\(attempt.server): \(reason)"
        self.discoveredDuringHandshake = []
        let next = self.startAttempt(now: now)
        return .disconnect(
            Disconnect(
                reason: reason, wasConnected: false,
                report: report + [.connectionAttemptFailed(attempt.server, reason: reason)], next: next))
    }

    private mutating func connectionLost(
        _ connected: Connected, reason: String, report: [NATSConnectionEvent], now: Duration
    ) -> Action {
        self.lastFailure = "\(connected.server): \(reason)"
        self.round = self.rotation(after: connected.server)
        self.roundAttempts = 0
        self.roundAuthRefusals = 0
        let next: NextStep
        if self.round.allSatisfy({ $0.isSameServer(as: connected.server) }) {
            // The only server is the one just lost: give it a moment.
            next = self.backOff(now: now)
        } else {
            next = self.startAttempt(now: now)
        }
        return .disconnect(Disconnect(reason: reason, wasConnected: true, report: report, next: next))
    }

    private mutating func startAttempt(now: Duration) -> NextStep {
        if self.round.isEmpty {
            return self.finishRound(now: now)
        }
        if self.firstAttemptIsFree {
            self.firstAttemptIsFree = false
        } else {
            self.reconnectAttempts += 1
            if let maximum = self.configuration.maxReconnectAttempts, self.reconnectAttempts > maximum {
                self.state = .finished
                return .fail(
                    NATSError(
                        .maxReconnectsExceeded,
                        "gave up after \(maximum) reconnect attempts; last failure: \(self.lastFailure)"))
            }
        }
        let server = self.round.removeFirst()
        self.lastTried = server
        self.roundAttempts += 1
        self.state = .connecting(Attempt(server: server, deadline: now + self.configuration.connectTimeout))
        return .connect(server)
    }

    private mutating func finishRound(now: Duration) -> NextStep {
        if self.roundAttempts > 0, self.roundAuthRefusals == self.roundAttempts {
            self.state = .finished
            return .fail(
                NATSError(
                    .authorizationViolation,
                    "authorization refused by every server (\(self.roundAttempts) tried); last: \(self.lastFailure)"
                ))
        }
        self.round = self.rotation(after: self.lastTried)
        self.roundAttempts = 0
        self.roundAuthRefusals = 0
        return self.backOff(now: now)
    }

    private mutating func backOff(now: Duration) -> NextStep {
        let wait = self.backOffCap(failedRounds: self.failedRounds).scaled(by: self.jitter.nextFraction())
        self.failedRounds += 1
        self.state = .waiting(until: now + wait)
        return .wait(until: now + wait)
    }

    /// `min(maximum, minimum * 2^failedRounds)`.
    func backOffCap(failedRounds: Int) -> Duration {
        let minimum = self.configuration.reconnectWaitMinimum
        let maximum = self.configuration.reconnectWaitMaximum
        var cap = minimum
        for _ in 0..<min(failedRounds, 62) {
            cap = cap * 2
            if cap >= maximum { return maximum }
        }
        return min(cap, maximum)
    }

    /// The known servers, starting after `server` and ending with it.
    private func rotation(after server: NATSServerAddress?) -> [NATSServerAddress] {
        let servers = self.servers
        guard let server, let index = servers.firstIndex(where: { $0.isSameServer(as: server) }) else {
            return servers
        }
        return Array(servers[(index + 1)...] + servers[...index])
    }

    /// Takes INFO `connect_urls` in; returns the servers not known before.
    private mutating func absorb(_ info: NATSServerInfo, from server: NATSServerAddress) -> [NATSServerAddress] {
        guard self.configuration.discoverServers, !info.connectURLs.isEmpty else { return [] }
        var latest: [NATSServerAddress] = []
        for candidate in info.discoveredServers(credentialsFrom: server)
        where !self.configuration.servers.contains(where: { $0.isSameServer(as: candidate) })
            && !latest.contains(where: { $0.isSameServer(as: candidate) })
        {
            latest.append(candidate)
        }
        let new = latest.filter { candidate in !self.discovered.contains { $0.isSameServer(as: candidate) } }
        self.discovered = latest
        return new
    }

    /// Whether `-ERR` refuses the credentials (not "Authentication Timeout": that is a slow client).
    static func isAuthorizationError(_ text: String) -> Bool {
        let lowered = text.lowercased()
        return lowered.contains("authorization violation")
            || (lowered.contains("authentication") && !lowered.contains("timeout"))
    }

    /// Whether the server closes the connection after this `-ERR` (all but permission and subject errors).
    static func closesConnection(_ text: String) -> Bool {
        let lowered = text.lowercased()
        return
            !(lowered.hasPrefix("permissions violation") || lowered.contains("invalid subject")
            || lowered.contains("invalid queue"))
    }
}
