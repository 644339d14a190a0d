import ArgumentParser
import Foundation
import Logging
import ParleyServer
import ParleyStore
import ParleyStorePostgres
import ParleyStoreSQLite

@main
struct ParleyServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "parley-server",
        abstract: "The Parley chat server: REST and WebSocket on embedded SQLite or on PostgreSQL.",
        subcommands: [Serve.self, Apps.self],
        defaultSubcommand: Serve.self
    )
}

/// Options shared by every subcommand that opens the database.
struct DataOptions: ParsableArguments {
    @Option(name: .customLong("data-dir"), help: "Folder of the SQLite database (env PARLEY_DATA_DIR).")
    var dataDirectory: String = ProcessInfo.processInfo.environment["PARLEY_DATA_DIR"] ?? "parley-data"

    @Option(
        name: .customLong("database-url"),
        help: ArgumentHelp(
            "Store data in PostgreSQL instead of SQLite (env PARLEY_DATABASE_URL).",
            valueName: "postgres://user:password@host:port/database"
        )
    )
    var databaseURLOption: String?

    /// The PostgreSQL URL from the option, else from the environment; nil for SQLite.
    var databaseURL: String? {
        databaseURLOption ?? ProcessInfo.processInfo.environment["PARLEY_DATABASE_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Seconds PostgreSQL has to answer at start-up.
    static let connectTimeout: Duration = .seconds(10)

    /// Where the data is, for messages.
    var location: String {
        if let databaseURL { return (try? PostgresDatabaseURL(databaseURL).description) ?? "PostgreSQL" }
        return dataDirectory
    }

    /// Opens the store these options name: PostgreSQL with `--database-url`, else SQLite in the data directory (locked
    /// for the server, `asServer`, so that a second one refuses to start on it). A database that cannot be reached,
    /// or a file that is not Parley's, fails within ``connectTimeout`` with a one-line reason.
    func openStore(logger: Logger, asServer: Bool = false, creation: DatabaseCreation = .ifMissing) async throws
        -> any ParleyStore
    {
        guard let databaseURL else {
            return try openSQLiteStore(in: dataDirectory, creation: creation, lock: asServer)
        }
        return try await PostgresStore.connect(url: databaseURL, logger: logger, timeout: Self.connectTimeout)
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the server (the default).")

    @Option(help: "Address to bind (env PARLEY_HOSTNAME).")
    var hostname: String = ProcessInfo.processInfo.environment["PARLEY_HOSTNAME"] ?? "127.0.0.1"

    @Option(help: "Port to bind; 0 picks a free one (env PARLEY_PORT).")
    var port: Int = ProcessInfo.processInfo.environment["PARLEY_PORT"].flatMap(Int.init) ?? 8080

    @OptionGroup var data: DataOptions

    @Option(help: "Seconds between the server's WebSocket pings.")
    var heartbeatSeconds: Int = 30

    @Option(
        help: "Most connections being set up at once (accepted, not yet serving or live); more wait in the kernel's backlog."
    )
    var maxConnectionsInSetup: Int = ServerConfiguration().maxConnectionsInSetup

    @Flag(help: "Make a new database in an existing empty parley.sqlite (an empty file is refused otherwise).")
    var createDatabase = false

    @OptionGroup(title: "Connection edge (docs/PROTOCOL.md, Limits)") var edge: EdgeOptions

    @Option(help: "With PostgreSQL: seconds between this node's heartbeats in the node table.")
    var nodeHeartbeatSeconds: Double = 2

    @Option(
        help: "With PostgreSQL: seconds without a heartbeat after which the other nodes declare a node dead and its users offline."
    )
    var nodeTimeoutSeconds: Double = 10

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (env PARLEY_LOG_LEVEL).")
    var logLevel: String = ProcessInfo.processInfo.environment["PARLEY_LOG_LEVEL"] ?? "info"

    @OptionGroup(title: "Push notifications (APNs); off unless --apns-key-file is given") var apns: APNsOptions

    @OptionGroup(title: "Webhooks (docs/PROTOCOL.md, Webhooks)") var webhooks: WebhookOptions

    func run() async throws {
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("Unknown log level \(logLevel).")
        }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "parley")
        var configuration = ServerConfiguration()
        configuration.hostname = hostname
        configuration.port = port
        configuration.dataDirectory = data.dataDirectory
        configuration.heartbeatInterval = .seconds(heartbeatSeconds)
        guard maxConnectionsInSetup >= 1 else { throw ValidationError("--max-connections-in-setup must be at least 1.") }
        configuration.maxConnectionsInSetup = maxConnectionsInSetup
        try edge.apply(to: &configuration.edge)
        // A push configuration that cannot work stops the start before anything is written.
        configuration.apns = try apns.configuration()
        try configuration.apns?.validate()
        try webhooks.apply(to: &configuration.webhooks)

        let store = try await data.openStore(
            logger: logger, asServer: true, creation: createDatabase ? .ifMissingOrEmpty : .ifMissing
        )
        if data.databaseURL != nil {
            logger.info("Database: \(data.location) (PostgreSQL)")
        } else {
            logger.info("Data directory: \(data.dataDirectory) (SQLite, WAL)")
        }
        if let app = try await AppProvisioning.ensureDefaultApp(in: store) {
            printKeys(of: app, heading: "Created the default app. Keep these; the keys are not shown again:")
        }
        guard nodeHeartbeatSeconds > 0, nodeTimeoutSeconds > nodeHeartbeatSeconds else {
            throw ValidationError("--node-timeout-seconds must be longer than --node-heartbeat-seconds (> 0).")
        }
        // On PostgreSQL every process is a node of one deployment, however many run.
        let cluster = (store as? PostgresStore).map {
            PostgresCluster(
                store: $0, heartbeatInterval: .milliseconds(Int64(nodeHeartbeatSeconds * 1000)),
                nodeTimeout: .milliseconds(Int64(nodeTimeoutSeconds * 1000)), logger: logger
            )
        }
        let application = try await buildApplication(configuration, store: store, cluster: cluster, logger: logger)
        try await application.runService()
        logger.info("Stopped")
    }
}

/// The webhook options of `serve`.
struct WebhookOptions: ParsableArguments {
    @Option(help: "Seconds one webhook request may take, answer included, before it counts as failed.")
    var webhookTimeoutSeconds: Double = 10

