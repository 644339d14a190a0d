import Foundation
import Logging
import NIOConcurrencyHelpers
import ParleyServer
import ParleyStore
import ParleyStorePostgres
import ServiceLifecycle

/// A real Parley server for tests: port 0 on 127.0.0.1, a SQLite file in a temporary directory (or a PostgreSQL
/// database), and a provisioned app whose keys the test can use.
///
/// ```swift
/// let server = try await TestServer.start()
/// defer { Task { try await server.stop() } }
/// let url = server.baseURL
/// ```
public final class TestServer: Sendable {
    public let port: Int
    /// The port of the metrics listener, when the configuration asks for one.
    public let metricsPort: Int?
    public let app: ProvisionedApp
    public let dataDirectory: String
    public let configuration: ServerConfiguration
    /// The server's store, for provisioning (another app, say) behind its back.
    public let store: any ParleyStore
    let group: ServiceGroup
    let running: Task<Void, any Error>
    /// The running server.
    public let application: ParleyApplication

    public var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    init(
        port: Int, metricsPort: Int?, app: ProvisionedApp, dataDirectory: String, configuration: ServerConfiguration,
        store: any ParleyStore, group: ServiceGroup, running: Task<Void, any Error>, application: ParleyApplication
    ) {
        self.application = application
        self.store = store
        self.port = port
        self.metricsPort = metricsPort
        self.app = app
        self.dataDirectory = dataDirectory
        self.configuration = configuration
        self.group = group
        self.running = running
    }

    /// Starts a server. With `dataDirectory` of a stopped server, it restarts over the same data (and app);
    /// `port` can ask for the same port again.
    ///
    /// With `databaseURL`, the server stores its data in that PostgreSQL database instead of SQLite (the data
    /// directory then only remembers the test app's keys); pass the same URL and data directory to restart over the
    /// same data. `PostgresTestDatabase.create()` makes a fresh database for a test:
    ///
    /// ```swift
    /// let database = try await PostgresTestDatabase.create()
    /// let server = try await TestServer.start(databaseURL: database.url)
    /// ```
    public static func start(
        dataDirectory: String? = nil, databaseURL: String? = nil, port: Int = 0,
        clock: any Clock<Duration> = ContinuousClock(), logLevel: Logger.Level = .warning, logger given: Logger? = nil,
        configure: (inout ServerConfiguration) -> Void = { _ in }
    ) async throws -> TestServer {
        let directory = try dataDirectory ?? TemporaryDirectory(prefix: "parley-server").path
        var configuration = ServerConfiguration()
        configuration.hostname = "127.0.0.1"
        configuration.port = port
        configuration.dataDirectory = directory
        // Ten seconds to answer `SELECT 1` rather than two: in the first minutes of a whole run on two cores (some 650
        // tests starting at once) a PostgreSQL that answers once took longer than two. Tests of the check set theirs.
        configuration.healthCheckTimeout = .seconds(10)
        configure(&configuration)
        var logger = given ?? Logger(label: "parley.test-server")
        if given == nil { logger.logLevel = logLevel }

        let store: any ParleyStore
        if let databaseURL {
            store = try await PostgresStore.connect(
                url: databaseURL, logger: logger, timeout: .seconds(60), maximumConnections: 10)
        } else {
            store = try openSQLiteStore(in: directory)
        }
        let app: ProvisionedApp
        do {
            app = try await provisionedApp(in: store, directory: directory)
        } catch {
            try? await store.close()
            throw error
        }
        let bound = PortPromise()
        let metricsBound = PortPromise()
        let application: ParleyApplication
        do {
            application = try await buildApplication(
                configuration, store: store, clock: clock, logger: logger,
                onServerRunning: { bound.fulfill($0) }, onMetricsRunning: { metricsBound.fulfill($0) }
            )
        } catch {
            try? await store.close()
            throw error
        }
        let group = ServiceGroup(configuration: .init(services: [application], logger: logger))
        let running = Task { try await group.run() }
        let port = try await bound.value(orFailureOf: running)
        let metricsPort =
            configuration.metrics.listener == nil ? nil : try await metricsBound.value(orFailureOf: running)
        return TestServer(
            port: port, metricsPort: metricsPort, app: app, dataDirectory: directory, configuration: configuration,
            store: store,
            group: group, running: running, application: application
        )
    }

    /// Stops gracefully: sockets closed with 1001, requests finished, database closed.
    public func stop() async throws {
        await group.triggerGracefulShutdown()
        try await running.value
    }

