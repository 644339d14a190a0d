import Foundation
import Logging
import NIOConcurrencyHelpers
import ParleyAPI
import ParleyAPIClient

/// The Parley SDK: one client per app, safe to use from any thread or task.
///
/// ```swift
/// let client = try await ParleyClient.initialize(appId: "1a2b3c4d5e6f7a8b", settings: settings)
/// let me = try await client.login(uid: "alice", authKey: authKey)   // saves the user, opens the socket
/// client.addEventListener("chat", ChatListener())
/// try await client.sendTextMessage("Hi Bob", to: .user("bob"))
/// ```
///
/// A client created later over the same `storageDirectory` restores the logged-in user and reconnects without a
/// new login.
public final class ParleyClient: Sendable {
    /// The App ID the client was initialized with.
    public let appId: String
    /// The settings the client was made with.
    public let settings: AppSettings

    let rest: RESTClient
    let sessionStore: SessionStore
    let state: NIOLockedValueBox<ClientState>
    let driver: ConnectionDriver
    let eventBroadcaster: Broadcaster<any ParleyEventListener, Event>
    /// The users the logged-in user blocked, as the server last said (read at login and at start) and as this client
    /// changed them since.
    let blockedUsers: NIOLockedValueBox<Set<String>>
    let statusBroadcaster: Broadcaster<any ConnectionListener, ConnectionStatus>
    let requests: PendingRequests
    let clock: Timeline
    let logger: Logger
    let pipeline: EventPipeline
    let outbox: Outbox
    /// The conversations and recent messages kept on the device.
    let offline: OfflineStore
    let outboxBroadcaster: Broadcaster<any OutboxListener, OutgoingMessage>
    let push: PushRegistrationStore
    let delegates: DelegateHub
    /// Holds background time while the outbox has work after the app leaves the foreground.
    let background: BackgroundTimeKeeper

    struct ClientState: Sendable {
        var session: StoredSession?
        var status: ConnectionStatus = .disconnected
        /// uid -> id of the direct conversation with that user.
        var directConversations: [String: String] = [:]
        /// Follows the app lifecycle and network sources.
        var environment: Task<Void, Never>?
        /// Follows the token given to the static ``ParleyClient/setDeviceToken(_:environment:)``.
        var deviceToken: Task<Void, Never>?
        /// When a `typing` frame last went out, per conversation (typing is throttled).
        var typingSentAt: [String: Duration] = [:]
        /// Delivers events in order and sends the outbox; runs from ``start()`` to ``shutdown()``.
        var workers: Task<Void, Never>?
        /// The open chat (at most one).
        var chat: ChatSession?
        /// The text for the next chat opened.
        var prefill: String?
        /// Where fresh auth tokens come from (``ParleyClient/setTokenProvider(_:)``).
        var tokenProvider: TokenProvider?
        /// Changes at every login, logout and sign-in zone change: a token refresh started for an earlier session
        /// does not save its token over a later one (or after a logout).
        var sessionEpoch = 0
    }

    /// Creates a client without contacting the server and without connecting: call ``start()`` next. Most apps
    /// use ``initialize(appId:settings:)``, which does both. Reads the saved session, if any.
    ///
    /// - Parameters:
    ///   - appId: The app's App ID.
    ///   - settings: The server and how to talk to it.
    ///   - clock: The clock of every timing rule (heartbeat, backoff, background grace, request timeouts).
    ///     Tests pass a virtual clock.
    public convenience init(
        appId: String, settings: AppSettings, clock: any Clock<Duration> = ContinuousClock()
    ) throws {
        try self.init(
            appId: appId, settings: settings, clock: Timeline(clock),
            transport: settings.webSocketTransport ?? AppSettings.defaultWebSocketTransport,
            seed: UInt64.random(in: .min ... .max)
        )
    }

