import Foundation
import ParleyProtocol
import ParleyStore

/// Who is calling the REST API.
enum Caller: Sendable {
    /// A user with an auth token.
    case user(UserPrincipal)
    /// The app's own server, with the REST API key.
    case server(appId: String)

    /// Whether the caller is the user `uid`; nil for the app's server.
    func isUser(_ uid: String) -> Bool? {
        guard case .user(let principal) = self else { return nil }
        return principal.uid == uid
    }

    var appId: String {
        switch self {
        case .user(let principal): return principal.appId
        case .server(let appId): return appId
        }
    }
}

/// Checks credentials against the store.
struct Authenticator: Sendable {
    let store: any ParleyStore
    let time: ServerClock

    /// The user of an auth token; `ERR_AUTH_REQUIRED` without one, `ERR_AUTH_TOKEN_INVALID` for an unknown,
    /// revoked or expired token.
    func user(token: String?) async throws -> UserPrincipal {
        let principal = try principal(of: try await store.token(hash: Self.hash(of: token)))
        RequestApp.record(principal.appId)
        return principal
    }

    /// The hash a token is stored under; `ERR_AUTH_REQUIRED` without a token.
    static func hash(of token: String?) throws -> [UInt8] {
        guard let token else {
            throw DomainError(
                .authRequired, "Send an auth token: Authorization: Bearer <token> (on a WebSocket: or connect's token)."
            )
        }
        return Secrets.hash(token)
    }

    /// The user of a token record read from the store; `ERR_AUTH_TOKEN_INVALID` for none, or a revoked or expired one.
    func principal(of record: TokenRecord?) throws -> UserPrincipal {
        guard let record, record.isValid(at: time.epochMilliseconds()) else {
            throw DomainError(.authTokenInvalid, "The auth token is unknown, revoked or expired.")
        }
        return UserPrincipal(appId: record.appId, uid: record.uid, tokenId: record.id, expiresAt: record.expiresAt)
    }

    /// The app of a REST API key; `ERR_AUTH_REQUIRED` without one, `ERR_API_KEY_INVALID` for an unknown key.
    func server(apiKey: String?) async throws -> String {
        guard let apiKey else { throw DomainError(.authRequired, "Send the REST API key: X-Parley-Api-Key.") }
        guard let app = try await store.app(restAPIKeyHash: Secrets.hash(apiKey)) else {
            throw DomainError(.apiKeyInvalid, "The REST API key is not valid.")
        }
        RequestApp.record(app.id)
        return app.id
    }

    /// A user or the app's server, whichever credential the request carries (the API key wins).
    func caller(_ credentials: RequestCredentials) async throws -> Caller {
        if credentials.apiKey != nil { return .server(appId: try await server(apiKey: credentials.apiKey)) }
        return .user(try await user(token: credentials.bearerToken))
    }
}
