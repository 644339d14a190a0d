import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import OpenAPIHummingbird
import ParleyAPI
import ParleyAPIServer
import ParleyProtocol
import ParleyStore
import ParleyStoreSQLite
import ServiceLifecycle

/// A configured Parley server, ready to run: the HTTP and WebSocket server, the ordered command writer and the
/// connection hub over one store.
///
/// Run it as a `Service` (in a `ServiceGroup`, or with ``runService()``). On graceful shutdown the parts stop in
/// this order: every WebSocket is closed with 1001 `ERR_SERVER_SHUTTING_DOWN`; the HTTP server stops taking
/// requests and finishes those in flight; the writer commits what is queued; the store is closed.
public struct ParleyApplication: Service {
    /// The store the server uses; exposed so that operators and tests can provision apps.
    public let store: any ParleyStore
    let http: any Service
    let writer: CommandWriter
    let hub: Hub
    let sockets: SocketRegistry
    let admission: AdmissionGate
    let readiness: Readiness
    let closeTimeout: Duration
    let expiry: TokenExpiry
    let typing: TypingTracker
    let presence: PresenceTracker
    let unread: UnreadNotifier
    let cluster: ClusterNode?
    /// Keeps the claim on a PostgreSQL database.
    let claimKeeper: DeploymentClaimKeeper?
    let push: OutboxWorker<PushQueue>?
    let webhooks: OutboxWorker<WebhookQueue>
    /// Files stored messages in the search index.
    let search: SearchIndexer
    /// Removes uploads no message took.
    let uploadSweeper: UploadSweeper
    /// The metrics listener, when `/metrics` has a port of its own.
    let metricsListener: MetricsListener?
    /// Sends the spans, when traces are exported.
    let spanExport: (any Service)?
    let logger: Logger

    public func run() async throws {
        // Shut down in reverse order: sockets close first; the writer commits and publishes what is queued; the
        // cluster link (which sends the writer's last events to the other nodes) and the database's claim last.
        var services: [any Service] = []
        // Spans are sent until everything else has stopped (the last requests' and commands' included).
        if let spanExport { services.append(spanExport) }
        if let claimKeeper { services.append(claimKeeper) }
        if let cluster { services.append(cluster) }
        services.append(writer)
        if let push { services.append(push) }
        services.append(webhooks)
        services += [typing, presence, unread, search, uploadSweeper]
        if let metricsListener { services.append(metricsListener) }
        services += [
            http,
            SocketCloser(
                sockets: sockets, admission: admission, readiness: readiness, closeTimeout: closeTimeout,
                logger: logger
            ),
        ]
        var configuration = ServiceGroupConfiguration(services: services.map { .init(service: $0) }, logger: logger)
        // A part that does not finish its graceful shutdown in time (a database query that never gets an answer, or
        // a connection from the pool that never comes: seen after the network to PostgreSQL stalled and came back)
        // is cancelled, so that a stop always ends.
        configuration.maximumGracefulShutdownDuration = Self.shutdownBound(closeTimeout: closeTimeout)
        let group = ServiceGroup(configuration: configuration)
        defer { expiry.cancelAll() }
        do {
            try await withGracefulShutdownHandler {
                try await group.run()
            } onGracefulShutdown: {
                Task { await group.triggerGracefulShutdown() }
            }
        } catch let error as IOError where error.errnoCode == EADDRINUSE {
            try? await store.close()
            throw AddressInUseError(underlying: "\(error)")
        } catch {
            try? await store.close()
            throw error
        }
        try await store.close()
    }

    /// How long a graceful shutdown may take before what is still running is cancelled: the close timeout and the
    /// second after it for the network (``SocketCloser``), and 30 s for the writer to commit what is queued.
    static func shutdownBound(closeTimeout: Duration) -> Duration {
        closeTimeout + .seconds(31)
    }

    /// The webhook requests this node made (at least the latest 10,000), once `condition` holds for them (or, when the
    /// calling task is cancelled, at once): for operators' tools and tests, which wait for a retry instead of guessing
    /// when it happens.
    public func webhookAttempts(until condition: @escaping @Sendable ([WebhookAttempt]) -> Bool = { _ in true })
        async -> [WebhookAttempt]
    {
        await webhooks.queue.log.wait(until: condition)
    }

