import HTTPTypes
import OpenAPIRuntime

/// Treats a request body of zero bytes as no body, so that operations whose body is optional accept a bare
/// `POST` (the Hummingbird transport always passes a body, even an empty one). In HTTP/1.1 a request without
/// `Content-Length` and `Transfer-Encoding` has no body.
struct EmptyBodyMiddleware: ServerMiddleware {
    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, metadata: ServerRequestMetadata, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        let framed = request.headerFields[.contentLength] != nil || request.headerFields[.transferEncoding] != nil
        if let body, !framed || body.length == .known(0) {
            return try await next(request, nil, metadata)
        }
        return try await next(request, body, metadata)
    }
}
