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

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (env PARLEY_LOG_LEVEL).")
    var logLevel: String = ProcessInfo.processInfo.environment["PARLEY_LOG_LEVEL"] ?? "info"

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

        let store = try await data.openStore(logger: logger)
        if data.databaseURL != nil {
            logger.info("Database: \(data.location) (PostgreSQL)")
        } else {
            logger.info("Data directory: \(data.dataDirectory) (SQLite, WAL)")
        }
        if let app = try await AppProvisioning.ensureDefaultApp(in: store) {
            printKeys(of: app, heading: "Created the default app. Keep these; the keys are not shown again:")
        }
        let application = try await buildApplication(configuration, store: store, logger: logger)
        try await application.runService()
        logger.info("Stopped")
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
