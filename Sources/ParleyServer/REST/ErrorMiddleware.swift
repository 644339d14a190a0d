import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import OpenAPIRuntime
import ParleyProtocol
import ParleyStore

extension ErrorCode {
    /// The HTTP status of a REST error with this code.
    var httpStatus: HTTPResponse.Status {
        switch self {
        case .authRequired, .authTokenInvalid, .authKeyInvalid, .apiKeyInvalid: return .unauthorized
        case .forbidden, .notAParticipant, .blocked, .muted, .banned, .originNotAllowed, .userDeactivated:
            return .forbidden
        case .invalidAppID, .uidNotFound, .tokenNotFound, .deviceNotFound, .conversationNotFound, .messageNotFound,
            .reportNotFound, .webhookNotFound, .banNotFound, .notFound:
            return .notFound
        case .uidAlreadyExists, .reactionLimit, .pinLimit, .blockLimit, .webhookLimit, .attachmentInUse:
            return .conflict
        case .messageDeleted: return .gone
        case .messageTooLarge: return .contentTooLarge
        case .rateLimited: return .tooManyRequests
        case .requestTooLarge, .fileTooLarge: return .contentTooLarge
        case .lengthRequired: return .lengthRequired
        case .attachmentNotFound: return .notFound
        case .linkInvalid: return .forbidden
        case .requestTimeout: return .requestTimeout
        case .uriTooLong: return .uriTooLong
        case .headersTooLarge: return .requestHeaderFieldsTooLarge
        case .notImplemented: return .notImplemented
        case .httpVersionNotSupported: return .httpVersionNotSupported
        case .serverShuttingDown, .notReady, .databaseUnavailable, .searchTimeout: return .serviceUnavailable
        case .internalError: return .internalServerError
        case .storageFull: return HTTPResponse.Status(code: 507, reasonPhrase: "Insufficient Storage")
        default: return .badRequest
        }
    }
}

/// Turns every failure of a request into a JSON error body with a documented code, whatever raised it: a
/// domain rule, a request the OpenAPI layer could not decode, an unknown route, or an unexpected failure
/// (logged, and answered without details).
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        do {
            return try await next(request, context)
        } catch {
            let (status, body) = describe(error, request: request)
            return Self.response(status, body)
        }
    }

    /// The JSON error response of a refusal.
    static func response(_ status: HTTPResponse.Status, _ body: ErrorResponse) -> Response {
        var buffer = ByteBuffer()
        buffer.writeBytes((try? WireCoding.encode(body)) ?? [])
        var headers: HTTPFields = [.contentType: "application/json; charset=utf-8"]
        if let retryAfterMs = body.error.retryAfterMs {
            headers[.retryAfter] = "\(max(1, (retryAfterMs + 999) / 1000))"
        }
        return Response(status: status, headers: headers, body: .init(byteBuffer: buffer))
    }

    private func describe(_ error: any Error, request: Request) -> (HTTPResponse.Status, ErrorResponse) {
        switch error {
        case let refusal as DomainError:
            return (refusal.code.httpStatus, Self.response(refusal))
        case let serverError as ServerError:
            if let refusal = serverError.underlyingError as? DomainError {
                return (refusal.code.httpStatus, Self.response(refusal))
            }
            if serverError.operationInput == nil {
                // The request never reached its handler: its parameters or body do not match the API document.
                return (.badRequest, ErrorResponse(code: .badRequest, message: serverError.causeDescription))
            }
            return unexpected(serverError.underlyingError, request: request)
        case let httpError as HTTPError where httpError.status == .notFound:
            return (
                .notFound, ErrorResponse(code: .notFound, message: "No route \(request.method) \(request.uri.path).")
            )
        case let httpError as HTTPError where httpError.status.code < 500:
            return (
                httpError.status,
                ErrorResponse(code: .badRequest, message: httpError.body ?? httpError.status.reasonPhrase)
            )
        default:
            return unexpected(error, request: request)
        }
    }

    private static func response(_ refusal: DomainError) -> ErrorResponse {
        ErrorResponse(
            code: refusal.code, message: refusal.message, retryAfterMs: refusal.retryAfter?.roundedUpMilliseconds
        )
    }

    private func unexpected(_ error: any Error, request: Request) -> (HTTPResponse.Status, ErrorResponse) {
        logger.error(
            "Request failed",
            metadata: ["method": "\(request.method)", "path": "\(request.uri.path)", "error": "\(error)"]
        )
        return (
            .internalServerError,
            ErrorResponse(code: .internalError, message: "The server could not complete the request.")
        )
    }
}