    /// Cancels the server's task, as its service group does when another service fails: no graceful shutdown. Returns
    /// once the task has ended, with what it threw.
    public func cancel() async -> (any Error)? {
        running.cancel()
        do {
            try await running.value
            return nil
        } catch {
            return error
        }
    }

    /// The app of this data directory: created on first start and remembered in a file next to the database, so
    /// that a restarted server keeps its keys (the server itself stores only their hashes).
    private static func provisionedApp(in store: any ParleyStore, directory: String) async throws -> ProvisionedApp {
        let file = URL(fileURLWithPath: directory).appendingPathComponent("test-app.json")
        if let data = try? Data(contentsOf: file) {
            return try JSONDecoder().decode(ProvisionedApp.self, from: data)
        }
        let app = try await AppProvisioning.createApp(in: store, name: "Test app")
        try JSONEncoder().encode(app).write(to: file)
        return app
    }
}

/// The port the server reports once it listens.
private final class PortPromise: Sendable {
    private let state = NIOLockedValueBox<(port: Int?, waiter: CheckedContinuation<Int, any Error>?)>((nil, nil))

    func fulfill(_ port: Int) {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Int, any Error>? in
            state.port = port
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: port)
    }

    func fail(_ error: any Error) {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Int, any Error>? in
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(throwing: error)
    }

    /// The port, or the error that ended `task` before the server listened.
    func value(orFailureOf task: Task<Void, any Error>) async throws -> Int {
        let watcher = Task {
            do {
                try await task.value
                fail(TestServerError.stoppedBeforeListening)
            } catch {
                fail(error)
            }
        }
        defer { watcher.cancel() }
        return try await withCheckedThrowingContinuation { continuation in
            let port = state.withLockedValue { state -> Int? in
                if let port = state.port { return port }
                state.waiter = continuation
                return nil
            }
            if let port { continuation.resume(returning: port) }
        }
    }
}

public enum TestServerError: Error {
    case stoppedBeforeListening
}

extension TestServer {
    /// What the server holds now (``ServerSnapshot``).
    public func snapshot() async -> ServerSnapshot {
        await application.snapshot()
    }

    /// The server's snapshot once `condition` holds, or the last one after `timeout`. Closing a connection takes the
    /// server's event loops a moment after the client closed its side: this waits for that (polling every 10 ms), and
    /// the test then checks the snapshot it got.
    public func snapshot(
        within timeout: Duration = .seconds(10), where condition: (ServerSnapshot) -> Bool
    ) async -> ServerSnapshot {
        let deadline = ContinuousClock.now + timeout
        while true {
            let snapshot = await application.snapshot()
            if condition(snapshot) || ContinuousClock.now >= deadline { return snapshot }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// HTTP deadlines no request of a test misses however busy the machine, for a server from
    /// ``startForEdgeTests(databaseURL:clock:configure:)`` whose test looks at other rules (rate limits, bans): with
    /// the suite running at once on two cores, a REST call there once waited past the 2 s deadlines, and a kept-alive
    /// connection past the 3 s idle timeout (its reuse then reset). The readiness check waits as long for the database:
    /// with the cores held busy besides, a `/health` once got 503 after the 2 s default.
    public static func patientDeadlines(_ configuration: inout ServerConfiguration) {
        configuration.edge.requestHeadTimeout = .seconds(30)
        configuration.edge.requestBodyTimeout = .seconds(30)
        configuration.edge.idleTimeout = .seconds(30)
        configuration.healthCheckTimeout = .seconds(30)
    }

    /// A server with everything this test needs to see quickly: short HTTP deadlines, and no rate limits (the tests
    /// of those turn them on). With `databaseURL`, on that PostgreSQL database (see
    /// ``start(dataDirectory:databaseURL:port:clock:logLevel:logger:configure:)``).
    public static func startForEdgeTests(
        databaseURL: String? = nil, clock: any Clock<Duration> = ContinuousClock(),
        configure: (inout ServerConfiguration) -> Void = { _ in }
    ) async throws -> TestServer {
        try await start(databaseURL: databaseURL, clock: clock) { configuration in
            // Short, but not so short that a test's own first bytes miss them when the whole suite runs at once on two
            // cores (a raw socket's send starts a thread).
            configuration.edge.requestHeadTimeout = .seconds(2)
            configuration.edge.requestBodyTimeout = .seconds(2)
            configuration.edge.idleTimeout = .seconds(3)
            configuration.edge.connectionAttemptsPerAddress = nil
            configuration.edge.loginsPerAddress = nil
            configuration.edge.messagesPerUser = nil
            configuration.closeTimeout = .seconds(1)
            configure(&configuration)
        }
    }
}
