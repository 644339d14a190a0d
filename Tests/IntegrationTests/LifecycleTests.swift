import Foundation
import Logging
import NIOConcurrencyHelpers
import Parley
import ParleyTesting
import Testing

/// The app lifecycle stages of docs/SDK.md, in order and out of order, against the real server.
@Suite(.timeLimit(.minutes(2))) struct LifecycleTests {
    static let token = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
    static let newToken = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"

    func client(_ server: TestServer, storage: TemporaryDirectory? = nil) async throws -> ParleyClient {
        try await ParleyClient.initialize(
            appId: server.app.appId, settings: testSettings(server: server, storage: storage))
    }

    /// The user's devices as the server lists them (`GET /v1/me/devices`).
    func devices(of uid: String, on server: TestServer) async throws -> [Device] {
        let answer = try await server.request("GET", "/v1/me/devices", token: try await server.login(uid))
        #expect(answer.status == 200)
        return try answer.decode(DeviceList.self).devices
    }

    @Test func everyStageInOrder() async throws {
        let server = try await TestServer.start()
        let client = try await client(server)
        try await client.setDeviceToken(hex: Self.token, environment: .sandbox)
        #expect(try await devices(of: "alice", on: server).isEmpty)
        try await client.authorize(uid: "alice", authKey: server.app.authKey)
        #expect(
            try await devices(of: "alice", on: server).map { [$0.deviceId, $0.token, $0.environment.rawValue] }
                == [[client.deviceId, Self.token, "sandbox"]]
        )
        let group = try await client.createGroup(name: "Support")
        client.prefill(message: "My order #12")
        let chat = try client.openChat(conversationId: group.id)
        #expect(chat.takePrefill() == "My order #12")
        #expect(chat.takePrefill() == nil)
        let sent = try await chat.send("Hello")
        #expect(try await chat.history().messages.map(\.id) == [sent.id])
        let userInfo: [String: Any] = [
            "parley": ["conversationId": group.id, "messageId": sent.id, "seq": 4] as [String: Any]
        ]
        #expect(try client.handleNotification(userInfo: userInfo))
        var notifications = chat.notifications.makeAsyncIterator()
        #expect(await notifications.next() == PushPayload(conversationId: group.id, messageId: sent.id, seq: 4))
        try await client.logout()
        #expect(!chat.isOpen)
        await client.shutdown()
        try await server.stop()
    }

    @Test func sendingOrOpeningAChatBeforeAuthorizeFailsWithNotLoggedIn() async throws {
        let server = try await TestServer.start()
        let client = try await client(server)
        let send = await #expect(throws: ParleyError.self) { try await client.sendTextMessage("x", to: .user("bob")) }
        #expect(send?.code == .notLoggedIn)
        let open = #expect(throws: ParleyError.self) { try client.openChat(conversationId: "c_1") }
        #expect(open?.code == .notLoggedIn)
        let unread = await #expect(throws: ParleyError.self) { try await client.unreadCount() }
        #expect(unread?.code == .notLoggedIn)
        let again = await #expect(throws: ParleyError.self) { try await client.authorize() }
        #expect(again?.code == .notLoggedIn)
        await client.shutdown()
        try await server.stop()
    }

    @Test func logoutTwiceFailsTheSecondTimeWithNotLoggedIn() async throws {
        let server = try await TestServer.start()
        let client = try await client(server)
        let before = await #expect(throws: ParleyError.self) { try await client.logout() }
        #expect(before?.code == .notLoggedIn)
        try await client.authorize(uid: "alice", authKey: server.app.authKey)
        try await client.logout()
        let twice = await #expect(throws: ParleyError.self) { try await client.logout() }
        #expect(twice?.code == .notLoggedIn)
        await client.shutdown()
        try await server.stop()
    }

    @Test func handleNotificationWithNoChatOpenFailsWithChatNotOpened() async throws {
        let server = try await TestServer.start()
        let client = try await client(server)
        let userInfo: [String: Any] = [
            "aps": ["alert": "Hi"], "parley": ["conversationId": "c_1", "seq": 3] as [String: Any],
        ]
        let beforeLogin = #expect(throws: ParleyError.self) { try client.handleNotification(userInfo: userInfo) }
        #expect(beforeLogin?.code == .chatNotOpened)
        try await client.authorize(uid: "alice", authKey: server.app.authKey)
        let closed = #expect(throws: ParleyError.self) { try client.handleNotification(userInfo: userInfo) }
        #expect(closed?.code == .chatNotOpened)
        let chat = try client.openChat(conversationId: "c_2")
        #expect(try client.handleNotification(userInfo: userInfo) == false)
        chat.close()
        let afterClose = #expect(throws: ParleyError.self) { try client.handleNotification(userInfo: userInfo) }
        #expect(afterClose?.code == .chatNotOpened)
        let apsOnly: [String: Any] = ["aps": ["alert": "Hi"]]
        let foreign = #expect(throws: ParleyError.self) { try client.handleNotification(userInfo: apsOnly) }
        #expect(foreign?.code == .notAParleyNotification)
        await client.shutdown()
        try await server.stop()
    }

    @Test func thePrefillIsKeptUntilTheNextChatOpensAndAnEmptyStringClearsIt() async throws {
        let server = try await TestServer.start()
        let client = try await client(server)
        client.prefill(message: "draft")  // before authorize: kept
        try await client.authorize(uid: "alice", authKey: server.app.authKey)
        let first = try client.openChat(conversationId: "c_1")
        let second = try client.openChat(conversationId: "c_2")
        #expect(!first.isOpen && second.isOpen && client.openedChat === second)
        #expect(first.takePrefill() == "draft" && second.takePrefill() == nil)
        client.prefill(message: "again")
        client.prefill(message: "")
        #expect(try client.openChat(conversationId: "c_3").takePrefill() == nil)
        await client.shutdown()
        try await server.stop()
    }

    @Test func theParleyPayloadIsReadFromEveryShapeOfUserInfo() {
        let numbers: [AnyHashable: Any] = [
            "parley": ["conversationId": "c", "messageId": "m", "seq": NSNumber(value: 7)] as [String: Any]
        ]
        #expect(ParleyClient.pushPayload(from: numbers) == PushPayload(conversationId: "c", messageId: "m", seq: 7))
        let strings: [AnyHashable: Any] = ["parley": ["conversationId": "c", "seq": "8"] as [AnyHashable: Any]]
        #expect(ParleyClient.pushPayload(from: strings) == PushPayload(conversationId: "c", seq: 8))
        #expect(ParleyClient.pushPayload(from: ["parley": ["seq": 1] as [String: Any]]) == nil)
        #expect(ParleyClient.pushPayload(from: ["aps": ["alert": "x"] as [String: Any]]) == nil)
    }

    @Test func aTokenGivenBeforeLoginIsRegisteredAtLoginAndAChangedTokenReplacesIt() async throws {
        let server = try await TestServer.start()
        let client = try await client(server)
        try await client.setDeviceToken(Data(Array(repeating: 0xAB, count: 32)))
        try await client.login(uid: "alice", authKey: server.app.authKey)
        #expect(try await devices(of: "alice", on: server).map(\.token) == [String(repeating: "ab", count: 32)])
        try await client.setDeviceToken(hex: Self.newToken)
        let devices = try await devices(of: "alice", on: server)
        #expect(devices.map(\.token) == [Self.newToken] && devices.map(\.deviceId) == [client.deviceId])
        let invalid = await #expect(throws: ParleyError.self) { try await client.setDeviceToken(hex: "not hex") }
        #expect(invalid?.code == .invalidDeviceToken)
        await client.shutdown()
        try await server.stop()
    }

    @Test func logoutRemovesThePushRegistrationAndDeauthorizeKeepsIt() async throws {
        let server = try await TestServer.start()
        let storage = try TemporaryDirectory()
        let client = try await client(server, storage: storage)
        try await client.setDeviceToken(hex: Self.token)
        try await client.authorize(uid: "alice", authKey: server.app.authKey)
        await client.waitUntilConnected()
        let chat = try client.openChat(conversationId: "c_1")

        await client.deauthorizeUser()
        await client.deauthorizeUser()  // never fails
        #expect(client.getLoggedInUser() == nil && client.connectionStatus == .disconnected && !chat.isOpen)
        #expect(try await devices(of: "alice", on: server).map(\.token) == [Self.token])
        let closedChat = await #expect(throws: ParleyError.self) { try await chat.send("x") }
        #expect(closedChat?.code == .chatNotOpened)
        let send = await #expect(throws: ParleyError.self) { try await client.sendTextMessage("x", to: .user("bob")) }
        #expect(send?.code == .notLoggedIn)

        // Re-authorizing uses the kept session: no new login.
        #expect(try await client.authorize().uid == "alice")
        await client.waitUntilConnected()
        try await client.logout()
        #expect(try await devices(of: "alice", on: server).isEmpty)
        // The token stays on the device: the next user gets it.
        try await client.authorize(uid: "bob", authKey: server.app.authKey)
        #expect(try await devices(of: "bob", on: server).map(\.token) == [Self.token])
        await client.shutdown()
        try await server.stop()
    }

    @Test func logoutAfterDeauthorizeSignsOutTheKeptUser() async throws {
        let server = try await TestServer.start()
        let client = try await client(server)
        try await client.setDeviceToken(hex: Self.token)
        try await client.authorize(uid: "alice", authKey: server.app.authKey)
        await client.deauthorizeUser()
        try await client.logout()
        #expect(try await devices(of: "alice", on: server).isEmpty)
        let again = await #expect(throws: ParleyError.self) { try await client.authorize() }
        #expect(again?.code == .notLoggedIn)
        await client.shutdown()
        try await server.stop()
    }

    @Test func theTokenMovesToTheUserWhoRegistersItLast() async throws {
        let server = try await TestServer.start()
        let alice = try await client(server)
        let bob = try await client(server)
        try await alice.authorize(uid: "alice", authKey: server.app.authKey)
        try await bob.authorize(uid: "bob", authKey: server.app.authKey)
        try await alice.setDeviceToken(hex: Self.token)
        try await bob.setDeviceToken(hex: Self.token)
        #expect(try await devices(of: "alice", on: server).isEmpty)
        #expect(try await devices(of: "bob", on: server).map(\.token) == [Self.token])
        for client in [alice, bob] { await client.shutdown() }
        try await server.stop()
    }

    @Test func theDelegateHearsUnreadCountsNetworkStatusAndLogsOnItsQueue() async throws {
        let server = try await TestServer.start()
        let alice = try await client(server)
        let bob = try await client(server)
        let queue = DispatchQueue(label: "delegate")
        let delegate = RecordingDelegate(queue: queue)
        alice.setDelegate(delegate, queue: queue, logLevel: .trace)
        try await alice.authorize(uid: "alice", authKey: server.app.authKey)
        await alice.waitUntilConnected()
        try await bob.authorize(uid: "bob", authKey: server.app.authKey)
        let group = try await bob.createGroup(name: "G", participants: ["alice"])
        try await bob.sendTextMessage("one", to: .conversation(group.id))
        let firstUnread = await delegate.unread.first(where: { $0 == 1 })
        #expect(firstUnread == 1)
        #expect(try await alice.unreadCount() == 1)
        let viaCallback = await withCheckedContinuation { continuation in
            alice.unreadCount(queue: queue) { result in
                dispatchPrecondition(condition: .onQueue(queue))
                continuation.resume(returning: try? result.get())
            }
        }
        #expect(viaCallback == 1)
        await withCheckedContinuation { continuation in queue.async { continuation.resume() } }
        #expect(delegate.statuses.contains(.connected))
        // The SDK's log reaches the delegate from the level it chose (trace: everything, the status lines included).
        #expect(delegate.logs.contains { $0.level == .debug && $0.message.contains("Connection status: connected") })
        // At .error, the debug lines of a reconnection no longer come.
        alice.setDelegate(delegate, queue: queue, logLevel: .error)
        let before = delegate.logs.count
        await alice.appDidEnterBackground()
        await alice.appWillEnterForeground()
        await alice.waitUntilConnected()
        await withCheckedContinuation { continuation in queue.async { continuation.resume() } }
        #expect(delegate.logs.dropFirst(before).allSatisfy { $0.level >= .error })
        #expect(delegate.statuses.suffix(2) == [.connecting, .connected])  // the calls still come
        #expect(delegate.everyCallWasOnItsQueue)
        delegate.allowLinks = false
        #expect(await alice.shouldOpenLink(URL(string: "https://example.com")!) == false)
        alice.setDelegate(nil)
        #expect(await alice.shouldOpenLink(URL(string: "https://example.com")!) == true)
        for client in [alice, bob] { await client.shutdown() }
        try await server.stop()
    }
}