    /// Whether this node's webhook service found no enabled endpoint at its last look: the message path then wakes it
    /// no more (docs/BENCHMARKS.md, appendix "Design notes", "Webhooks"). For operators' tools and tests.
    public var webhooksIdle: Bool { webhooks.isIdle }

    /// Files every stored message the search index does not hold yet, now rather than at the indexer's next look;
    /// false when the store failed. For operators' tools and tests, which then search without waiting for the lag.
    @discardableResult
    public func fileSearchIndex() async -> Bool {
        await search.fileWaiting()
    }

    /// Runs until SIGINT or SIGTERM, then shuts down gracefully.
    public func runService() async throws {
        let group = ServiceGroup(
            configuration: .init(services: [self], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        )
        try await group.run()
    }
}

/// A listener of the server (its port, or the metrics port) could not bind: another process uses the address.
public struct AddressInUseError: Error, CustomStringConvertible {
    /// The system's error, for logs.
    public var underlying: String

    public var description: String { "An address the server binds is in use (\(underlying))." }
}

/// Builds a server from its configuration, opening (and migrating) the SQLite database in the data directory
/// unless a store is given.
///
/// - Parameters:
///   - configuration: Address, data directory, limits.
///   - store: A store to use instead of SQLite in `configuration.dataDirectory`.
///   - role: Whether the server is the only one of its database (claiming a PostgreSQL database for itself) or one of
///     several nodes that meet on NATS (``NodeRole``).
///   - clock: The clock of the server's timing rules (typing expiry, presence grace, unread pushes); tests pass a
///     virtual one.
///   - logger: Where the server logs.
///   - onServerRunning: Called with the bound port once the server listens (useful with port 0).
///   - onMetricsRunning: Called with the metrics listener's port once it listens (``MetricsExposure/listener``).
public func buildApplication(
    _ configuration: ServerConfiguration,
    store: (any ParleyStore)? = nil,
    role: NodeRole = .single,
    clock: any Clock<Duration> = ContinuousClock(),
    logger: Logger = Logger(label: "parley"),
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in },
    onMetricsRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) async throws -> ParleyApplication {
    let store = try store ?? openSQLiteStore(in: configuration.dataDirectory)
    let metrics = ServerMetrics.prometheus()
    let (tracing, spanExport) = try ServerTracing.make(configuration.traces, logger: logger)
    let time = ServerClock(timeline: Timeline(clock))
    let hub = Hub()
    let positions = ConversationPositions()
    // The database is claimed before anything else: a node that may not serve it stops here, with one line.
    var claimKeeper: DeploymentClaimKeeper?
    var natsCluster: NATSCluster?
    var clusterStore: (any ClusterStore)?
    switch role {
    case .alone(let claiming):
        if let claiming {
            let claim = try await claiming.claimDeployment(shared: false)
            claimKeeper = DeploymentClaimKeeper(
                store: claiming, shared: false, first: claim, time: time, logger: logger)
        }
    case .clustered(let options):
        let servers = try options.servers()
        let claim = try await options.store.claimDeployment(shared: true)
        claimKeeper = DeploymentClaimKeeper(
            store: options.store, shared: true, first: claim, time: time, logger: logger)
        clusterStore = options.store
        natsCluster = NATSCluster(
            configuration: .init(
                servers: servers, heartbeatInterval: options.heartbeatInterval, nodeTimeout: options.nodeTimeout,
                linger: options.linger, sweepInterval: options.sweepInterval
            ),
            deploymentId: try await options.store.deploymentId(), positions: positions, hub: hub,
            timeline: time.timeline, metrics: metrics, logger: logger
        )
    }
    let relay = Relay(hub: hub, cluster: natsCluster)
    let typing = TypingTracker(
        store: store, relay: relay, timeout: configuration.typingTimeout, time: time, metrics: metrics,
        logger: logger
    )
    let presence = PresenceTracker(
        store: store, relay: relay, cluster: natsCluster, grace: configuration.presenceGrace, time: time,
        metrics: metrics, logger: logger
    )
    let unread = UnreadNotifier(
        store: store, hub: hub, interval: configuration.unreadPushInterval, burst: configuration.unreadPushBurst,
        maxUsersForBurst: configuration.unreadBurstMaxUsers, time: time, logger: logger
    )
    let publisher = EventPublisher(
        hub: hub, typing: typing, unread: unread, relay: relay, cluster: natsCluster, store: clusterStore,
        positions: positions, metrics: metrics, timeline: time.timeline, logger: logger
    )
    let push = try makePushWorker(
        configuration, store: store, presence: presence, time: time, metrics: metrics, logger: logger
    )
    let webhooks = OutboxWorker(
        WebhookQueue(store: store, configuration: configuration.webhooks, time: time, metrics: metrics, logger: logger),
        name: "Webhooks", owner: Secrets.randomID(prefix: "webhooks_", length: 12),
        ownsEveryLease: store.capabilities.oneServerAtATime,
        pollInterval: configuration.webhooks.pollInterval, concurrency: configuration.webhooks.maxConcurrentRequests,
        requestTimeout: configuration.webhooks.requestTimeout, time: time, logger: logger
    )
    let search = SearchIndexer(
        store: store, interval: configuration.searchIndexInterval, time: time, logger: logger
    )
    let writer = CommandWriter(
        store: store, publisher: publisher, maxBatch: configuration.maxCommandBatch, pushQueued: push.map { $0.wake },
        eventsStored: webhooks.wake,
        messagesStored: store.capabilities.searchFiledAfterCommit ? search.messagesStored : nil, metrics: metrics,
        storage: store is SQLiteStore ? "data directory \(configuration.dataDirectory)" : "PostgreSQL",
        logger: logger
    )
    let readiness = Readiness(waitsForCluster: natsCluster != nil)
    let authenticator = Authenticator(store: store, time: time)
    let allowedOrigins = AllowedOrigins(store: store, time: time)
    let limits = EdgeRateLimiters(configuration.edge, time: time)
    let api = APIHandler(
        store: store, authenticator: authenticator, writer: writer, relay: relay, presence: presence, time: time,
        limits: limits, configuration: configuration, logger: logger, readiness: readiness,
        webhooksQueued: webhooks.queueChanged, liveCounts: { hub.counts(appId: $0) }, allowedOrigins: allowedOrigins
    )
    let sockets = SocketRegistry()
    let expiry = TokenExpiry(time: time)
    let admission = AdmissionGate(
        limit: configuration.maxConnectionsInSetup, silentGrace: configuration.edge.silentConnectionGrace
    )
    let gateway = WebSocketGateway(
        authenticator: authenticator, store: store, hub: hub, writer: writer, typing: typing, presence: presence,
        cluster: natsCluster, sockets: sockets, expiry: expiry, admission: admission,
        sends: limits.sends, time: time,
        configuration: configuration, metrics: metrics, tracing: tracing, logger: logger
    )
    let connectionAttempts = limits.connectionAttempts
    let metricsEndpoint = MetricsEndpoint(metrics: metrics) { [natsCluster] in
        metrics.openConnections.record(sockets.count)
        let gate = admission.counts
        metrics.connectionsInSetup.record(gate.accepting + gate.handshakes)
        let (bytes, users) = hub.queuedBytesAndUsers
        metrics.queuedBytes.record(bytes)
        metrics.connectedUsers.record(users)
        metrics.record(store.activity)
        metrics.recordResources(ready: readiness.current == .serving, dataDirectory: configuration.dataDirectory)
        natsCluster?.refreshGauges()
    }

    let router = Router(context: ParleyRequestContext.self)
    // Outermost: the CORS headers go on every answer, refusals included.
    router.add(middleware: CORSMiddleware(origins: allowedOrigins))
    // The client's address and credentials (never throws), for everything inside, the request log included.
    router.add(middleware: CredentialsMiddleware(trustedProxies: configuration.edge.trustedProxies))
    // A span per request when traces are on, around the request log (its line then carries the trace id).
    if let tracer = tracing.tracer { router.add(middleware: RequestTracingMiddleware(tracer: tracer)) }
    // Outside the error middleware: it counts and logs refusals with the status they are answered with.
    router.add(middleware: ObservabilityMiddleware(metrics: metrics, level: configuration.requestLogLevel))
    router.add(middleware: ErrorMiddleware(logger: logger))
    try loadConsole(configuration.console, logger: logger)?.register(on: router)
    let (blobs, spool) = try await makeBlobStore(configuration)
    FileRoutes(
        store: store, authenticator: authenticator, blobs: blobs, settings: configuration.files, spool: spool,
        sends: limits.sends, transferGrace: configuration.edge.requestBodyTimeout, time: time, logger: logger
    ).register(on: router)
    if let token = configuration.metrics.token { metricsEndpoint.register(on: router, token: token) }
    try api.registerParleyHandlers(on: router, middlewares: [EmptyBodyMiddleware()])

    let http = ParleyHTTPServer(
        responder: router.buildResponder(),
        configuration: .init(
            hostname: configuration.hostname, port: configuration.port, backlog: configuration.backlog,
            serverName: "Parley"
        ),
        logger: logger,
        onServerRunning: { channel in
            do {
                try await admission.install(on: channel, logger: logger)
            } catch {
                logger.warning("Connection admission control is off", metadata: ["error": "\(error)"])
            }
            readiness.markServing()
            let port = channel.localAddress?.port ?? configuration.port
            logger.info(
                "Parley listening on http://\(configuration.hostname):\(port) (WebSocket: \(WebSocketGateway.path))")
            await onServerRunning(port)
        },
        makeChannel: { responder in
            ParleyHTTPChannel(responder: responder, gateway: gateway, connectionAttempts: connectionAttempts)
        }
    )
    return ParleyApplication(
        store: store, http: http, writer: writer, hub: hub, sockets: sockets, admission: admission,
        readiness: readiness,
        closeTimeout: configuration.closeTimeout, expiry: expiry, typing: typing, presence: presence, unread: unread,
        cluster: natsCluster.map { cluster in
            ClusterNode(
                cluster: cluster, store: clusterStore!, writer: writer, publisher: publisher, relay: relay,
                presence: presence, hub: hub, readiness: readiness, logger: logger)
        },
        claimKeeper: claimKeeper,
        push: push, webhooks: webhooks, search: search,
        uploadSweeper: UploadSweeper(
            store: store, blobs: blobs, retention: configuration.files.unusedUploadRetention,
            interval: configuration.files.sweepInterval, time: time, logger: logger
        ),
        metricsListener: configuration.metrics.listener.map {
            MetricsListener(
                endpoint: metricsEndpoint, hostname: $0.hostname, port: $0.port, logger: logger,
                onRunning: onMetricsRunning
            )
        },
        spanExport: spanExport, logger: logger
    )
}

