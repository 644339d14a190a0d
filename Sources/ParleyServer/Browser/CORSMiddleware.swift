import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore

/// CORS for the REST API (docs/PROTOCOL.md, "Browsers"): a page may call the API from an origin its app allows.
///
/// - A preflight (`OPTIONS` with `Access-Control-Request-Method`) is answered here: 204 with the methods and the
///   headers a page may use (`Authorization`, `Content-Type`; not `X-Parley-Api-Key`: the REST API key is a
///   server's secret and no page of another origin gets to send it) when some app allows the origin, else 403
///   `ERR_ORIGIN_NOT_ALLOWED`. A preflight carries no credentials, so it cannot name its app.
/// - Any other request runs; its answer carries `Access-Control-Allow-Origin` when the app it authenticated as (or,
///   before authentication, any app) allows the origin. Without it the browser keeps the answer from the page.
///
/// No cookies are used, so credentials are never allowed (`Access-Control-Allow-Credentials` is not sent). Requests
/// without `Origin` (every non-browser client) pass untouched.
struct CORSMiddleware<Context: RequestContext>: RouterMiddleware {
    let origins: AllowedOrigins

    static var allowedMethods: String { "GET, POST, PUT, PATCH, DELETE" }
    static var allowedHeaders: String { "Authorization, Content-Type" }
    /// Seconds a browser may reuse a preflight's answer.
    static var maxAge: String { "600" }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard let origin = request.headers[.origin] else { return try await next(request, context) }
        if request.method == .options, request.headers[.accessControlRequestMethod] != nil {
            return await preflight(origin: origin)
        }
        let app = RequestApp()
        var response = try await RequestApp.$current.withValue(app) { try await next(request, context) }
        response.headers.append(HTTPField(name: .vary, value: "Origin"))
        if await origins.allows(origin, appId: app.appId) {
            response.headers[.accessControlAllowOrigin] = origin
            response.headers[.accessControlExposeHeaders] = "Retry-After"
        }
        return response
    }

    private func preflight(origin: String) async -> Response {
        guard await origins.allows(origin, appId: nil) else {
            var response = ErrorMiddleware<Context>.response(
                .forbidden,
                ErrorResponse(
                    code: .originNotAllowed,
                    message: "No app allows pages of this origin to call the REST API (PATCH /v1/app allowedOrigins)."
                )
            )
            response.headers[.vary] = "Origin"
            return response
        }
        return Response(
            status: .noContent,
            headers: [
                .accessControlAllowOrigin: origin, .accessControlAllowMethods: Self.allowedMethods,
                .accessControlAllowHeaders: Self.allowedHeaders, .accessControlMaxAge: Self.maxAge, .vary: "Origin",
            ]
        )
    }
}