    @Option(help: "Most webhook requests in flight at once on this node.")
    var webhookConcurrency: Int = WebhookConfiguration().maxConcurrentRequests

    @Option(help: "Attempts after which a webhook delivery is given up (marked failed).")
    var webhookMaxAttempts: Int = WebhookRetryPolicy().maximumAttempts

    @Option(help: "Failed webhook attempts in a row after which an endpoint is disabled.")
    var webhookDisableAfter: Int = WebhookConfiguration().disableAfterFailures

    func apply(to configuration: inout WebhookConfiguration) throws {
        guard webhookTimeoutSeconds > 0, webhookConcurrency >= 1, webhookMaxAttempts >= 1, webhookDisableAfter >= 1
        else {
            throw ValidationError("The webhook options must be positive.")
        }
        configuration.requestTimeout = .milliseconds(Int64(webhookTimeoutSeconds * 1000))
        configuration.maxConcurrentRequests = webhookConcurrency
        configuration.retry.maximumAttempts = webhookMaxAttempts
        configuration.disableAfterFailures = webhookDisableAfter
    }
}

/// The APNs options of `serve`, each also read from the environment.
struct APNsOptions: ParsableArguments {
    private static let environment = ProcessInfo.processInfo.environment

    @Option(help: "The .p8 signing key from the Apple Developer account (env PARLEY_APNS_KEY_FILE).")
    var apnsKeyFile: String? = environment["PARLEY_APNS_KEY_FILE"]

    @Option(help: "The key's 10-character id (env PARLEY_APNS_KEY_ID).")
    var apnsKeyId: String? = environment["PARLEY_APNS_KEY_ID"]

    @Option(help: "The 10-character Team ID (env PARLEY_APNS_TEAM_ID).")
    var apnsTeamId: String? = environment["PARLEY_APNS_TEAM_ID"]

    @Option(help: "The app's bundle id, the apns-topic (env PARLEY_APNS_TOPIC).")
    var apnsTopic: String? = environment["PARLEY_APNS_TOPIC"]

    @Option(
        help: "Send to this https:// URL instead of Apple's production and sandbox hosts (env PARLEY_APNS_ENDPOINT)."
    )
    var apnsEndpoint: String? = environment["PARLEY_APNS_ENDPOINT"]

    @Option(help: "PEM file of CA certificates to trust for the APNs connection (env PARLEY_APNS_CA_FILE).")
    var apnsCaFile: String? = environment["PARLEY_APNS_CA_FILE"]

    /// The configuration, or nil when no key file is given.
    func configuration() throws -> APNsConfiguration? {
        guard let keyFile = apnsKeyFile, !keyFile.isEmpty else {
            if apnsKeyId != nil || apnsTeamId != nil || apnsTopic != nil || apnsEndpoint != nil {
                throw ValidationError("The APNs options need --apns-key-file.")
            }
            return nil
        }
        guard let keyId = apnsKeyId, let teamId = apnsTeamId, let topic = apnsTopic else {
            throw ValidationError("--apns-key-file needs --apns-key-id, --apns-team-id and --apns-topic.")
        }
        var configuration = APNsConfiguration(keyFile: keyFile, keyId: keyId, teamId: teamId, topic: topic)
        if let endpoint = apnsEndpoint {
            guard let url = URL(string: endpoint) else { throw ValidationError("--apns-endpoint is not a URL.") }
            configuration.endpoint = url
        }
        configuration.trustRootsFile = apnsCaFile
        return configuration
    }
}

struct Apps: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the apps of a data directory or database (run while the server is stopped or running).",
        subcommands: [List.self, Create.self, RotateKeys.self]
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the apps.")
        @OptionGroup var data: DataOptions

