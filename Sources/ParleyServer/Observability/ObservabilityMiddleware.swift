import Dispatch
import HTTPTypes
import Hummingbird
import Logging

/// Counts and times every HTTP request by route pattern, method and status (`parley_http_requests_total`,
/// `parley_http_request_duration_seconds`), and logs one line per request at the operator's level
/// (`--request-log-level`) with the request id Hummingbird gives it (`hb.request.id`).
///
/// Like Hummingbird's `MetricsMiddleware` and `LogRequestsMiddleware` together, but into this server's own metrics
/// factory (``ServerMetrics``) rather than the process-wide one, so that several servers in one process keep their
/// figures apart. The log line names the method, the path without its query, the status and the duration: no
/// headers, no query strings, no bodies, so no credentials (tested).
struct ObservabilityMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: ServerMetrics
    let level: Logger.Level

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let started = DispatchTime.now().uptimeNanoseconds
        let response = try await next(request, context)
        let elapsed = Int64(DispatchTime.now().uptimeNanoseconds - started)
        // Routes the router does not know all count as one series, whatever the path.
        let route = context.endpointPath ?? "unmatched"
        metrics.httpRequest(
            route: route, method: request.method.rawValue, status: response.status.code, nanoseconds: elapsed
        )
        context.logger.log(
            level: level, "\(request.method) \(request.uri.path) \(response.status.code)",
            metadata: ["route": "\(route)", "ms": "\(Double(elapsed / 1000) / 1000)"]
        )
        return response
    }
}
