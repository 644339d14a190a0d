import ArgumentParser
import Foundation
import NIOCore

/// Which server to drive: one the bench starts (the default) or one it attaches to.
struct ServerOptions: ParsableArguments {
    @Option(help: "Attach to this running server instead of starting one (e.g. http://127.0.0.1:8080).")
    var serverURL: String?

    @Option(name: .customLong("server-pid"), help: "The attached server's pid, for its resident memory.")
    var serverPID: Int32?

    @Option(name: .customLong("app-id"), help: "App ID of the attached server's app (env PARLEY_APP_ID).")
    var appIdOption: String?

    @Option(name: .customLong("rest-api-key"), help: "REST API key of that app (env PARLEY_REST_API_KEY).")
    var restAPIKeyOption: String?

    @Option(help: "The parley-server to start (default: the one next to parley-bench).")
    var serverBinary: String?

    @Option(
        name: .customLong("database-url"),
        help: """
            Storage of the started server: passed to it as --database-url (PostgreSQL). Without it: SQLite in a \
            temporary directory. (env PARLEY_BENCH_DATABASE_URL)
            """
    )
    var databaseURLOption: String?

    @Option(
        name: .customLong("nats-url"),
        help: """
            NATS servers for the started nodes, passed to each as --nats-url (several nodes need it, e.g. a \
            `nats-server -p 4222` of your own: nats://127.0.0.1:4222). (env PARLEY_BENCH_NATS_URL)
            """
    )
    var natsURLOption: String?

    @Option(
        name: .customLong("server-arg"), parsing: .unconditionalSingleValue,
        help: "An extra argument for the started server (repeatable)."
    )
    var serverArguments: [String] = []

    var appId: String? { appIdOption ?? ProcessInfo.processInfo.environment["PARLEY_APP_ID"] }
    var restAPIKey: String? { restAPIKeyOption ?? ProcessInfo.processInfo.environment["PARLEY_REST_API_KEY"] }
    var natsURL: String? {
        natsURLOption ?? ProcessInfo.processInfo.environment["PARLEY_BENCH_NATS_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }
    var databaseURL: String? {
        databaseURLOption
            ?? ProcessInfo.processInfo.environment["PARLEY_BENCH_DATABASE_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }
}

/// How the clients connect and how long anything may take.
struct ClientOptions: ParsableArguments {
    @Option(help: "Client source addresses, comma-separated (one address gives ~28,000 ports to one server port).")
    var sourceAddresses: String = "127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5"

    @Option(help: "Client event-loop threads (default: the number of cores).")
    var threads: Int = System.coreCount

    @Option(help: "Connection attempts in flight at once.")
    var concurrency: Int = 256

    @Option(help: "Seconds one connection attempt may take (TCP + upgrade + connect/hello).")
    var connectTimeout: Int = 10

    @Option(help: "Seconds the whole run may take; past it the bench kills its server and exits with status 3.")
    var timeout: Int = 300

    @Option(help: "Write the figures to this JSON file as well.")
    var json: String?

    var sources: [String] {
        sourceAddresses.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }
}
