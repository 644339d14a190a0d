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

/// On graceful shutdown, closes every WebSocket with 1001 (refusing new ones) and waits at most the close timeout
/// until they are gone; what is left then is dropped. One second later every connection still open (an HTTP request
/// that has not finished) is closed too: shutdown never waits longer than the close timeout plus one second for the
/// network (docs/PROTOCOL.md, "Limits"). Cancelled instead, it sends the 1001 and drops the WebSockets at once.
struct SocketCloser: Service {
    let sockets: SocketRegistry
    let admission: AdmissionGate
    let readiness: Readiness
    let closeTimeout: Duration
    let logger: Logger

    func run() async throws {
        try? await gracefulShutdown()
        // A server that never listened (its port is taken, say) has nothing to shut down: saying so would mislead.
        let served = readiness.current == .serving
        // Not ready from now on: load balancers stop sending clients while these close.
        readiness.markDraining()
        if served { logger.info("Shutting down: closing \(sockets.count) WebSocket connection(s)") }
        let deadline = ContinuousClock.now + closeTimeout
        admission.closeEveryConnection(after: (closeTimeout + .seconds(1)).timeAmount)
        sockets.closeAll(code: WebSocketCloseCode.goingAway, reason: .serverShuttingDown)
        while sockets.count > 0, ContinuousClock.now < deadline {
            // Cancelled (another service failed) rather than shut down: stop now. The sleep would throw at once on
            // every round, and the loop spin until the deadline.
            do { try await Task.sleep(for: .milliseconds(20)) } catch { break }
        }
        sockets.closeChannels()
    }
}
