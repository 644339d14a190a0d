import Foundation

/// What the SDK saves for the logged-in user, so that a new client over the same folder restores it.
struct StoredSession: Codable, Sendable, Hashable {
    var appId: String
    var serverURL: String
    var user: User
    var authToken: String
}

/// The saved session: one JSON file per app in the storage directory, readable only by its owner.
struct SessionStore: Sendable {
    let fileURL: URL

    init(directory: URL, appId: String) {
        fileURL = directory.appendingPathComponent("session-\(Self.safeName(appId)).json")
    }

    /// `name` with every character other than letters, digits, `-` and `_` replaced by `_`: safe in a file name.
    static func safeName(_ name: String) -> String {
        String(name.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" ? $0 : "_" })
    }

    func load() throws -> StoredSession? {
        guard FileManager.default.fileExists(atPath: fileURL.path) else { return nil }
        do {
            return try JSONDecoder().decode(StoredSession.self, from: Data(contentsOf: fileURL))
        } catch {
            throw ParleyError(.storageError, "The saved session could not be read.", underlying: "\(error)")
        }
    }

    func save(_ session: StoredSession) throws {
        do {
            try FileManager.default.createDirectory(
                at: fileURL.deletingLastPathComponent(), withIntermediateDirectories: true
            )
            try JSONEncoder().encode(session).write(to: fileURL, options: .atomic)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: fileURL.path)
        } catch {
            throw ParleyError(.storageError, "The session could not be saved.", underlying: "\(error)")
        }
    }

    func clear() throws {
        guard FileManager.default.fileExists(atPath: fileURL.path) else { return }
        do {
            try FileManager.default.removeItem(at: fileURL)
        } catch {
            throw ParleyError(.storageError, "The saved session could not be removed.", underlying: "\(error)")
        }
    }
}
