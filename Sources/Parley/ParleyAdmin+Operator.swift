import ParleyAPI
import ParleyAPIClient
import ParleyProtocol

/// The app as its operator sees it (docs/PROTOCOL.md, "The app's operator"): its figures, the web origins allowed to
/// call the REST API, its keys, and every user and conversation of it.
extension ParleyAdmin {
    /// The app, its allowed origins, and its stored and live figures (the live ones of the node that answers).
    public func app() async throws -> AppOverview {
        try await rest.call { try await $0.getAppSettings().ok.body.json }
    }

    /// Replaces the web origins whose pages may call the REST API (`https://chat.example.com`, or `*`); the answer
    /// has them as stored (normalized).
    @discardableResult
    public func setAllowedOrigins(_ origins: [String]) async throws -> AppOverview {
        let body = UpdateAppSettingsRequest(allowedOrigins: origins)
        return try await rest.call { try await $0.updateAppSettings(body: .json(body)).ok.body.json }
    }

    /// New keys for the app: the old Auth Key and REST API key stop working at once (this client's included: make a
    /// new `ParleyAdmin` with the new key). Auth tokens already issued stay valid.
    public func rotateKeys() async throws -> AppKeys {
        try await rest.call { try await $0.rotateAppKeys().ok.body.json }
    }

    /// A page of the app's users in uid order.
    public func users(limit: Int = 50, cursor: String? = nil) async throws -> UserList {
        try await rest.call { try await $0.listUsers(query: .init(limit: limit, cursor: cursor)).ok.body.json }
    }
}

extension ParleyAdmin {
    /// Deactivates a user: their tokens are revoked and their connections closed (4001 `ERR_USER_DEACTIVATED`); they
    /// cannot log in or get a token until ``reactivateUser(uid:)``. Their conversations and messages stay.
    @discardableResult
    public func deactivateUser(uid: String) async throws -> User {
        try await rest.call { try await $0.deactivateUser(path: .init(uid: uid)).ok.body.json }
    }

    /// Reactivates a deactivated user: they log in again as before.
    @discardableResult
    public func reactivateUser(uid: String) async throws -> User {
        try await rest.call { try await $0.reactivateUser(path: .init(uid: uid)).ok.body.json }
    }
}
