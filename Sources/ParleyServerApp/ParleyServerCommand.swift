import ArgumentParser
import Foundation
import Logging
import ParleyServer
import ParleyServerSettings
import ParleyStore
import ParleyStorePostgres
import ParleyStoreSQLite

/// `parley-server [options]` runs the server (so `parley-server --help` lists every option of the server);
/// `parley-server serve [options]` is the same; `apps` and `backup` are tools.
@main
struct ParleyServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "parley-server",
        abstract: "The Parley chat server: REST and WebSocket on embedded SQLite or on PostgreSQL.",
        discussion: ServeOptions.discussion,
        version: "\(ServerBuild.version) (commit \(ServerBuild.commit))",
        subcommands: [Serve.self, Apps.self, Backup.self, Restore.self]
    )

    @OptionGroup var options: ServeOptions

    func run() async throws { try await options.run() }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the server (what `parley-server` alone does).", discussion: ServeOptions.discussion
    )

    @OptionGroup var options: ServeOptions

    func run() async throws { try await options.run() }
}

/// Options shared by every subcommand that opens the database. Every option of `parley-server` may also come from the
/// environment or the config file (``SettingSources``); their defaults are in the help and in README.md.
struct DataOptions: ParsableArguments {
    @Option(help: "A JSON or YAML file of options, keyed by their long names (env PARLEY_CONFIG).")
    var config: String?

    @Option(name: .customLong("data-dir"), help: "Folder of the SQLite database (default parley-data).")
    var dataDirectory: String?

    @Option(
        name: .customLong("database-url"),
        help: ArgumentHelp(
            "Store data in PostgreSQL instead of SQLite.", valueName: "postgres://user:password@host:port/database"
        )
    )
    var databaseURL: String?

    /// The config file and the environment, for every other option.
    func sources() async throws -> SettingSources { try await SettingSources.load(configFile: config) }

    func resolve(_ settings: SettingSources) async throws -> DataLocation {
        DataLocation(
            dataDirectory: try await settings.string(dataDirectory, "data-dir", default: "parley-data"),
            databaseURL: try await settings.string(databaseURL, "database-url", secret: true).flatMap {
                $0.isEmpty ? nil : $0
            }
        )
    }
}

/// Where the data is: SQLite in a folder, or PostgreSQL.
struct DataLocation {
    var dataDirectory: String
    /// The PostgreSQL URL; nil for SQLite.
    var databaseURL: String?

    /// Seconds PostgreSQL has to answer at start-up.
    static let connectTimeout: Duration = .seconds(10)

    /// Where the data is, for messages (no password).
    var description: String {
        if let databaseURL { return (try? PostgresDatabaseURL(databaseURL).description) ?? "PostgreSQL" }
        return dataDirectory
    }

    /// Opens the store: PostgreSQL with a database URL, else SQLite in the data directory (locked for the server,
    /// `asServer`, so that a second one refuses to start on it). A database that cannot be reached, or a file that is
    /// not Parley's, fails within ``connectTimeout`` with a one-line reason.
    func openStore(logger: Logger, asServer: Bool = false, creation: DatabaseCreation = .ifMissing) async throws
        -> any ParleyStore
    {
        guard let databaseURL else {
            return try openSQLiteStore(in: dataDirectory, creation: creation, lock: asServer)
        }
        return try await PostgresStore.connect(url: databaseURL, logger: logger, timeout: Self.connectTimeout)
    }

    /// Opens the store for the `apps` tools, from their options.
    static func open(_ options: DataOptions) async throws -> (any ParleyStore, DataLocation) {
        let location = try await options.resolve(options.sources())
        return (try await location.openStore(logger: toolLogger()), location)
    }
}

/// Every option of the server.
struct ServeOptions: ParsableArguments {
    static let discussion = """
        Every option can also be set in the environment (PARLEY_ and the option's name in capitals, dashes as \
        underscores: PARLEY_PORT, PARLEY_MAX_REQUEST_BODY_BYTES) or in the config file (--config), keyed by its long \
        name. The command line wins over the environment, the environment over the file.
        """

