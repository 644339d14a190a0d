import ArgumentParser
import Foundation
import Logging
import ParleyServer

@main
struct ParleyServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "parley-server",
        abstract: "The Parley chat server: REST and WebSocket on embedded SQLite.",
        subcommands: [Serve.self, Apps.self],
        defaultSubcommand: Serve.self
    )
}

/// Options shared by every subcommand that opens the data directory.
struct DataOptions: ParsableArguments {
    @Option(name: .customLong("data-dir"), help: "Folder of the SQLite database (env PARLEY_DATA_DIR).")
    var dataDirectory: String = ProcessInfo.processInfo.environment["PARLEY_DATA_DIR"] ?? "parley-data"
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

        let store = try openSQLiteStore(in: data.dataDirectory)
        logger.info("Data directory: \(data.dataDirectory) (SQLite, WAL)")
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
        abstract: "Manage the apps of a data directory (run while the server is stopped or running).",
        subcommands: [List.self, Create.self, RotateKeys.self]
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the apps.")
        @OptionGroup var data: DataOptions

        func run() async throws {
            let store = try openSQLiteStore(in: data.dataDirectory)
            for app in try await store.apps() { print("\(app.id)\t\(app.name)") }
            try await store.close()
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create an app and print its keys.")
        @OptionGroup var data: DataOptions
        @Argument(help: "The app's name.") var name: String

        func run() async throws {
            let store = try openSQLiteStore(in: data.dataDirectory)
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
            let store = try openSQLiteStore(in: data.dataDirectory)
            let app = try await AppProvisioning.rotateKeys(in: store, appId: appId)
            try await store.close()
            guard let app else { throw ValidationError("No app \(appId) in \(data.dataDirectory).") }
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