    init(appId: String, settings: AppSettings, clock: Timeline, transport: any WebSocketTransport, seed: UInt64)
        throws
    {
        guard !appId.isEmpty else { throw ParleyError(.invalidAppID, "The App ID is empty.") }
        guard let webSocketURL = Self.webSocketURL(for: settings.serverURL) else {
            throw ParleyError(.invalidArgument, "The server URL must be http:// or https://.")
        }
        let delegates = DelegateHub(queue: settings.callbackQueue)
        // The SDK's log goes where the app's logging system sends it, and to the delegate at the level it chose.
        let baseHandler = Logger(label: "parley.sdk").handler
        let logger = Logger(label: "parley.sdk") { _ in
            DelegateLogHandler(hub: delegates, base: baseHandler)
        }
        self.delegates = delegates
        self.background = BackgroundTimeKeeper(source: settings.backgroundTime)
        self.push = PushRegistrationStore(directory: settings.storageDirectory, appId: appId)
        let state = NIOLockedValueBox(ClientState(tokenProvider: settings.tokenProvider))
        let events = Broadcaster<any ParleyEventListener, Event>(queue: settings.callbackQueue) { $0.dispatch($1) }
        let statuses = Broadcaster<any ConnectionListener, ConnectionStatus>(queue: settings.callbackQueue) {
            $0.dispatch($1)
        }
        let requests = PendingRequests()
        let blocked = NIOLockedValueBox<Set<String>>([])
        self.blockedUsers = blocked
        let outboxUpdates = Broadcaster<any OutboxListener, OutgoingMessage>(queue: settings.callbackQueue) {
            $0.onMessageStateChanged($1)
        }
        let outbox = Outbox(directory: settings.storageDirectory, appId: appId) { outboxUpdates.publish($0) }
        let offline = OfflineStore(
            directory: settings.storageDirectory, appId: appId, limit: settings.offlineMessageLimit, logger: logger
        )
        self.offline = offline
        self.outboxBroadcaster = outboxUpdates
        self.outbox = outbox
        self.appId = appId
        self.settings = settings
        self.logger = logger
        self.state = state
        self.eventBroadcaster = events
        self.statusBroadcaster = statuses
        self.requests = requests
        self.clock = clock
        self.sessionStore = SessionStore(
            directory: settings.storageDirectory, appId: appId,
            credentials: settings.credentialStore ?? AppSettings.defaultCredentialStore(settings.storageDirectory)
        )
        // The driver, the pipeline and the REST client refer to each other: the pipeline reconnects after a failed
        // backfill, a request refused for its token waits for the driver's refresh.
        let driverBox = NIOLockedValueBox<ConnectionDriver?>(nil)
        self.rest = RESTClient(
            serverURL: settings.serverURL, credentials: { (state.withLockedValue { $0.session?.authToken }, nil) },
            tokenRejected: { token in await driverBox.withLockedValue { $0 }?.tokenRejected(token) ?? false }
        )
        let rest = self.rest
        let pipeline = EventPipeline(
            appId: appId, store: CursorStore(directory: settings.storageDirectory, appId: appId),
            backfill: { conversationId, after, through in
                try await Self.fetchEvents(rest: rest, conversationId: conversationId, after: after, through: through)
            },
            publish: { event in
                if settings.hidesBlockedUsersMessages, Self.isWriting(event), let actor = event.context.createdBy,
                    blocked.withLockedValue({ $0.contains(actor) })
                {
                    return
                }
                // Stored before listeners hear of it: what they then read from the store includes it.
                offline.record(event)
                events.publish(event)
                delegates.observe(event)
            },
            reconnect: {
                await driverBox.withLockedValue { $0 }?.dropConnection(
                    because: ParleyError(.webSocketError, "Reconnecting to replay missed events.")
                )
            },
            logger: logger
        )
        self.pipeline = pipeline
        let tuning = settings.connectionTuning
        var machine = ConnectionStateMachine.Configuration()
        machine.autoConnect = settings.autoEstablishSocketConnection
        machine.heartbeatInterval = tuning.heartbeatInterval
        machine.pongTimeout = tuning.pongTimeout
        machine.connectTimeout = tuning.connectTimeout
        machine.backgroundGrace = tuning.backgroundGrace
        machine.initialBackoff = tuning.initialBackoff
        machine.maximumBackoff = tuning.maximumBackoff
        machine.tokenRefreshLead = tuning.tokenRefreshLead
        machine.tokenRefreshTimeout = tuning.tokenRefreshTimeout
        machine.maximumTokenRefreshFailures = tuning.maximumTokenRefreshFailures
        let sessionStore = self.sessionStore
        self.driver = ConnectionDriver(
            configuration: machine, seed: seed, clock: clock, transport: transport,
            endpoint: {
                state.withLockedValue { state in
                    state.session.map { SocketEndpoint(url: webSocketURL, authToken: $0.authToken) }
                }
            },
            connectFrame: { [subscribe = settings.subscribePresenceForAllUsers] in
                ConnectFrame(subscribePresenceForAllUsers: subscribe, resume: pipeline.resumeRequest)
            },
            hasTokenProvider: settings.tokenProvider != nil,
            refreshToken: { [serverURL = settings.serverURL] in
                try await Self.refreshToken(state: state, sessionStore: sessionStore, serverURL: serverURL)
            },
            logger: logger,
            onStatus: { status in
                state.withLockedValue { $0.status = status }
                if status != .connected {
                    requests.failAll(with: ParleyError(.notConnected, "The socket disconnected."))
                } else {
                    outbox.signal()
                }
                // The delegate's call is queued before the stream subscribers see the status.
                delegates.notify { $0.networkStatusChanged(status) }
                statuses.publish(status)
            },
            onFrame: { frame in
                switch frame {
                case .event, .caughtUp, .resync:
                    pipeline.receive(frame)
                case .ack(let ack):
                    requests.complete(ack.ref, with: .success(ack))
                case .error(let error):
                    let failure = ParleyError(
                        error.code, error.message, retryAfter: error.retryAfterMs.map { .milliseconds($0) }
                    )
                    if let ref = error.ref {
                        requests.complete(ref, with: .failure(failure))
                    } else {
                        logger.warning("Server error on the socket: \(failure)")
                    }
                case .hello(let hello):
                    state.withLockedValue { $0.session?.user = hello.user }
                case .pong:
                    break
                }
            }
        )
        if let saved = try sessionStore.load(), saved.appId == appId,
            settings.isServer(saved.serverURL)
        {
            state.withLockedValue { $0.session = saved }
            pipeline.begin(uid: saved.user.uid)
            outbox.begin(uid: saved.user.uid)
            offline.begin(uid: saved.user.uid)
        }
        driverBox.withLockedValue { $0 = driver }
    }