    @Option(help: "Address to bind (default 127.0.0.1).")
    var hostname: String?

    @Option(help: "Port to bind; 0 picks a free one (default 8080).")
    var port: Int?

    @OptionGroup var data: DataOptions

    @Option(help: "Seconds between the server's WebSocket pings (default 30).")
    var heartbeatSeconds: Int?

    @Option(
        help:
            "Most connections being set up at once (accepted, not yet serving or live); more wait in the kernel's backlog (default \(ServerConfiguration().maxConnectionsInSetup))."
    )
    var maxConnectionsInSetup: Int?

    @Flag(help: "Make a new database in an existing empty parley.sqlite (an empty file is refused otherwise).")
    var createDatabase = false

    @OptionGroup(title: "Connection edge (docs/PROTOCOL.md, Limits)") var edge: EdgeOptions

    @Option(
        help: ArgumentHelp(
            "With PostgreSQL: the NATS servers that the nodes of this database share (nats://HOST:PORT[,nats://...]); several nodes need it, one does not.",
            valueName: "url"))
    var natsUrl: String?

    @Option(help: "With --nats-url: seconds between this node's heartbeats on NATS (default 1).")
    var nodeHeartbeatSeconds: Double?

    @Option(
        help:
            "With --nats-url: seconds without a heartbeat after which the other nodes declare a node dead and its users offline (default 5)."
    )
    var nodeTimeoutSeconds: Double?

    @OptionGroup(title: "Logs and metrics") var observability: ObservabilityOptions

    @Option(help: "Serve the web console (/console/) from this folder instead of the one shipped with the server.")
    var consoleDir: String?

    @Flag(inversion: .prefixedNo, help: "Serve the web console at /console/ (default on).")
    var console: Bool?

    @OptionGroup(title: "Attachments (docs/PROTOCOL.md, Attachments)") var files: FileOptions

    @OptionGroup(title: "Push notifications (APNs); off unless --apns-key-file is given") var apns: APNsOptions

    @OptionGroup(title: "Webhooks (docs/PROTOCOL.md, Webhooks)") var webhooks: WebhookOptions

