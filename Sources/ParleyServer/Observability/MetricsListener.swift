import Crypto
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ParleyProtocol
import ParleyStore
import ServiceLifecycle

/// The metrics listener (`--metrics-port`): a small HTTP server of its own, so that `/metrics` can be bound to an
/// address only the monitoring system reaches. Idle connections close after 60 s, and it stops with the server.
struct MetricsListener: Service {
    let application: Application<RouterResponder<BasicRequestContext>>

    init(
        endpoint: MetricsEndpoint, hostname: String, port: Int, logger: Logger,
        onRunning: @escaping @Sendable (Int) async -> Void
    ) {
        application = Application(
            router: endpoint.listenerRouter(),
            server: .http1(configuration: .init(idleTimeout: .seconds(60))),
            configuration: .init(address: .hostname(hostname, port: port), serverName: "Parley metrics"),
            onServerRunning: { channel in
                let bound = channel.localAddress?.port ?? port
                logger.info("Metrics on http://\(hostname):\(bound)/metrics")
                await onRunning(bound)
            },
            logger: logger
        )
    }

    func run() async throws {
        try await application.run()
    }
}
