import Foundation
import NIOConcurrencyHelpers
@_spi(Testing) import Parley
import ParleyProtocol
import ParleyTesting
import Testing

/// ChatCenterUI's rows of docs/SDK.md that need more than an instance: the static `setDeviceToken` (before any client
/// exists, and followed by the clients that do), `getUnreadMessagesCount(completion:)`, and links opened only when the
/// delegate allows.
@Suite(.timeLimit(.minutes(3))) struct SeedRowTests {
    static let token = Data((0..<32).map { UInt8($0) })
    static let newToken = Data((0..<32).map { UInt8(255 - $0) })

    func hex(_ token: Data) -> String { token.map { String(format: "%02x", $0) }.joined() }

    /// A client that follows `center` (the tests' own, not the process's).
    func client(_ server: TestServer, center: DeviceTokenCenter) async throws -> ParleyClient {
        var settings = try testSettings(server: server)
        settings.deviceTokenCenter = center
        settings.linkOpener = nil
        return try await ParleyClient.initialize(appId: server.app.appId, settings: settings)
    }

    func devices(of uid: String, on server: TestServer) async throws -> [String] {
        let answer = try await server.request("GET", "/v1/me/devices", token: try await server.login(uid))
        return try answer.decode(DeviceList.self).devices.map(\.token)
    }

    /// Polls the server's device list until it holds `token` (at most 10 s).
    func waitForDevice(_ token: String, of uid: String, on server: TestServer) async throws -> [String] {
        let deadline = ContinuousClock.now + .seconds(10)
        var tokens = try await devices(of: uid, on: server)
        while tokens != [token], ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            tokens = try await devices(of: uid, on: server)
        }
        return tokens
    }

    @Test func aStaticTokenGivenBeforeAnyClientIsRegisteredAndItsChangesFollowed() async throws {
        let server = try await TestServer.start()
        let center = DeviceTokenCenter()
        // The system's callback came before the app made a client.
        try ParleyClient.setDeviceToken(Self.token, environment: .sandbox, center: center)
        let client = try await client(server, center: center)
        try await client.login(uid: "alice", authKey: server.app.authKey)
        #expect(try await waitForDevice(hex(Self.token), of: "alice", on: server) == [hex(Self.token)])
        // A new token from the static call reaches the client that exists.
        try ParleyClient.setDeviceToken(Self.newToken, environment: .sandbox, center: center)
        #expect(try await waitForDevice(hex(Self.newToken), of: "alice", on: server) == [hex(Self.newToken)])
        // A token that is not one is refused at once.
        #expect(throws: ParleyError.self) { try ParleyClient.setDeviceToken(Data([1, 2]), center: center) }
        await client.shutdown()
        try await server.stop()
    }

    @Test func getUnreadMessagesCountAnswersOnTheCallbackQueue() async throws {
        let server = try await TestServer.start()
        let client = try await client(server, center: DeviceTokenCenter())
        // The settings' callback queue, marked so that a completion can tell where it runs.
        let key = DispatchSpecificKey<String>()
        client.settings.callbackQueue.setSpecific(key: key, value: "callbacks")
        func unreadCount() async -> (Result<Int, ParleyError>, onQueue: Bool) {
            await withCheckedContinuation { continuation in
                client.getUnreadMessagesCount { result in
                    continuation.resume(returning: (result, DispatchQueue.getSpecific(key: key) == "callbacks"))
                }
            }
        }
        let loggedOut = await unreadCount()
        #expect(loggedOut.onQueue)
        guard case .failure(let error) = loggedOut.0 else {
            Issue.record("a count without a signed-in user: \(loggedOut.0)")
            return
        }
        #expect(error.code == .notLoggedIn)
        try await client.login(uid: "bob", authKey: server.app.authKey)
        let alice = try await server.login("alice")
        let conversation = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        for text in ["one", "two"] {
            _ = try await server.request(
                "POST", "/v1/conversations/\(conversation.id)/messages", token: alice,
                body: SendMessageRequest(parts: [.text(text)])
            )
        }
        let count = await unreadCount()
        #expect(count.onQueue)
        #expect(try count.0.get() == 2)
        await client.shutdown()
        try await server.stop()
    }

    @Test func theCallbackFormOfInitializeAnswersOnTheCallbackQueue() async throws {
        let server = try await TestServer.start()
        let key = DispatchSpecificKey<String>()
        let queue = DispatchQueue(label: "app.init")
        queue.setSpecific(key: key, value: "init")
        // CometChat's spelling of the builder, with its region.
        let settings = AppSettings.AppSettingsBuilder()
            .serverURL(server.baseURL)
            .setRegion(region: "eu")
            .storageDirectory(try TemporaryDirectory(prefix: "parley-init").url)
            .callbackQueue(queue)
            .appLifecycle(nil)
            .networkReachability(nil)
            .build()
        #expect(settings.region == "eu")
        func initialize(_ appId: String, _ settings: AppSettings) async -> (Result<ParleyClient, ParleyError>, Bool) {
            await withCheckedContinuation { continuation in
                ParleyClient.initialize(
                    appId: appId, settings: settings,
                    onSuccess: {
                        continuation.resume(returning: (.success($0), DispatchQueue.getSpecific(key: key) == "init"))
                    },
                    onError: {
                        continuation.resume(returning: (.failure($0), DispatchQueue.getSpecific(key: key) == "init"))
                    }
                )
            }
        }
        let (made, madeOnQueue) = await initialize(server.app.appId, settings)
        #expect(madeOnQueue)
        let client = try made.get()
        #expect(client.appId == server.app.appId && client.settings.region == "eu")
        await client.shutdown()
        // An App ID the server does not know: onError, on the same queue, with the server's code.
        let (unknown, unknownOnQueue) = await initialize("0000000000000000", settings)
        #expect(unknownOnQueue)
        guard case .failure(let error) = unknown else {
            Issue.record("an unknown App ID was accepted")
            return
        }
        #expect(error.code == .invalidAppID)
        try await server.stop()
        // No server: ERR_SERVER_UNREACHABLE (nobody is signed in, so there is nothing to work offline with).
        let (unreachable, _) = await initialize(server.app.appId, settings)
        guard case .failure(let down) = unreachable else {
            Issue.record("initialize succeeded without a server")
            return
        }
        #expect(down.code == .serverUnreachable)
    }

    final class Opener: LinkOpener {
        let opened = NIOLockedValueBox<[URL]>([])
        func open(_ url: URL) async -> Bool {
            opened.withLockedValue { $0.append(url) }
            return true
        }
    }

    final class Gatekeeper: ParleyDelegate {
        func shouldOpenLink(_ url: URL) -> Bool { url.host != "blocked.example" }
    }

    @Test func linksOpenOnlyWhenTheDelegateAllows() async throws {
        let server = try await TestServer.start()
        var settings = try testSettings(server: server)
        let opener = Opener()
        settings.linkOpener = opener
        let client = try ParleyClient(appId: server.app.appId, settings: settings)
        let delegate = Gatekeeper()
        client.setDelegate(delegate)
        #expect(await client.openLink(URL(string: "https://ok.example/a")!))
        #expect(!(await client.openLink(URL(string: "https://blocked.example/b")!)))
        #expect(opener.opened.withLockedValue { $0 } == [URL(string: "https://ok.example/a")!])
        // Without an opener nothing opens, whatever the delegate says.
        var none = settings
        none.linkOpener = nil
        let bare = try ParleyClient(appId: server.app.appId, settings: none)
        #expect(!(await bare.openLink(URL(string: "https://ok.example/a")!)))
        _ = delegate
        try await server.stop()
    }
}