    func run() async throws {
        let settings = try await data.sources()
        let logging = try await observability.resolve(settings)
        logging.bootstrap()
        let logger = Logger(label: "parley")
        var configuration = ServerConfiguration()
        configuration.hostname = try await settings.string(hostname, "hostname", default: "127.0.0.1")
        configuration.port = try await settings.int(port, "port", default: 8080)
        let location = try await data.resolve(settings)
        configuration.dataDirectory = location.dataDirectory
        configuration.heartbeatInterval = .seconds(
            try await settings.int(heartbeatSeconds, "heartbeat-seconds", default: 30))
        configuration.maxConnectionsInSetup = try await settings.int(
            maxConnectionsInSetup, "max-connections-in-setup", default: configuration.maxConnectionsInSetup
        )
        guard configuration.maxConnectionsInSetup >= 1 else {
            throw ValidationError("--max-connections-in-setup must be at least 1.")
        }
        try await edge.apply(to: &configuration.edge, settings)
        // A push configuration that cannot work stops the start before anything is written.
        configuration.apns = try await apns.configuration(settings)
        try configuration.apns?.validate()
        try await webhooks.apply(to: &configuration.webhooks, settings)
        try await files.apply(to: &configuration.files, settings)
        let consoleOn = try await settings.bool(console, "console", default: true)
        let consoleFolder = try await settings.string(consoleDir, "console-dir")
        configuration.console = consoleOn ? consoleFolder.map { .directory($0) } ?? .bundled : .off
        configuration.metrics = logging.metrics
        configuration.requestLogLevel = logging.requestLogLevel
        configuration.traces = logging.traces
        let create = try await settings.bool(createDatabase ? true : nil, "create-database", default: false)
        let natsURL = try await settings.string(natsUrl, "nats-url")
        let heartbeat = try await settings.double(nodeHeartbeatSeconds, "node-heartbeat-seconds", default: 1)
        let timeout = try await settings.double(nodeTimeoutSeconds, "node-timeout-seconds", default: 5)
        guard heartbeat > 0, timeout > heartbeat else {
            throw ValidationError("--node-timeout-seconds must be longer than --node-heartbeat-seconds (> 0).")
        }
        if natsURL != nil, location.databaseURL == nil {
            throw ValidationError(
                "--nats-url joins the nodes of one PostgreSQL database: give --database-url too (SQLite is one node).")
        }
        try settings.checkEveryFileKeyIsKnown()
        // A taken port stops the start before the database is opened, with one line that says what to do.
        try requireFree(configuration.hostname, configuration.port, option: "--port")
        if let metrics = configuration.metrics.listener {
            try requireFree(metrics.hostname, metrics.port, option: "--metrics-port")
        }

        let store = try await location.openStore(
            logger: logger, asServer: true, creation: create ? .ifMissingOrEmpty : .ifMissing
        )
        if location.databaseURL != nil {
            logger.info("Database: \(location.description) (PostgreSQL)")
        } else {
            logger.info("Data directory: \(location.dataDirectory) (SQLite, WAL)")
        }
        if let app = try await AppProvisioning.ensureDefaultApp(in: store) {
            printKeys(of: app, heading: "Created the default app. Keep these; the keys are not shown again:")
        }
        // On PostgreSQL, the nodes of one database meet on NATS; one node without it claims the database alone.
        let role: NodeRole
        if let postgres = store as? PostgresStore {
            if let natsURL {
                var options = ClusterOptions(natsURL: natsURL, store: postgres)
                options.heartbeatInterval = .milliseconds(Int64(heartbeat * 1000))
                options.nodeTimeout = .milliseconds(Int64(timeout * 1000))
                role = .clustered(options)
                logger.info("Cluster: a node of the deployment of this database, on NATS at \(natsURL)")
            } else {
                role = .alone(claiming: postgres)
            }
        } else {
            role = .single
        }
        let application: ParleyApplication
        do {
            application = try await buildApplication(configuration, store: store, role: role, logger: logger)
        } catch {
            try? await store.close()
            throw error
        }
        do {
            try await application.runService()
        } catch let error as AddressInUseError {
            // Taken between the check and the start.
            logger.debug("\(error)")
            let metricsPort = configuration.metrics.listener.map { " (or the metrics port, \($0.port))" } ?? ""
            throw portInUse(configuration.hostname, configuration.port, option: "--port", also: metricsPort)
        }
        logger.info("Stopped")
    }

    /// Throws the one-line failure of a taken port when `port` on `hostname` cannot be bound now (port 0 always can).
    func requireFree(_ hostname: String, _ port: Int, option: String) throws {
        guard port != 0, !PortProbe.canBind(hostname: hostname, port: port) else { return }
        throw portInUse(hostname, port, option: option)
    }

    func portInUse(_ hostname: String, _ port: Int, option: String, also: String = "") -> ExitCode {
        let line =
            "parley-server: port \(port) on \(hostname) is in use\(also): stop what uses it or choose another "
            + "with \(option)\n"
        FileHandle.standardError.write(Data(line.utf8))
        return ExitCode(1)
    }
}

/// The webhook options of `serve`.
struct WebhookOptions: ParsableArguments {
    @Option(help: "Seconds one webhook request may take, answer included, before it counts as failed (default 10).")
    var webhookTimeoutSeconds: Double?

    @Option(
        help:
            "Most webhook requests in flight at once on this node (default \(WebhookConfiguration().maxConcurrentRequests))."
    )
    var webhookConcurrency: Int?

    @Option(
        help:
            "Attempts after which a webhook delivery is given up (marked failed) (default \(WebhookRetryPolicy().maximumAttempts))."
    )
    var webhookMaxAttempts: Int?