/// The attachments' blob store and the folder uploads are spooled to (emptied: what is there is from a run that
/// stopped mid-upload).
func makeBlobStore(_ configuration: ServerConfiguration) async throws -> (any BlobStore, String) {
    let spool = configuration.dataDirectory + "/spool"
    try? FileManager.default.removeItem(atPath: spool)
    try FileManager.default.createDirectory(atPath: spool, withIntermediateDirectories: true)
    switch configuration.files.storage {
    case .disk(let folder):
        return (try DiskBlobStore(root: folder ?? configuration.dataDirectory + "/files"), spool)
    case .s3(let s3):
        let store = S3BlobStore(configuration: s3)
        try await store.ensureBucket()
        return (store, spool)
    }
}

/// The web console's files, or nil when it is off (or, shipped, missing: with a warning).
func loadConsole(_ source: ConsoleSource, logger: Logger) throws -> ConsoleFiles? {
    switch source {
    case .off:
        return nil
    case .directory(let path):
        return try ConsoleFiles(directory: URL(fileURLWithPath: path))
    case .bundled:
        guard let directory = ConsoleFiles.bundledDirectory() else {
            logger.warning(
                "The web console is off: its files (parley_ParleyServer.resources) are not beside the executable")
            return nil
        }
        return try ConsoleFiles(directory: directory)
    }
}

