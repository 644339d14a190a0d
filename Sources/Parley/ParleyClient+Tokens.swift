import Foundation
import NIOConcurrencyHelpers
import ParleyAPI
import ParleyAPIClient

/// Tokens that expire: the app's token provider, asked for a fresh token before the current one expires and when the
/// server refuses it (docs/SDK.md, "Tokens that expire").
extension ParleyClient {
    /// Gives the SDK where fresh auth tokens come from, or takes it back (nil), for the signed-in user and every
    /// later one (``AppSettings/tokenProvider`` sets it from the start).
    ///
    /// With a provider, the SDK asks it for a fresh token `tokenRefreshLead` before the token expires (the server's
    /// hello says when) and whenever the server refuses the token (a socket closed with 4001, a request answered
    /// 401 `ERR_AUTH_TOKEN_INVALID`), one request at a time; it checks the token is the same user's, saves it,
    /// reconnects and resumes from its positions, so nothing is missed. A request refused for its token is sent
    /// again once with the fresh one. A provider that fails `maximumTokenRefreshFailures` times in a row stops the
    /// connection with ``ConnectionStatus/failed(_:)`` and `ERR_TOKEN_REFRESH_FAILED`.
    public func setTokenProvider(_ provider: TokenProvider?) async {
        state.withLockedValue { $0.tokenProvider = provider }
        await driver.tokenProviderChanged(present: provider != nil)
    }

    /// Logs in as `uid` with a token from `tokenProvider`, and keeps the provider for the tokens that follow
    /// (``setTokenProvider(_:)``). Saves the user and opens the socket.
    ///
    /// - Throws: the provider's error; `ERR_TOKEN_REFRESH_FAILED` when its token is another user's; the server's
    ///   errors (`ERR_AUTH_TOKEN_INVALID` ...).
    @discardableResult
    public func login(uid: String, tokenProvider: @escaping TokenProvider) async throws -> User {
        let token = try await tokenProvider(uid)
        let user = try await Self.user(of: token, serverURL: settings.serverURL)
        guard user.uid == uid else {
            throw ParleyError(.tokenRefreshFailed, "The token provider gave a token for another user.")
        }
        await setTokenProvider(tokenProvider)
        return try await establish(user: user, authToken: token)
    }

    /// The user a token belongs to (`GET /v1/me`).
    static func user(of token: String, serverURL: URL) async throws -> User {
        let probe = RESTClient(serverURL: serverURL) { (token, nil) }
        return try await probe.call { try await $0.getMe().ok.body.json }
    }

    /// Asks the provider for a fresh token for the signed-in user, checks it is theirs, and makes it the session's
    /// (saved, as a login's is). Throws when there is no session or provider, when the provider throws, when the
    /// server refuses the token or it is another user's, and when the session changed meanwhile.
    static func refreshToken(
        state: NIOLockedValueBox<ClientState>, sessionStore: SessionStore, serverURL: URL
    ) async throws {
        let start = state.withLockedValue { state -> (StoredSession, TokenProvider, Int)? in
            guard let session = state.session, let provider = state.tokenProvider else { return nil }
            return (session, provider, state.sessionEpoch)
        }
        guard let (session, provider, epoch) = start else {
            throw ParleyError(.notLoggedIn, "No signed-in user or no token provider.")
        }
        let token = try await provider(session.user.uid)
        let user = try await user(of: token, serverURL: serverURL)
        guard user.uid == session.user.uid else {
            throw ParleyError(.tokenRefreshFailed, "The token provider gave a token for another user.")
        }
        try state.withLockedValue { state in
            // Saved under the lock that logins and logouts change the epoch under: a token never lands on the disk
            // after its session was replaced or forgotten.
            guard state.sessionEpoch == epoch, var current = state.session else {
                throw ParleyError(.notLoggedIn, "The session changed while its token was refreshed.")
            }
            current.authToken = token
            current.user = user
            try sessionStore.save(current)
            state.session = current
        }
    }
}