    @Option(
        help:
            "Failed webhook attempts in a row after which an endpoint is disabled (default \(WebhookConfiguration().disableAfterFailures))."
    )
    var webhookDisableAfter: Int?

    func apply(to configuration: inout WebhookConfiguration, _ settings: SettingSources) async throws {
        let timeout = try await settings.double(webhookTimeoutSeconds, "webhook-timeout-seconds", default: 10)
        let concurrency = try await settings.int(
            webhookConcurrency, "webhook-concurrency", default: configuration.maxConcurrentRequests
        )
        let attempts = try await settings.int(
            webhookMaxAttempts, "webhook-max-attempts", default: configuration.retry.maximumAttempts
        )
        let disableAfter = try await settings.int(
            webhookDisableAfter, "webhook-disable-after", default: configuration.disableAfterFailures
        )
        guard timeout > 0, concurrency >= 1, attempts >= 1, disableAfter >= 1 else {
            throw ValidationError("The webhook options must be positive.")
        }
        configuration.requestTimeout = .milliseconds(Int64(timeout * 1000))
        configuration.maxConcurrentRequests = concurrency
        configuration.retry.maximumAttempts = attempts
        configuration.disableAfterFailures = disableAfter
    }
}

/// Where attachments live and how large they may be.
struct FileOptions: ParsableArguments {
    @Option(help: "Folder of the attachments' bytes (default files in the data directory); unused with --s3-endpoint.")
    var filesDir: String?

    @Option(help: "Largest upload in bytes; larger ones get 413 before they are read (default 104857600).")
    var maxFileBytes: Int?

    @Option(help: "Seconds after which an upload that no message carries is removed (default 86400).")
    var unusedUploadRetentionSeconds: Int?

    @Option(help: "Seconds a download link stays valid (default 3600).")
    var fileLinkSeconds: Int?

    @Option(help: "Keep attachments in this S3-compatible storage (http(s)://host:port) instead of on disk.")
    var s3Endpoint: String?

    @Option(help: "The bucket (created if missing) (default parley).")
    var s3Bucket: String?

    @Option(help: "The storage's region (default us-east-1).")
    var s3Region: String?

    @Option(help: "The access key id.")
    var s3AccessKeyId: String?

    @Option(help: "The secret access key.")
    var s3SecretAccessKey: String?

    func apply(to files: inout FileSettings, _ settings: SettingSources) async throws {
        let folder = try await settings.string(filesDir, "files-dir")
        files.maxFileBytes = Int64(try await settings.int(maxFileBytes, "max-file-bytes", default: 100 * 1024 * 1024))
        let retention = try await settings.int(
            unusedUploadRetentionSeconds, "unused-upload-retention-seconds", default: 86400
        )
        let lifetime = try await settings.int(fileLinkSeconds, "file-link-seconds", default: 3600)
        guard files.maxFileBytes >= 1, retention >= 60, lifetime >= 10 else {
            throw ValidationError(
                "--max-file-bytes must be positive, --unused-upload-retention-seconds at least 60, --file-link-seconds at least 10."
            )
        }
        files.unusedUploadRetention = .seconds(retention)
        files.linkLifetime = .seconds(lifetime)
        let endpoint = try await settings.string(s3Endpoint, "s3-endpoint")
        let bucket = try await settings.string(s3Bucket, "s3-bucket", default: "parley")
        let region = try await settings.string(s3Region, "s3-region", default: "us-east-1")
        let keyId = try await settings.string(s3AccessKeyId, "s3-access-key-id")
        let secret = try await settings.string(s3SecretAccessKey, "s3-secret-access-key", secret: true)
        guard let endpoint else {
            files.storage = .disk(folder)
            return
        }
        guard let url = URL(string: endpoint), url.scheme == "http" || url.scheme == "https", url.host != nil else {
            throw ValidationError("--s3-endpoint must be an http(s)://host[:port] URL.")
        }
        guard let keyId, let secret else {
            throw ValidationError("--s3-endpoint needs --s3-access-key-id and --s3-secret-access-key.")
        }
        files.storage = .s3(
            .init(endpoint: url, bucket: bucket, region: region, accessKeyId: keyId, secretAccessKey: secret)
        )
    }
}