/// The push worker when APNs is configured (the key is loaded and checked now: a bad one throws
/// ``PushConfigurationError``); nil, with one log line, when it is not.
func makePushWorker(
    _ configuration: ServerConfiguration, store: any ParleyStore, presence: PresenceTracker, time: ServerClock,
    metrics: ServerMetrics = .discarding, logger: Logger
) throws -> OutboxWorker<PushQueue>? {
    guard let apns = configuration.apns else {
        logger.info("Push notifications are off: no APNs key configured (parley-server --apns-key-file)")
        return nil
    }
    let sender = try APNsClient(configuration: apns, expiry: configuration.pushRetry.expiry, time: time)
    logger.info(
        "Push notifications on: APNs \(apns.endpoint?.absoluteString ?? "api.push.apple.com / api.sandbox.push.apple.com"), topic \(apns.topic), key \(apns.keyId)"
    )
    return OutboxWorker(
        PushQueue(
            store: store, sender: sender, presence: presence, retry: configuration.pushRetry, time: time,
            metrics: metrics, logger: logger),
        name: "Push", owner: Secrets.randomID(prefix: "push_", length: 12),
        ownsEveryLease: store.capabilities.oneServerAtATime,
        pollInterval: configuration.pushPollInterval, concurrency: apns.maxConcurrentRequests,
        requestTimeout: apns.requestTimeout, time: time, logger: logger
    )
}

