import Foundation
import NIOConcurrencyHelpers
import Parley
import ParleyProtocol
import ParleyTesting
import Testing

/// Where the auth token lives (docs/SDK.md, "Credentials"): in the credential store, never in the session file; a
/// session file of an earlier version has its token moved there; logout removes it.
@Suite(.timeLimit(.minutes(3))) struct CredentialStoreTests {
    /// A store in memory: what the app (or a test) would pass instead of the Keychain.
    final class MemoryStore: CredentialStore {
        let tokens = NIOLockedValueBox<[String: String]>([:])
        func token(for account: String) throws -> String? { tokens.withLockedValue { $0[account] } }
        func setToken(_ token: String, for account: String) throws { tokens.withLockedValue { $0[account] = token } }
        func removeToken(for account: String) throws { _ = tokens.withLockedValue { $0.removeValue(forKey: account) } }
    }

    func settings(_ server: TestServer, _ storage: TemporaryDirectory, store: (any CredentialStore)? = nil) throws
        -> AppSettings
    {
        var settings = try testSettings(server: server, storage: storage)
        settings.credentialStore = store
        return settings
    }

    func sessionFile(_ storage: TemporaryDirectory, _ server: TestServer) -> URL {
        storage.url.appendingPathComponent("session-\(server.app.appId).json")
    }

    @Test func aSessionIsFoundUnderAnySpellingOfItsServer() async throws {
        let server = try await TestServer.start()
        let storage = try TemporaryDirectory(prefix: "parley-credentials")
        let client = try await ParleyClient.initialize(appId: server.app.appId, settings: settings(server, storage))
        try await client.login(uid: "alice", authKey: server.app.authKey)
        await client.shutdown()
        let base = server.baseURL.absoluteString
        for spelling in [base + "/", base.replacingOccurrences(of: "http://", with: "HTTP://") + "//"] {
            var settings = try settings(server, storage)
            settings.serverURL = try #require(URL(string: spelling))  // set directly: compared in one spelling
            let again = try ParleyClient(appId: server.app.appId, settings: settings)
            #expect(again.getLoggedInUser()?.uid == "alice", "\(spelling)")
            await again.shutdown()
            let built = AppSettings.Builder().serverURL(try #require(URL(string: spelling))).build()
            #expect(built.serverURL.absoluteString == base)
        }
        #expect(
            AppSettings.normalizedServerURL("https://Chat.Example.com:443/v1/?q=1#f")?.absoluteString
                == "https://chat.example.com/v1")
        #expect(AppSettings.normalizedServerURL("ftp://chat.example.com") == nil)
        #expect(AppSettings.normalizedServerURL("not a url") == nil)
        // Another server is another session.
        var other = try settings(server, storage)
        other.serverURL = try #require(URL(string: "http://localhost:\(server.port)"))
        #expect(try ParleyClient(appId: server.app.appId, settings: other).getLoggedInUser() == nil)
        try await server.stop()
    }

    @Test func theTokenGoesToTheStoreNotTheSessionFileAndLogoutRemovesIt() async throws {
        let server = try await TestServer.start()
        let storage = try TemporaryDirectory(prefix: "parley-credentials")
        let store = MemoryStore()
        let client = try await ParleyClient.initialize(
            appId: server.app.appId, settings: settings(server, storage, store: store))
        try await client.login(uid: "alice", authKey: server.app.authKey)
        let token = try #require(try store.token(for: server.app.appId))
        let file = try String(contentsOf: sessionFile(storage, server), encoding: .utf8)
        #expect(file.contains("alice") && !file.contains(token), "the session file holds the token: \(file)")
        await client.shutdown()

        // A new client over the same folder and store restores the session (it needs the token to reach the server).
        let again = try await ParleyClient.initialize(
            appId: server.app.appId, settings: settings(server, storage, store: store))
        #expect(again.getLoggedInUser()?.uid == "alice")
        #expect(try await again.unreadCount() == 0)
        // Without the token (a backup restored on another device), there is no session to restore.
        await again.shutdown()
        let other = try await ParleyClient.initialize(
            appId: server.app.appId, settings: settings(server, storage, store: MemoryStore()))
        #expect(other.getLoggedInUser() == nil)
        await other.shutdown()

        let last = try await ParleyClient.initialize(
            appId: server.app.appId, settings: settings(server, storage, store: store))
        try await last.logout()
        #expect(try store.token(for: server.app.appId) == nil)
        #expect(!FileManager.default.fileExists(atPath: sessionFile(storage, server).path))
        await last.shutdown()
        try await server.stop()
    }

    @Test func aSessionFileOfAnEarlierVersionHasItsTokenMovedToTheStore() async throws {
        let server = try await TestServer.start()
        let storage = try TemporaryDirectory(prefix: "parley-credentials")
        let token = try await server.login("bob")
        // What earlier versions wrote: the token in the session file.
        let legacy: JSONValue = [
            "appId": .string(server.app.appId), "serverURL": .string(server.baseURL.absoluteString),
            "user": ["uid": "bob", "name": "bob", "createdAt": 1, "updatedAt": 1], "authToken": .string(token),
        ]
        try Data(try WireCoding.encode(legacy)).write(to: sessionFile(storage, server))

        // The default store on Linux: a 0600 file in credentials/ of the storage directory.
        let client = try await ParleyClient.initialize(appId: server.app.appId, settings: settings(server, storage))
        #expect(client.getLoggedInUser()?.uid == "bob")
        #expect(try await client.unreadCount() == 0)
        let file = try String(contentsOf: sessionFile(storage, server), encoding: .utf8)
        #expect(!file.contains(token), "the token is still in the session file")
        let stored = FileCredentialStore(directory: storage.url.appendingPathComponent("credentials"))
        #expect(try stored.token(for: server.app.appId) == token)
        let path = stored.fileURL(server.app.appId).path
        let permissions = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(permissions == 0o600)
        let folder = try FileManager.default.attributesOfItem(atPath: stored.directory.path)[.posixPermissions] as? Int
        #expect(folder == 0o700)
        await client.shutdown()
        try await server.stop()
    }
}
