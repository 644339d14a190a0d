import Foundation
import HTTPTypes
import OpenAPIRuntime
import OpenAPIURLSession
import ParleyAPI
import ParleyAPIClient

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The REST API, through the client generated from the server's OpenAPI document, with Parley's credentials
/// added to each request and every error turned into a ``ParleyError``.
struct RESTClient: Sendable {
    let api: Client
    let credentials: @Sendable () -> (authToken: String?, apiKey: String?)
    /// Called when the server refuses the user's token (`ERR_AUTH_TOKEN_INVALID`) with that token: true when there is
    /// a fresh one to try again with (the client's token provider), false to give up.
    let tokenRejected: (@Sendable (String) async -> Bool)?

    /// - Parameters:
    ///   - serverURL: The server.
    ///   - credentials: Read at each request: the user's token and/or the app's REST API key.
    ///   - tokenRejected: Refreshes a refused token; a call refused for its token is tried again once when it
    ///     returns true (a request refused for its token was not carried out, so trying it again is safe).
    init(
        serverURL: URL, credentials: @escaping @Sendable () -> (authToken: String?, apiKey: String?),
        tokenRejected: (@Sendable (String) async -> Bool)? = nil
    ) {
        self.credentials = credentials
        self.tokenRejected = tokenRejected
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 20
        api = Client(
            parley: serverURL,
            transport: URLSessionTransport(configuration: .init(session: URLSession(configuration: configuration))),
            middlewares: [CredentialsMiddleware(credentials: credentials), ErrorBodyMiddleware()]
        )
    }

    /// Runs a call, turning whatever it throws into a ``ParleyError``.
    func call<T: Sendable>(_ operation: (Client) async throws -> T) async throws -> T {
        let token = credentials().authToken
        do {
            return try await operation(api)
        } catch {
            let failure = Self.parleyError(error)
            guard failure.code == .authTokenInvalid, let token, let tokenRejected, await tokenRejected(token) else {
                throw failure
            }
        }
        do {
            return try await operation(api)
        } catch {
            throw Self.parleyError(error)
        }
    }

    static func parleyError(_ error: any Error) -> ParleyError {
        if let error = error as? ParleyError { return error }
        if let error = error as? ClientError {
            if let underlying = error.underlyingError as? ParleyError { return underlying }
            if error.response == nil {
                return ParleyError(
                    .serverUnreachable, "The server could not be reached.", underlying: "\(error.underlyingError)"
                )
            }
            return ParleyError(
                .unexpectedResponse, "The server's answer could not be read.", underlying: "\(error.underlyingError)"
            )
        }
        return ParleyError(.unexpectedResponse, "The server answered unexpectedly.", underlying: "\(error)")
    }
}

/// Adds `Authorization: Bearer` and `X-Parley-Api-Key` when they are known.
private struct CredentialsMiddleware: ClientMiddleware {
    let credentials: @Sendable () -> (authToken: String?, apiKey: String?)

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        let (token, apiKey) = credentials()
        if let token { request.headerFields[.authorization] = "Bearer \(token)" }
        if let apiKey { request.headerFields[HTTPField.Name("X-Parley-Api-Key")!] = apiKey }
        return try await next(request, body, baseURL)
    }
}

/// Turns an error response (status 400 and up) into the ``ParleyError`` its body describes.
private struct ErrorBodyMiddleware: ClientMiddleware {
    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        let (response, responseBody) = try await next(request, body, baseURL)
        guard response.status.code >= 400 else { return (response, responseBody) }
        var bytes: [UInt8] = []
        if let responseBody { bytes = try await [UInt8](collecting: responseBody, upTo: 1 << 20) }
        if let decoded = try? WireCoding.decode(ErrorResponse.self, from: bytes) {
            throw ParleyError(
                decoded.error.code, decoded.error.message, status: response.status.code,
                retryAfter: decoded.error.retryAfterMs.map { .milliseconds($0) }
            )
        }
        throw ParleyError(
            .unexpectedResponse, "The server answered \(response.status.code) without an error body.",
            status: response.status.code
        )
    }
}
