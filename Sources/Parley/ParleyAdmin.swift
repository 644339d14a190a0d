import Foundation
import ParleyAPI
import ParleyAPIClient

/// Server-to-server calls with the app's secret REST API key: create users, issue and revoke auth tokens.
///
/// For your backend (or the `parley admin` commands), never for an app on a user's device.
///
/// ```swift
/// let admin = ParleyAdmin(serverURL: url, restAPIKey: key)
/// try await admin.createUser(uid: "bob", name: "Bob")
/// let token = try await admin.issueAuthToken(uid: "bob").authToken   // give it to Bob's app
/// ```
public struct ParleyAdmin: Sendable {
    let rest: RESTClient
    /// The attachment routes, with the same key.
    let files: FileTransfer

    /// A client of the server at `serverURL` with the app's REST API key.
    public init(serverURL: URL, restAPIKey: String) {
        rest = RESTClient(serverURL: serverURL) { (nil, restAPIKey) }
        files = FileTransfer(serverURL: serverURL) { (nil, restAPIKey) }
    }

    /// Creates a user; `ERR_UID_ALREADY_EXISTS` when the uid is taken.
    @discardableResult
    public func createUser(uid: String, name: String? = nil, avatarURL: String? = nil, metadata: JSONValue? = nil)
        async throws -> User
    {
        let body = CreateUserRequest(uid: uid, name: name, avatarURL: avatarURL, metadata: metadata)
        return try await rest.call { try await $0.createUser(body: .json(body)).created.body.json }
    }

    /// A user of the app; `ERR_UID_NOT_FOUND` when there is none with this uid.
    public func user(uid: String) async throws -> User {
        try await rest.call { try await $0.getUser(path: .init(uid: uid)).ok.body.json }
    }

    /// Updates a user's profile.
    @discardableResult
    public func updateUser(uid: String, name: String? = nil, avatarURL: String? = nil, metadata: JSONValue? = nil)
        async throws -> User
    {
        let body = UpdateUserRequest(name: name, avatarURL: avatarURL, metadata: metadata)
        return try await rest.call { try await $0.updateUser(path: .init(uid: uid), body: .json(body)).ok.body.json }
    }

    /// Issues an auth token for a user; `ttlSeconds` nil for one that lives until revoked.
    public func issueAuthToken(uid: String, ttlSeconds: Int64? = nil) async throws -> IssuedAuthToken {
        try await rest.call {
            try await $0.issueAuthToken(
                path: .init(uid: uid), body: .json(IssueAuthTokenRequest(ttlSeconds: ttlSeconds))
            )
            .created.body.json
        }
    }

    /// The user's live tokens (ids and dates, never the secrets).
    public func authTokens(uid: String) async throws -> [AuthTokenInfo] {
        try await rest.call { try await $0.listAuthTokens(path: .init(uid: uid)).ok.body.json }.tokens
    }

    /// Revokes one token; its sockets are closed with 4001.
    public func revokeAuthToken(uid: String, tokenId: String) async throws {
        _ = try await rest.call {
            try await $0.revokeAuthToken(path: .init(uid: uid, tokenId: tokenId)).noContent
        }
    }

    /// Revokes every token of a user.
    public func revokeAllAuthTokens(uid: String) async throws {
        _ = try await rest.call { try await $0.revokeAllAuthTokens(path: .init(uid: uid)).noContent }
    }
}
