import Foundation
import Parley

/// What the CLI remembers of a profile besides the SDK's session: the server and the app it logged in at, so that
/// later commands on the profile need neither `--server` nor `PARLEY_APP_ID`, and a command that names another
/// server can say which one the profile is logged in at.
///
/// Kept in `cli-profile.json` in the profile's folder (next to the SDK's files, which the CLI does not read).
struct ProfileRecord: Codable, Equatable {
    var server: String
    var appId: String

    static func fileURL(in profileDirectory: URL) -> URL {
        profileDirectory.appendingPathComponent("cli-profile.json")
    }

    /// The record of the profile in `profileDirectory`; nil when there is none (or it cannot be read).
    static func load(from profileDirectory: URL) -> ProfileRecord? {
        guard let data = try? Data(contentsOf: fileURL(in: profileDirectory)) else { return nil }
        return try? JSONDecoder().decode(ProfileRecord.self, from: data)
    }

    /// Saves the record; a failure only loses the convenience, so it is ignored.
    func save(in profileDirectory: URL) {
        try? FileManager.default.createDirectory(at: profileDirectory, withIntermediateDirectories: true)
        try? JSONEncoder().encode(self).write(to: Self.fileURL(in: profileDirectory), options: .atomic)
    }
}

/// A server URL in one spelling (the SDK's): the SDK keeps a session for the server it logged in at, so
/// `http://127.0.0.1:8080/` and `HTTP://127.0.0.1:8080` must reach it as `http://127.0.0.1:8080`.
func normalizedServerURL(_ text: String) -> URL? { AppSettings.normalizedServerURL(text) }