    /// Initializes the SDK: checks the App ID with the server (`ERR_INVALID_APP_ID` when unknown), restores a saved
    /// session and, in auto mode, connects it.
    ///
    /// When the server cannot be reached and a session is saved, initialization succeeds (the app works offline
    /// and the socket connects when it can); without a saved session it fails with `ERR_SERVER_UNREACHABLE`.
    public static func initialize(appId: String, settings: AppSettings) async throws -> ParleyClient {
        let client = try ParleyClient(appId: appId, settings: settings)
        try await client.start()
        return client
    }

    /// Callback form of ``initialize(appId:settings:)``; the callbacks run on the settings' callback queue.
    public static func initialize(
        appId: String, settings: AppSettings, onSuccess: @escaping @Sendable (ParleyClient) -> Void,
        onError: @escaping @Sendable (ParleyError) -> Void
    ) {
        Task {
            do {
                let client = try await initialize(appId: appId, settings: settings)
                settings.callbackQueue.async { onSuccess(client) }
            } catch {
                let failure = RESTClient.parleyError(error)
                settings.callbackQueue.async { onError(failure) }
            }
        }
    }

    /// Checks the App ID with the server, follows the app lifecycle and network sources, and connects a restored
    /// session where the rules say so. ``initialize(appId:settings:)`` calls it.
    public func start() async throws {
        let appId = self.appId
        do {
            _ = try await rest.call { try await $0.getApp(path: .init(appId: appId)).ok.body.json }
            if getLoggedInUser() != nil { await refreshBlockedUsers() }
        } catch let error as ParleyError where error.code == .serverUnreachable && getLoggedInUser() != nil {
            logger.warning("Server unreachable at start; the saved session will connect when it can.")
        }
        followEnvironment()
        state.withLockedValue { state in
            if state.deviceToken == nil { state.deviceToken = followDeviceToken() }
        }
        startWorkers()
        if let session = state.withLockedValue({ $0.session }) {
            await driver.loggedIn()
            await registerPushTokenQuietly(for: session)
        }
    }

    /// Starts the event pipeline and the outbox sender (once).
    private func startWorkers() {
        state.withLockedValue { state in
            guard state.workers == nil else { return }
            state.workers = Task { [self] in
                await withTaskGroup(of: Void.self) { group in
                    group.addTask { await self.pipeline.run() }
                    group.addTask { await self.runOutbox() }
                    group.addTask { await self.followOutboxWork() }
                }
            }
        }
    }

    /// Tells the background time keeper whether the outbox has work, now and at every change.
    private func followOutboxWork() async {
        let updates = outboxUpdates()
        await background.workChanged(outbox.hasWork)
        for await _ in updates {
            await background.workChanged(outbox.hasWork)
        }
    }

    /// Feeds the settings' lifecycle and reachability sources to the connection rules.
    private func followEnvironment() {
        let lifecycle = settings.appLifecycle
        let reachability = settings.networkReachability
        guard lifecycle != nil || reachability != nil else { return }
        let driver = self.driver
        let background = self.background
        let task = Task {
            await withTaskGroup(of: Void.self) { group in
                if let lifecycle {
                    group.addTask {
                        for await state in lifecycle.states() {
                            switch state {
                            case .background:
                                await driver.appEnteredBackground()
                                await background.appEnteredBackground()
                            case .foreground:
                                await driver.appEnteredForeground()
                                await background.appEnteredForeground()
                            }
                        }
                    }
                }
                if let reachability {
                    group.addTask {
                        for await available in reachability.availability() {
                            await driver.networkChanged(available: available)
                        }
                    }
                }
            }
        }
        state.withLockedValue { state in
            state.environment?.cancel()
            state.environment = task
        }
    }