        func run() async throws {
            let store = try await data.openStore(logger: toolLogger())
            for app in try await store.apps() { print("\(app.id)\t\(app.name)") }
            try await store.close()
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create an app and print its keys.")
        @OptionGroup var data: DataOptions
        @Argument(help: "The app's name.") var name: String

        func run() async throws {
            let store = try await data.openStore(logger: toolLogger())
            let app = try await AppProvisioning.createApp(in: store, name: name)
            printKeys(of: app, heading: "Created app \(name). Keep these; the keys are not shown again:")
            try await store.close()
        }
    }

    struct RotateKeys: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Replace an app's Auth Key and REST API key; the old ones stop working at once."
        )
        @OptionGroup var data: DataOptions
        @Argument(help: "The App ID.") var appId: String

        func run() async throws {
            let store = try await data.openStore(logger: toolLogger())
            let app = try await AppProvisioning.rotateKeys(in: store, appId: appId)
            try await store.close()
            guard let app else { throw ValidationError("No app \(appId) in \(data.location).") }
            printKeys(of: app, heading: "New keys of app \(app.name):")
        }
    }
}

func printKeys(of app: ProvisionedApp, heading: String) {
    // Written straight to the file descriptor: stdout may be a pipe, where print() would hold it in a buffer.
    FileHandle.standardOutput.write(
        Data(
            """

        \(heading)
          App ID:       \(app.appId)
          Auth Key:     \(app.authKey)   (development: log in as any uid)
          REST API Key: \(app.restAPIKey)   (secret: server-to-server only)

        """.utf8
        )
    )
}

/// The logger of the `apps` subcommands: warnings and errors only, on standard error.
func toolLogger() -> Logger {
    var logger = Logger(label: "parley") { StreamLogHandler.standardError(label: $0) }
    logger.logLevel = .warning
    return logger
}

/// The limits of the connection edge that an operator may want to change: request bodies, HTTP timeouts, rate limits.
struct EdgeOptions: ParsableArguments {
    private static let defaults = EdgeLimits()

    @Option(help: "Largest REST request body in bytes; larger ones get 413.")
    var maxRequestBodyBytes: Int = defaults.maxRequestBodyBytes

    @Option(help: "Seconds a keep-alive HTTP connection may stay idle between requests.")
    var idleTimeoutSeconds: Double = Double(defaults.idleTimeout.components.seconds)

    @Option(help: "Seconds a request head may take to arrive (its body: three times as long); past it 408.")
    var requestTimeoutSeconds: Double = Double(defaults.requestHeadTimeout.components.seconds)

    @Option(help: "New connections per second per client address (0: no limit); past it 429.")
    var connectionsPerSecondPerAddress: Double = defaults.connectionAttemptsPerAddress?.perSecond ?? 0

    @Option(help: "Connections a client address may open at once before the per-second limit applies.")
    var connectionBurstPerAddress: Int = defaults.connectionAttemptsPerAddress?.burst ?? 0

    @Option(help: "Logins per second per client address (0: no limit); past it 429.")
    var loginsPerSecondPerAddress: Double = defaults.loginsPerAddress?.perSecond ?? 0

    @Option(help: "Logins a client address may make at once before the per-second limit applies.")
    var loginBurstPerAddress: Int = defaults.loginsPerAddress?.burst ?? 0

    @Option(help: "Messages per second one user may send (0: no limit); past it ERR_RATE_LIMITED.")
    var messagesPerSecondPerUser: Double = defaults.messagesPerUser?.perSecond ?? 0

    @Option(help: "Messages a user may send at once before the per-second limit applies.")
    var messageBurstPerUser: Int = defaults.messagesPerUser?.burst ?? 0

    func apply(to limits: inout EdgeLimits) throws {
        guard maxRequestBodyBytes >= 1024 else {
            throw ValidationError("--max-request-body-bytes must be at least 1024.")
        }
        guard idleTimeoutSeconds > 0, requestTimeoutSeconds > 0 else {
            throw ValidationError("--idle-timeout-seconds and --request-timeout-seconds must be positive.")
        }
        limits.maxRequestBodyBytes = maxRequestBodyBytes
        limits.idleTimeout = .milliseconds(Int64(idleTimeoutSeconds * 1000))
        limits.requestHeadTimeout = .milliseconds(Int64(requestTimeoutSeconds * 1000))
        limits.requestBodyTimeout = .milliseconds(Int64(requestTimeoutSeconds * 3000))
        limits.connectionAttemptsPerAddress = try Self.limit(
            connectionsPerSecondPerAddress, connectionBurstPerAddress, "connection"
        )
        limits.loginsPerAddress = try Self.limit(loginsPerSecondPerAddress, loginBurstPerAddress, "login")
        limits.messagesPerUser = try Self.limit(messagesPerSecondPerUser, messageBurstPerUser, "message")
    }

    private static func limit(_ perSecond: Double, _ burst: Int, _ name: String) throws -> RateLimit? {
        guard perSecond > 0 else { return nil }
        guard burst >= 1 else { throw ValidationError("--\(name)-burst-... must be at least 1 when its rate is on.") }
        return RateLimit(perSecond: perSecond, burst: burst)
    }
}