/// Makes the data directory when it is missing; a path that is a file, or a folder that cannot be made, is refused with
/// one line that says what to do (`ERR_DATA_DIRECTORY_NOT_A_FOLDER`, `ERR_DATA_DIRECTORY_UNUSABLE`), not with
/// Foundation's error.
func makeDataDirectory(_ path: String) throws {
    var isFolder: ObjCBool = false
    if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) {
        guard isFolder.boolValue else {
            throw SQLiteStoreError(
                code: "ERR_DATA_DIRECTORY_NOT_A_FOLDER",
                message: "The data directory \(path) is a file, not a folder: point --data-dir at a folder "
                    + "(it is made when missing), or move the file away."
            )
        }
        return
    }
    do {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    } catch {
        // Foundation's error wraps the system's (ENOTDIR, EACCES, EROFS ...): its message is the one to show.
        let underlying = (error as NSError).userInfo[NSUnderlyingErrorKey].flatMap { $0 as? any Error }
        let reason =
            underlying.map { underlying -> String in
                let system = underlying as NSError
                return system.domain == NSPOSIXErrorDomain
                    ? String(cString: strerror(Int32(system.code))) : system.localizedDescription
            } ?? "\(error)"
        throw SQLiteStoreError(
            code: "ERR_DATA_DIRECTORY_UNUSABLE",
            message: "The data directory \(path) cannot be made (\(reason)): check that its parent is a folder the "
                + "server's user may write to, or point --data-dir elsewhere."
        )
    }
}

/// Opens the SQLite database of a data directory, creating the directory if needed.
///
/// - Parameters:
///   - creation: Whether an existing empty `parley.sqlite` may become a new database (it is refused by default; a
///     file that is not Parley's always is).
///   - lock: Take the directory's lock (``DataDirectoryLock``) for as long as the store is open, so that a second
///     server on the same directory refuses to start. Tools that only read or provision (`parley-server apps`) do not.
public func openSQLiteStore(
    in dataDirectory: String, creation: DatabaseCreation = .ifMissing, lock: Bool = true
) throws -> SQLiteStore {
    try makeDataDirectory(dataDirectory)
    let directoryLock = lock ? try DataDirectoryLock(directory: dataDirectory) : nil
    return try SQLiteStore(path: dataDirectory + "/parley.sqlite", creation: creation, lock: directoryLock)
}
