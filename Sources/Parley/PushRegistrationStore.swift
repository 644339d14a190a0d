import Foundation
import NIOConcurrencyHelpers

/// This installation's push token and what the server knows of it: one JSON file per app in the storage directory,
/// kept across logins so that a token given before any user signs in is registered when one does.
final class PushRegistrationStore: Sendable {
    struct Registration: Codable, Sendable, Hashable {
        var uid: String
        var token: String
        var environment: PushEnvironment
    }

    struct Saved: Codable, Sendable, Hashable {
        /// The device id of this installation on the server (`PUT /v1/me/devices/{deviceId}`), made once.
        var deviceId: String
        /// The latest token the app gave, lowercase hex.
        var token: String?
        var environment: PushEnvironment = .production
        /// What was last registered on the server, and for whom.
        var registered: Registration?
    }

    let fileURL: URL
    private let state: NIOLockedValueBox<Saved>

    init(directory: URL, appId: String) {
        fileURL = directory.appendingPathComponent("push-\(SessionStore.safeName(appId)).json")
        let loaded = (try? Data(contentsOf: fileURL)).flatMap { try? JSONDecoder().decode(Saved.self, from: $0) }
        state = NIOLockedValueBox(loaded ?? Saved(deviceId: UUID().uuidString.lowercased()))
    }

    var current: Saved { state.withLockedValue { $0 } }

    /// Changes the saved state and writes it. The file is written under the lock (it is small), so that two
    /// changes at once never leave the older one on disk.
    func update(_ change: (inout Saved) -> Void) throws {
        let fileURL = self.fileURL
        try state.withLockedValue { state in
            change(&state)
            do {
                try FileManager.default.createDirectory(
                    at: fileURL.deletingLastPathComponent(), withIntermediateDirectories: true
                )
                try JSONEncoder().encode(state).write(to: fileURL, options: .atomic)
            } catch {
                throw ParleyError(.storageError, "The push token could not be saved.", underlying: "\(error)")
            }
        }
    }

    /// The registration the server should hold for `uid`, when it does not hold it yet.
    func pending(for uid: String) -> Registration? {
        state.withLockedValue { saved in
            guard let token = saved.token else { return nil }
            let wanted = Registration(uid: uid, token: token, environment: saved.environment)
            return saved.registered == wanted ? nil : wanted
        }
    }
}