/// Records what the SDK tells its delegate.
final class RecordingDelegate: ParleyDelegate {
    private struct State {
        var statuses: [ConnectionStatus] = []
        var logs: [(level: Logger.Level, message: String)] = []
        var wrongQueue = false
        var allowLinks = true
    }

    private let state = NIOLockedValueBox(State())
    let unread: AsyncStream<Int>
    private let unreadSink: AsyncStream<Int>.Continuation
    private let queueKey = DispatchSpecificKey<Bool>()

    /// - Parameter queue: The queue every call must arrive on.
    init(queue: DispatchQueue) {
        (unread, unreadSink) = AsyncStream.makeStream(of: Int.self)
        queue.setSpecific(key: queueKey, value: true)
    }

    var statuses: [ConnectionStatus] { state.withLockedValue { $0.statuses } }
    var logs: [(level: Logger.Level, message: String)] { state.withLockedValue { $0.logs } }
    var allowLinks: Bool {
        get { state.withLockedValue { $0.allowLinks } }
        set { state.withLockedValue { $0.allowLinks = newValue } }
    }

    /// Whether every call so far ran on the queue given to `init`.
    var everyCallWasOnItsQueue: Bool { !state.withLockedValue { $0.wrongQueue } }

    private func check() {
        if DispatchQueue.getSpecific(key: queueKey) != true {
            state.withLockedValue { $0.wrongQueue = true }
        }
    }

    func unreadCountChanged(_ count: Int) {
        check()
        unreadSink.yield(count)
    }

    func networkStatusChanged(_ status: ConnectionStatus) {
        check()
        state.withLockedValue { $0.statuses.append(status) }
    }

    func log(level: Logger.Level, message: String) {
        check()
        state.withLockedValue { $0.logs.append((level, message)) }
    }

    func shouldOpenLink(_ url: URL) -> Bool {
        check()
        return allowLinks
    }
}
