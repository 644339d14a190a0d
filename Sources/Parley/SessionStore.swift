import Foundation

/// What the SDK saves for the logged-in user, so that a new client over the same folder restores it.
struct StoredSession: Codable, Sendable, Hashable {
    var appId: String
    var serverURL: String
    var user: User
    var authToken: String
}

/// The saved session: one JSON file per app in the storage directory, readable only by its owner, with everything but
/// the auth token; the token is in the ``CredentialStore`` (the Keychain on Apple platforms), under the App ID.
///
/// Sessions saved before the credential store held the token in the file: ``load()`` moves it to the store and
/// rewrites the file without it.
struct SessionStore: Sendable {
    let fileURL: URL
    let appId: String
    let credentials: any CredentialStore

    /// The file's content: the session without its token (`authToken` only in files of earlier versions).
    private struct Saved: Codable {
        var appId: String
        var serverURL: String
        var user: User
        var authToken: String?
    }

    init(directory: URL, appId: String, credentials: any CredentialStore) {
        fileURL = directory.appendingPathComponent("session-\(Self.safeName(appId)).json")
        self.appId = appId
        self.credentials = credentials
    }

    /// `name` with every character other than letters, digits, `-` and `_` replaced by `_`: safe in a file name.
    static func safeName(_ name: String) -> String {
        String(name.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" ? $0 : "_" })
    }

    /// The saved session; nil when there is none, or its token is gone (a restored backup without the Keychain).
    func load() throws -> StoredSession? {
        guard FileManager.default.fileExists(atPath: fileURL.path) else { return nil }
        let saved: Saved
        do {
            saved = try JSONDecoder().decode(Saved.self, from: Data(contentsOf: fileURL))
        } catch {
            throw ParleyError(.storageError, "The saved session could not be read.", underlying: "\(error)")
        }
        if let legacy = saved.authToken {
            // Saved by an earlier version: the token moves to the credential store, the file loses it.
            let session = StoredSession(
                appId: saved.appId, serverURL: saved.serverURL, user: saved.user, authToken: legacy
            )
            try save(session)
            return session
        }
        guard let token = try credentials.token(for: appId) else { return nil }
        return StoredSession(appId: saved.appId, serverURL: saved.serverURL, user: saved.user, authToken: token)
    }

    func save(_ session: StoredSession) throws {
        try credentials.setToken(session.authToken, for: appId)
        do {
            try FileManager.default.createDirectory(
                at: fileURL.deletingLastPathComponent(), withIntermediateDirectories: true
            )
            let saved = Saved(appId: session.appId, serverURL: session.serverURL, user: session.user)
            try JSONEncoder().encode(saved).write(to: fileURL, options: .atomic)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: fileURL.path)
        } catch {
            throw ParleyError(.storageError, "The session could not be saved.", underlying: "\(error)")
        }
    }

    func clear() throws {
        try credentials.removeToken(for: appId)
        guard FileManager.default.fileExists(atPath: fileURL.path) else { return }
        do {
            try FileManager.default.removeItem(at: fileURL)
        } catch {
            throw ParleyError(.storageError, "The saved session could not be removed.", underlying: "\(error)")
        }
    }
}
