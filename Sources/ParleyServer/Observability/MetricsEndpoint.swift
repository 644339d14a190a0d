import Crypto
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ParleyProtocol
import ParleyStore
import ServiceLifecycle

/// `GET /metrics`: the Prometheus text (version 0.0.4) of ``ServerMetrics``, with the gauges read at the moment of
/// the scrape. Served on the main port to `Authorization: Bearer <token>` (``MetricsExposure/token``; a missing or wrong
/// token is 401 `ERR_AUTH_REQUIRED`), and/or on a listener of its own without a token (``MetricsListener``).
struct MetricsEndpoint: Sendable {
    static let path = "metrics"

    let metrics: ServerMetrics
    /// Sets the gauges (open connections, in setup, queued bytes) just before they are printed.
    let refresh: @Sendable () -> Void

    func response() -> Response {
        let text = metrics.exposition(refresh: refresh)
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: text))
        )
    }

    /// The token-guarded route on the main router.
    func register<Context: RequestContext>(on router: Router<Context>, token: String) {
        let expected = Array(SHA256.hash(data: Array(token.utf8)))
        router.get(RouterPath(Self.path)) { request, _ in
            let given = RequestCredentials.bearer(fromAuthorization: request.headers[.authorization]) ?? ""
            guard Secrets.constantTimeEquals(Array(SHA256.hash(data: Array(given.utf8))), expected) else {
                throw DomainError(.authRequired, "GET /metrics needs Authorization: Bearer <the metrics token>.")
            }
            return response()
        }
    }

    /// The router of the metrics listener: `GET /metrics`, nothing else.
    func listenerRouter() -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        router.get(RouterPath(Self.path)) { _, _ in response() }
        return router
    }
}
