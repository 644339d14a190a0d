import Foundation
import Logging

/// Where the driver finds the socket's URL and token: the logged-in session.
struct SocketEndpoint: Sendable {
    var url: String
    var authToken: String
}

/// Runs the ``ConnectionStateMachine``: feeds it inputs, performs its actions (open and close transports, send
/// pings, report status), and sleeps until its next deadline on the injected clock.
actor ConnectionDriver {
    private var machine: ConnectionStateMachine
    private let clock: Timeline
    private let transport: any WebSocketTransport
    private let endpoint: @Sendable () -> SocketEndpoint?
    private let onStatus: @Sendable (ConnectionStatus) -> Void
    private let onFrame: @Sendable (ServerFrame) -> Void
    private let logger: Logger
    /// The first frame of every connection, made when the connection opens (it carries the resume positions).
    private let connectFrame: @Sendable () -> ConnectFrame
    /// Asks the app's token provider for a fresh token and makes it the session's; throws when it cannot.
    private let refreshToken: @Sendable () async throws -> Void

    private var connection: (generation: Int, transport: any TransportConnection)?
    private var timer: (deadline: Duration, task: Task<Void, Never>)?
    private var connectWaiters: [CheckedContinuation<Void, any Error>] = []
    private var pingWaiters: [CheckedContinuation<Void, any Error>] = []
    /// Requests refused for the old token, waiting for the refresh under way: resumed with whether it succeeded.
    private var refreshWaiters: [CheckedContinuation<Bool, Never>] = []

    init(
        configuration: ConnectionStateMachine.Configuration, seed: UInt64, clock: Timeline,
        transport: any WebSocketTransport, endpoint: @escaping @Sendable () -> SocketEndpoint?,
        connectFrame: @escaping @Sendable () -> ConnectFrame = { ConnectFrame() }, hasTokenProvider: Bool = false,
        refreshToken: @escaping @Sendable () async throws -> Void = {
            throw ParleyError(.tokenRefreshFailed, "No token provider.")
        },
        logger: Logger,
        onStatus: @escaping @Sendable (ConnectionStatus) -> Void, onFrame: @escaping @Sendable (ServerFrame) -> Void
    ) {
        self.connectFrame = connectFrame
        self.refreshToken = refreshToken
        self.machine = ConnectionStateMachine(configuration: configuration, seed: seed)
        self.machine.tokenProviderChanged(present: hasTokenProvider)
        self.clock = clock
        self.transport = transport
        self.endpoint = endpoint
        self.logger = logger
        self.onStatus = onStatus
        self.onFrame = onFrame
    }

    var status: ConnectionStatus { machine.status }

    // MARK: Inputs

    func loggedIn() { perform(machine.loggedIn(now: clock.now())) }

    func loggedOut() { perform(machine.loggedOut(now: clock.now())) }

    /// Connects, returning once connected; throws the error of the first failed attempt.
    func connect() async throws {
        switch machine.connectRequested(now: clock.now()) {
        case .failure(let error):
            throw error
        case .success(let actions):
            perform(actions)
            switch machine.phase {
            case .connected:
                return
            case .connecting, .awaitingToken:
                try await withCheckedThrowingContinuation { continuation in connectWaiters.append(continuation) }
            case .waitingForNetwork:
                throw ParleyError(.noInternet, "The device is offline; the socket connects when the network returns.")
            case .idle, .backingOff:
                throw ParleyError(.notConnected, "The app is in the background; auto mode connects in the foreground.")
            case .failed(let error):
                throw error
            }
        }
    }

    func disconnect() { perform(machine.disconnectRequested(now: clock.now())) }

    /// Pings the server; returns when it answers.
    func ping() async throws {
        switch machine.pingRequested(now: clock.now()) {
        case .failure(let error):
            throw error
        case .success(let actions):
            try await withCheckedThrowingContinuation { continuation in
                pingWaiters.append(continuation)
                perform(actions)
            }
        }
    }

    func appEnteredBackground() { perform(machine.appEnteredBackground(now: clock.now())) }

    func appEnteredForeground() { perform(machine.appEnteredForeground(now: clock.now())) }

    func networkChanged(available: Bool) { perform(machine.networkChanged(available: available, now: clock.now())) }

    /// The app gave (or took back) its token provider.
    func tokenProviderChanged(present: Bool) { perform(machine.tokenProviderChanged(present: present)) }

    /// A request over HTTP was refused with `ERR_AUTH_TOKEN_INVALID` for `rejected`: returns true when the session
    /// has a fresh token to try again with (refreshed since, or by the refresh this starts or joins), false without.
    func tokenRejected(_ rejected: String) async -> Bool {
        if let current = endpoint()?.authToken, current != rejected { return true }
        perform(machine.tokenRejected(now: clock.now()))
        guard machine.tokenRefresh != nil else { return false }
        return await withCheckedContinuation { continuation in refreshWaiters.append(continuation) }
    }

    /// Sends a frame on the open connection; false when there is none.
    func send(_ frame: ClientFrame) -> Bool {
        guard machine.isConnected, let connection, let text = try? Self.encode(frame) else { return false }
        connection.transport.send(text)
        return true
    }

    // MARK: Transport events

    private func received(_ event: TransportEvent, generation: Int) {
        guard connection?.generation == generation else { return }
        let now = clock.now()
        switch event {
        case .opened:
            if let text = try? Self.encode(.connect(connectFrame())) { connection?.transport.send(text) }
        case .text(let text):
            let frame: ServerFrame
            do {
                frame = try JSONDecoder().decode(ServerFrame.self, from: Data(text.utf8))
            } catch {
                logger.warning("Ignoring a frame this SDK cannot read", metadata: ["error": "\(error)"])
                perform(machine.frameReceived(generation: generation, now: now))
                return
            }
            switch frame {
            case .hello(let hello):
                let remaining = hello.tokenExpiresAt.map { Duration.milliseconds($0 - hello.serverTime) }
                perform(machine.tokenExpires(in: remaining, generation: generation, now: now))
                onFrame(frame)
            case .caughtUp:
                // Connected means live: what was missed has been replayed.
                onFrame(frame)
                perform(machine.transportOpened(generation: generation, now: now))
            case .pong:
                perform(machine.frameReceived(generation: generation, now: now))
                resumePingWaiters(with: .success(()))
            case .event, .ack, .error, .resync:
                perform(machine.frameReceived(generation: generation, now: now))
                onFrame(frame)
            }
        case .closed(let code, let reason):
            connection = nil
            let error: ParleyError
            if let reason, !reason.isEmpty {
                error = ParleyError(
                    ErrorCode(reason), "The server closed the connection: \(reason).", status: code.map(Int.init))
            } else {
                error = ParleyError(.webSocketError, "The connection closed.", status: code.map(Int.init))
            }
            perform(machine.transportEnded(generation: generation, closeCode: code, error: error, now: now))
        case .failed(let error):
            connection = nil
            perform(machine.transportEnded(generation: generation, closeCode: nil, error: error, now: now))
        }
    }

    private func tick() {
        timer = nil
        perform(machine.tick(now: clock.now()))
    }

    private func tokenArrived(id: Int) {
        logger.info("The auth token was refreshed.")
        perform(machine.tokenRefreshed(id: id, now: clock.now()))
    }

    private func tokenFailed(id: Int, error: ParleyError) {
        logger.warning("The token provider failed: \(error)")
        perform(machine.tokenRefreshFailed(id: id, error: error, now: clock.now()))
    }

    // MARK: Actions

    private func perform(_ actions: [ConnectionStateMachine.Action]) {
        for action in actions {
            switch action {
            case .openTransport(let generation):
                open(generation: generation)
            case .closeTransport(let generation, let code):
                if let connection, connection.generation == generation {
                    connection.transport.close(code: code)
                    self.connection = nil
                }
            case .sendPing(let generation, let id):
                if let connection, connection.generation == generation,
                    let text = try? Self.encode(.ping(PingFrame(id: String(id))))
                {
                    connection.transport.send(text)
                }
            case .requestToken(let id):
                let refreshToken = self.refreshToken
                Task { [weak self] in
                    do {
                        try await refreshToken()
                        await self?.tokenArrived(id: id)
                    } catch {
                        await self?.tokenFailed(id: id, error: RESTClient.parleyError(error))
                    }
                }
            case .refreshEnded(let succeeded):
                let waiters = refreshWaiters
                refreshWaiters = []
                for waiter in waiters { waiter.resume(returning: succeeded) }
            case .report(let status):
                logger.debug("Connection status: \(status)")
                settleWaiters(for: status)
                onStatus(status)
            }
        }
        scheduleTimer()
    }

    private func open(generation: Int) {
        guard let endpoint = endpoint() else {
            perform(
                machine.transportEnded(
                    generation: generation, closeCode: nil,
                    error: ParleyError(.notLoggedIn, "No session to connect with."),
                    now: clock.now()
                )
            )
            return
        }
        let opened = transport.open(url: endpoint.url, authToken: endpoint.authToken)
        connection = (generation, opened)
        Task { [weak self] in
            for await event in opened.events {
                guard let self else { return }
                await self.received(event, generation: generation)
            }
        }
    }

    private func scheduleTimer() {
        let deadline = machine.nextDeadline
        guard deadline != timer?.deadline else { return }
        timer?.task.cancel()
        timer = nil
        guard let deadline else { return }
        let clock = self.clock
        let task = Task { [weak self] in
            do {
                try await clock.sleepUntil(deadline)
            } catch {
                return  // cancelled: a newer deadline replaced this one
            }
            await self?.tick()
        }
        timer = (deadline, task)
    }

    private func settleWaiters(for status: ConnectionStatus) {
        switch status {
        case .connected:
            resumeConnectWaiters(with: .success(()))
        case .connecting:
            break
        case .reconnecting(_, _, let error), .failed(let error):
            resumeConnectWaiters(with: .failure(error))
            resumePingWaiters(with: .failure(error))
        case .disconnected:
            let error = ParleyError(.notConnected, "The socket was disconnected.")
            resumeConnectWaiters(with: .failure(error))
            resumePingWaiters(with: .failure(error))
        case .waitingForNetwork:
            let error = ParleyError(.noInternet, "The device is offline.")
            resumeConnectWaiters(with: .failure(error))
            resumePingWaiters(with: .failure(error))
        }
    }

    private func resumeConnectWaiters(with result: Result<Void, any Error>) {
        let waiters = connectWaiters
        connectWaiters = []
        for waiter in waiters { waiter.resume(with: result) }
    }

    private func resumePingWaiters(with result: Result<Void, any Error>) {
        let waiters = pingWaiters
        pingWaiters = []
        for waiter in waiters { waiter.resume(with: result) }
    }

    private static func encode(_ frame: ClientFrame) throws -> String {
        String(decoding: try WireCoding.encode(frame), as: UTF8.self)
    }

    /// Drops the current connection as if it had been lost; the rules reconnect it (and the server replays
    /// from the client's positions).
    func dropConnection(because error: ParleyError) {
        guard let connection else { return }
        connection.transport.close(code: WebSocketCloseCode.normal)
        self.connection = nil
        perform(
            machine.transportEnded(generation: connection.generation, closeCode: nil, error: error, now: clock.now())
        )
    }

    /// Stops timers and closes the connection (the client is going away).
    func shutdown() {
        timer?.task.cancel()
        timer = nil
        connection?.transport.close(code: WebSocketCloseCode.normal)
        connection = nil
        let error = ParleyError(.notConnected, "The client shut down.")
        resumeConnectWaiters(with: .failure(error))
        resumePingWaiters(with: .failure(error))
        let waiters = refreshWaiters
        refreshWaiters = []
        for waiter in waiters { waiter.resume(returning: false) }
    }
}
