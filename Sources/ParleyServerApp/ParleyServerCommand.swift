import ArgumentParser
import Foundation
import Logging
import ParleyServer
import ParleyStore
import ParleyStorePostgres

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

    /// Opens the store these options name: PostgreSQL with `--database-url`, else SQLite in the data directory.
    /// A database that cannot be reached fails within ``connectTimeout`` with a one-line reason.
    func openStore(logger: Logger) async throws -> any ParleyStore {
        guard let databaseURL else { return try openSQLiteStore(in: dataDirectory) }
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

    @Option(help: "With PostgreSQL: seconds between this node's heartbeats in the node table.")
    var nodeHeartbeatSeconds: Double = 2

    @Option(
        help: "With PostgreSQL: seconds without a heartbeat after which the other nodes declare a node dead and its users offline."
    )
    var nodeTimeoutSeconds: Double = 10

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (env PARLEY_LOG_LEVEL).")
    var logLevel: String = ProcessInfo.processInfo.environment["PARLEY_LOG_LEVEL"] ?? "info"

    @OptionGroup(title: "Push notifications (APNs); off unless --apns-key-file is given") var apns: APNsOptions

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
        // A push configuration that cannot work stops the start before anything is written.
        configuration.apns = try apns.configuration()
        try configuration.apns?.validate()

        let store = try await data.openStore(logger: logger)
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