extension FileOptions {
    /// Where the attachments' bytes are: a folder on disk (nil with S3), or the bucket they are in (nil on disk).
    func location(_ settings: SettingSources, dataDirectory: String) async throws -> (
        folder: String?, elsewhere: String?
    ) {
        var files = FileSettings()
        try await apply(to: &files, settings)
        switch files.storage {
        case .disk(let folder): return (folder ?? dataDirectory + "/files", nil)
        case .s3(let s3): return (nil, "the S3 bucket \(s3.bucket) at \(s3.endpoint.absoluteString)")
        }
    }
}

/// The APNs options of `serve`.
struct APNsOptions: ParsableArguments {
    @Option(help: "The .p8 signing key from the Apple Developer account.")
    var apnsKeyFile: String?

    @Option(help: "The key's 10-character id.")
    var apnsKeyId: String?

    @Option(help: "The 10-character Team ID.")
    var apnsTeamId: String?

    @Option(help: "The app's bundle id, the apns-topic.")
    var apnsTopic: String?

    @Option(help: "Send to this https:// URL instead of Apple's production and sandbox hosts.")
    var apnsEndpoint: String?

    @Option(help: "PEM file of CA certificates to trust for the APNs connection.")
    var apnsCaFile: String?

    /// The configuration, or nil when no key file is given.
    func configuration(_ settings: SettingSources) async throws -> APNsConfiguration? {
        let keyFile = try await settings.string(apnsKeyFile, "apns-key-file")
        let keyId = try await settings.string(apnsKeyId, "apns-key-id")
        let teamId = try await settings.string(apnsTeamId, "apns-team-id")
        let topic = try await settings.string(apnsTopic, "apns-topic")
        let endpoint = try await settings.string(apnsEndpoint, "apns-endpoint")
        let caFile = try await settings.string(apnsCaFile, "apns-ca-file")
        guard let keyFile, !keyFile.isEmpty else {
            if keyId != nil || teamId != nil || topic != nil || endpoint != nil {
                throw ValidationError("The APNs options need --apns-key-file.")
            }
            return nil
        }
        guard let keyId, let teamId, let topic else {
            throw ValidationError("--apns-key-file needs --apns-key-id, --apns-team-id and --apns-topic.")
        }
        var configuration = APNsConfiguration(keyFile: keyFile, keyId: keyId, teamId: teamId, topic: topic)
        if let endpoint {
            guard let url = URL(string: endpoint) else { throw ValidationError("--apns-endpoint is not a URL.") }
            configuration.endpoint = url
        }
        configuration.trustRootsFile = caFile
        return configuration
    }
}

/// `parley-server backup FOLDER`: the SQLite database as of one commit and the attachments it names, taken while the
/// server runs (``DataBackup``); `backup FILE.sqlite`: the database alone, as before.
struct Backup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Copy the SQLite database and its attachments into a new folder while the server runs (docs/DEPLOYMENT.md, Backup and restore)."
    )
    @OptionGroup var data: DataOptions
    @OptionGroup var files: FileOptions
    @Argument(help: "The new folder (it must not exist); a name ending in .sqlite copies the database alone.")
    var destination: String

    func run() async throws {
        let sources = try await data.sources()
        let location = try await data.resolve(sources)
        guard location.databaseURL == nil else {
            throw ValidationError(
                "The data is in PostgreSQL: back it up with pg_dump (docs/DEPLOYMENT.md, Backup and restore).")
        }
        if destination.hasSuffix(".sqlite") {
            let bytes = try SQLiteBackup.copy(
                databaseAt: location.dataDirectory + "/parley.sqlite", to: destination
            )
            print(
                "Backed up \(location.dataDirectory)/parley.sqlite to \(destination) (\(bytes) bytes); attachments not included (give a folder to include them)."
            )
            return
        }
        let (folder, elsewhere) = try await files.location(sources, dataDirectory: location.dataDirectory)
        let manifest = try DataBackup.backup(
            dataDirectory: location.dataDirectory, filesDirectory: folder, filesElsewhere: elsewhere, into: destination)
        var line =
            "Backed up \(location.dataDirectory) into \(destination): the database and \(manifest.files) attachments (\(manifest.fileBytes) bytes)."
        if !manifest.missingFiles.isEmpty {
            line +=
                " \(manifest.missingFiles.count) attachments the database names were gone or damaged (listed in backup.json)."
        }
        if let elsewhere = manifest.filesElsewhere {
            line += " Attachments are in \(elsewhere), not in the backup: keep them with the bucket's own versioning."
        }
        print(line)
    }
}