    /// Stops the socket and every timer. Call when the client is no longer needed.
    public func shutdown() async {
        let workers = state.withLockedValue { state -> Task<Void, Never>? in
            state.environment?.cancel()
            state.environment = nil
            state.deviceToken?.cancel()
            state.deviceToken = nil
            defer { state.workers = nil }
            return state.workers
        }
        await driver.shutdown()
        pipeline.finish()
        workers?.cancel()
        requests.failAll(with: ParleyError(.notConnected, "The client shut down."))
        await workers?.value
        eventBroadcaster.finish()
        statusBroadcaster.finish()
    }

    // MARK: Session

    /// The logged-in user, or nil.
    public func getLoggedInUser() -> User? {
        state.withLockedValue { $0.session?.user }
    }

    /// Logs in with the app's development Auth Key (any uid; the user is created if new). Saves the user and
    /// opens the socket.
    @discardableResult
    public func login(uid: String, authKey: String) async throws -> User {
        let appId = self.appId
        let response = try await rest.call {
            try await $0.login(body: .json(LoginRequest(appId: appId, uid: uid, authKey: authKey))).ok.body.json
        }
        return try await establish(user: response.user, authToken: response.authToken)
    }

    /// Logs in with an auth token your server issued (`POST /v1/users/{uid}/auth-tokens`). Saves the user and
    /// opens the socket.
    @discardableResult
    public func login(authToken: String) async throws -> User {
        let user = try await Self.user(of: authToken, serverURL: settings.serverURL)
        return try await establish(user: user, authToken: authToken)
    }

    func establish(user: User, authToken: String) async throws -> User {
        let session = StoredSession(
            appId: appId, serverURL: settings.serverURL.absoluteString, user: user, authToken: authToken
        )
        try state.withLockedValue { state in
            try sessionStore.save(session)
            state.sessionEpoch += 1
        }
        pipeline.begin(uid: user.uid)
        outbox.begin(uid: user.uid)
        offline.begin(uid: user.uid)
        let replaced = state.withLockedValue { state -> Bool in
            let replaced = state.session != nil
            state.session = session
            state.directConversations = [:]
            return replaced
        }
        if replaced { await driver.loggedOut() }
        blockedUsers.withLockedValue { $0 = [] }
        await refreshBlockedUsers()
        await driver.loggedIn()
        await registerPushTokenQuietly(for: session)
        return user
    }

    /// Signs out fully: removes this device's push registration and revokes the token on the server (when
    /// reachable), forgets the saved user, closes the open chat and the socket. After ``deauthorizeUser()`` it signs
    /// out the user whose session is kept on disk.
    ///
    /// - Throws: `ERR_NOT_LOGGED_IN` when nobody is signed in (so a second `logout()` fails).
    public func logout() async throws {
        var current = state.withLockedValue { $0.session }
        if current == nil, let saved = try sessionStore.load(), saved.appId == appId,
            settings.isServer(saved.serverURL)
        {
            current = saved
        }
        guard let session = current else {
            throw ParleyError(.notLoggedIn, "Nobody is logged in.")
        }
        // A token refresh under way no longer saves its token (the session is being forgotten).
        state.withLockedValue { $0.sessionEpoch += 1 }
        try await unregisterPushToken(for: session)
        let rest = RESTClient(serverURL: settings.serverURL) { (session.authToken, nil) }
        do {
            _ = try await rest.call { try await $0.logout().noContent }
        } catch let error as ParleyError where error.code == .serverUnreachable || error.code == .authTokenInvalid {
            logger.info("Logout: the token could not be revoked on the server (\(error.code)); forgetting it here.")
        }
        try sessionStore.clear()
        pipeline.end()
        outbox.end()
        offline.end()
        blockedUsers.withLockedValue { $0 = [] }
        let chat = state.withLockedValue { state -> ChatSession? in
            defer {
                state.session = nil
                state.directConversations = [:]
                state.chat = nil
            }
            return state.chat
        }
        chat?.markClosed()
        await driver.loggedOut()
    }

    func requireSession() throws -> StoredSession {
        guard let session = state.withLockedValue({ $0.session }) else {
            throw ParleyError(.notLoggedIn, "Log in first.")
        }
        return session
    }

    static func webSocketURL(for serverURL: URL) -> String? {
        guard var components = URLComponents(url: serverURL, resolvingAgainstBaseURL: false) else { return nil }
        switch components.scheme?.lowercased() {
        case "http": components.scheme = "ws"
        case "https": components.scheme = "wss"
        default: return nil
        }
        let base = components.path.hasSuffix("/") ? String(components.path.dropLast()) : components.path
        components.path = base + "/v1/ws"
        return components.url?.absoluteString
    }
}