/// `parley-server restore FOLDER`: puts a backup's database and attachments into a data directory no server is using.
struct Restore: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Restore a backup folder into the data directory while no server uses it (docs/DEPLOYMENT.md, Backup and restore)."
    )
    @OptionGroup var data: DataOptions
    @OptionGroup var files: FileOptions
    @Flag(help: "Move a database and attachments already there aside (into replaced-<time>/ in the data directory).")
    var replace = false
    @Argument(help: "The folder parley-server backup made.") var source: String

    func run() async throws {
        let sources = try await data.sources()
        let location = try await data.resolve(sources)
        guard location.databaseURL == nil else {
            throw ValidationError(
                "The data is in PostgreSQL: restore it with pg_restore (docs/DEPLOYMENT.md, Backup and restore).")
        }
        let (folder, _) = try await files.location(sources, dataDirectory: location.dataDirectory)
        let restored = try DataBackup.restore(
            from: source, into: location.dataDirectory, filesDirectory: folder, replacing: replace)
        var line = "Restored \(source) into \(location.dataDirectory): the database and \(restored.files) attachments."
        if let aside = restored.replacedInto { line += " What was there is in \(aside)." }
        print(line + " Start the server.")
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
            let (store, _) = try await DataLocation.open(data)
            for app in try await store.apps() { print("\(app.id)\t\(app.name)") }
            try await store.close()
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create an app and print its keys.")
        @OptionGroup var data: DataOptions
        @Argument(help: "The app's name.") var name: String

        func run() async throws {
            let (store, _) = try await DataLocation.open(data)
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
            let (store, location) = try await DataLocation.open(data)
            let app = try await AppProvisioning.rotateKeys(in: store, appId: appId)
            try await store.close()
            guard let app else { throw ValidationError("No app \(appId) in \(location.description).") }
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

    @Option(help: "Largest REST request body in bytes; larger ones get 413 (default \(defaults.maxRequestBodyBytes)).")
    var maxRequestBodyBytes: Int?

    @Option(
        help:
            "Seconds a keep-alive HTTP connection may stay idle between requests (default \(defaults.idleTimeout.components.seconds))."
    )
    var idleTimeoutSeconds: Double?

    @Option(
        help:
            "Seconds a request head may take to arrive (its body: three times as long); past it 408 (default \(defaults.requestHeadTimeout.components.seconds))."
    )
    var requestTimeoutSeconds: Double?

    @Option(help: "New connections per second per client address (0: no limit); past it 429 (default 100).")
    var connectionsPerSecondPerAddress: Double?

    @Option(help: "Connections a client address may open at once before the per-second limit applies (default 500).")
    var connectionBurstPerAddress: Int?

    @Option(help: "Logins per second per client address (0: no limit); past it 429 (default 5).")
    var loginsPerSecondPerAddress: Double?

    @Option(help: "Logins a client address may make at once before the per-second limit applies (default 20).")
    var loginBurstPerAddress: Int?

    @Option(help: "Messages per second one user may send (0: no limit); past it ERR_RATE_LIMITED (default 20).")
    var messagesPerSecondPerUser: Double?

    @Option(help: "Messages a user may send at once before the per-second limit applies (default 100).")
    var messageBurstPerUser: Int?

    @Option(
        help:
            "IP address of a reverse proxy in front of the server (repeatable; comma-separated in the environment): its requests' client is the one X-Forwarded-For names."
    )
    var trustedProxy: [String] = []

    func apply(to limits: inout EdgeLimits, _ settings: SettingSources) async throws {
        let defaults = Self.defaults
        let maxBody = try await settings.int(
            maxRequestBodyBytes, "max-request-body-bytes", default: defaults.maxRequestBodyBytes
        )
        let idle = try await settings.double(
            idleTimeoutSeconds, "idle-timeout-seconds", default: Double(defaults.idleTimeout.components.seconds)
        )
        let request = try await settings.double(
            requestTimeoutSeconds, "request-timeout-seconds",
            default: Double(defaults.requestHeadTimeout.components.seconds)
        )
        guard maxBody >= 1024 else { throw ValidationError("--max-request-body-bytes must be at least 1024.") }
        guard idle > 0, request > 0 else {
            throw ValidationError("--idle-timeout-seconds and --request-timeout-seconds must be positive.")
        }
        limits.maxRequestBodyBytes = maxBody
        let proxies = try await settings.strings(trustedProxy.isEmpty ? nil : trustedProxy, "trusted-proxy")
        limits.trustedProxies = Set(proxies)
        limits.idleTimeout = .milliseconds(Int64(idle * 1000))
        limits.requestHeadTimeout = .milliseconds(Int64(request * 1000))
        limits.requestBodyTimeout = .milliseconds(Int64(request * 3000))
        limits.connectionAttemptsPerAddress = try await Self.limit(
            settings, "connection", "connections-per-second-per-address", connectionsPerSecondPerAddress,
            "connection-burst-per-address", connectionBurstPerAddress, defaults.connectionAttemptsPerAddress
        )
        limits.loginsPerAddress = try await Self.limit(
            settings, "login", "logins-per-second-per-address", loginsPerSecondPerAddress, "login-burst-per-address",
            loginBurstPerAddress, defaults.loginsPerAddress
        )
        limits.messagesPerUser = try await Self.limit(
            settings, "message", "messages-per-second-per-user", messagesPerSecondPerUser, "message-burst-per-user",
            messageBurstPerUser, defaults.messagesPerUser
        )
    }

    private static func limit(
        _ settings: SettingSources, _ name: String, _ rateKey: String, _ rateFlag: Double?, _ burstKey: String,
        _ burstFlag: Int?, _ fallback: RateLimit?
    ) async throws -> RateLimit? {
        let perSecond = try await settings.double(rateFlag, rateKey, default: fallback?.perSecond ?? 0)
        let burst = try await settings.int(burstFlag, burstKey, default: fallback?.burst ?? 0)
        guard perSecond > 0 else { return nil }
        guard burst >= 1 else { throw ValidationError("--\(burstKey) must be at least 1 when its rate is on.") }
        return RateLimit(perSecond: perSecond, burst: burst)
    }
}

/// Logs (level, text or JSON, request logs) and metrics (where `/metrics` is served).
struct ObservabilityOptions: ParsableArguments {
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (default info).")
    var logLevel: String?

    @Option(help: "Log format: text, or json (one object per line) (default text).")
    var logFormat: String?

    @Option(help: "Level of the one-line log of each HTTP request (default debug: shown with --log-level debug).")
    var requestLogLevel: String?

    @Option(help: "Serve GET /metrics on the main port to requests with `Authorization: Bearer <this token>`.")
    var metricsToken: String?

    @Option(help: "Serve GET /metrics, without a token, on a listener of its own on this port (0 picks one).")
    var metricsPort: Int?

    @Option(help: "Address of the metrics listener (default 127.0.0.1).")
    var metricsHostname: String?

    @Option(
        help: """
            Export traces (spans of HTTP requests and WebSocket commands) over OTLP/HTTP to this URL, e.g. \
            http://127.0.0.1:4318/v1/traces (default: no traces).
            """)
    var traceEndpoint: String?

    @Option(help: "Encoding of exported spans: http/protobuf or http/json (default http/protobuf).")
    var traceProtocol: String?

    @Option(help: "Share of new traces kept, 0 to 1 (default 1); a request's traceparent decides for its own.")
    var traceSampleRatio: Double?

    struct Resolved {
        var level: Logger.Level
        var json: Bool
        var requestLogLevel: Logger.Level
        var metrics: MetricsExposure
        var traces: TraceExport?

        func bootstrap() {
            let (level, json) = (level, json)
            LoggingSystem.bootstrap { label in
                var handler: any LogHandler =
                    json ? JSONLogHandler.standardError(label: label) : StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            }
        }
    }

    func resolve(_ settings: SettingSources) async throws -> Resolved {
        func level(_ flag: String?, _ key: String, _ fallback: Logger.Level) async throws -> Logger.Level {
            let name = try await settings.string(flag, key, default: fallback.rawValue)
            guard let level = Logger.Level(rawValue: name) else {
                throw ValidationError(
                    "Unknown --\(key) \(name) (trace, debug, info, notice, warning, error, critical).")
            }
            return level
        }
        let format = try await settings.string(logFormat, "log-format", default: "text")
        guard format == "text" || format == "json" else {
            throw ValidationError("Unknown --log-format \(format) (text or json).")
        }
        var metrics = MetricsExposure()
        metrics.token = try await settings.string(metricsToken, "metrics-token", secret: true).flatMap {
            $0.isEmpty ? nil : $0
        }
        let port = try await settings.int(metricsPort, "metrics-port", default: -1)
        let host = try await settings.string(metricsHostname, "metrics-hostname", default: "127.0.0.1")
        if port >= 0 { metrics.listener = (host, port) }
        if let token = metrics.token, token.utf8.count < 16 {
            throw ValidationError("--metrics-token must be at least 16 characters.")
        }
        var traces: TraceExport?
        if let endpoint = try await settings.string(traceEndpoint, "trace-endpoint"), !endpoint.isEmpty {
            guard let url = URL(string: endpoint), url.scheme == "http" || url.scheme == "https", url.host != nil else {
                throw ValidationError("--trace-endpoint must be an http:// or https:// URL.")
            }
            var export = TraceExport(endpoint: endpoint)
            let encoding = try await settings.string(traceProtocol, "trace-protocol", default: "http/protobuf")
            guard let known = TraceExport.Encoding(rawValue: encoding) else {
                throw ValidationError("Unknown --trace-protocol \(encoding) (http/protobuf or http/json).")
            }
            export.encoding = known
            export.sampleRatio = try await settings.double(traceSampleRatio, "trace-sample-ratio", default: 1)
            guard (0...1).contains(export.sampleRatio) else {
                throw ValidationError("--trace-sample-ratio must be between 0 and 1.")
            }
            traces = export
        }
        return Resolved(
            level: try await level(logLevel, "log-level", .info), json: format == "json",
            requestLogLevel: try await level(requestLogLevel, "request-log-level", .debug), metrics: metrics,
            traces: traces
        )
    }
}

/// Whether a listener could bind an address now: a socket with `SO_REUSEADDR` (as the server's listener has) bound to
/// its first address, then closed. Only `EADDRINUSE` counts as taken; anything else is left to the server to report.
enum PortProbe {
    static func canBind(hostname: String, port: Int) -> Bool {
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        hints.ai_family = AF_UNSPEC
        #if os(Linux)
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
            hints.ai_socktype = SOCK_STREAM
        #endif
        var addresses: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(hostname, String(port), &hints, &addresses) == 0, let first = addresses else { return true }
        defer { freeaddrinfo(addresses) }
        let descriptor = socket(first.pointee.ai_family, first.pointee.ai_socktype, first.pointee.ai_protocol)
        guard descriptor >= 0 else { return true }
        defer { close(descriptor) }
        var one: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        return bind(descriptor, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 || errno != EADDRINUSE
    }
}
