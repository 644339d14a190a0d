import Dispatch
import Foundation
import Logging
import ParleyAPI
import ParleyAPIClient

/// The app lifecycle: push token, entering and leaving the signed-in zone, the open chat, notifications, the unread
/// badge and the delegate. docs/SDK.md has the table of stages.
extension ParleyClient {
    // MARK: Push token

    /// Gives the SDK the APNs device token (from `application(_:didRegisterForRemoteNotificationsWithDeviceToken:)`).
    ///
    /// May be called at any time, also before any user signs in: the token is saved in the storage directory and
    /// registered on the server for the signed-in user now, or when one signs in; a changed token replaces the old
    /// one. The token stays saved when the upload fails, and is sent again at the next sign-in.
    ///
    /// - Parameters:
    ///   - token: The token bytes as Apple gives them.
    ///   - environment: `.sandbox` for development builds (the APNs development environment).
    /// - Throws: `ERR_INVALID_DEVICE_TOKEN`, `ERR_STORAGE`; when signed in, the server's errors
    ///   (`ERR_SERVER_UNREACHABLE` ...).
    public func setDeviceToken(_ token: Data, environment: PushEnvironment = .production) async throws {
        try await setDeviceToken(hex: Self.hex(token), environment: environment)
    }

    /// Gives every client of the app the APNs device token: the static form, for
    /// `application(_:didRegisterForRemoteNotificationsWithDeviceToken:)`, which may come before the app has made a
    /// client (ChatCenterUI's `setDeviceToken(_:)`).
    ///
    /// Clients that exist take it at once (they follow the SDK's token changes from ``start()`` on); a client made
    /// later takes it at ``start()``. Each saves it in its storage directory and registers it for its signed-in user
    /// (or the next one), as ``setDeviceToken(_:environment:)`` does. A new token replaces the old one.
    ///
    /// - Throws: `ERR_INVALID_DEVICE_TOKEN` for a token that is not 8 to 200 bytes.
    public static func setDeviceToken(_ token: Data, environment: PushEnvironment = .production) throws {
        try setDeviceToken(token, environment: environment, center: .shared)
    }

    /// The static ``setDeviceToken(_:environment:)`` for the clients that follow `center`.
    @_spi(Testing) public static func setDeviceToken(
        _ token: Data, environment: PushEnvironment = .production, center: DeviceTokenCenter
    ) throws {
        guard let hex = Device.normalizedToken(Self.hex(token)) else {
            throw ParleyError(.invalidDeviceToken, "A push token is an even number of 16 to 400 hexadecimal digits.")
        }
        center.set(DeviceTokenCenter.Token(hex: hex, environment: environment))
    }

    static func hex(_ token: Data) -> String {
        token.map { byte -> String in
            let digits = String(byte, radix: 16)
            return digits.count == 1 ? "0" + digits : digits
        }.joined()
    }

    /// Takes the token given to the static ``setDeviceToken(_:environment:)`` now, and every change of it until
    /// ``shutdown()``.
    func followDeviceToken() -> Task<Void, Never> {
        let center = settings.deviceTokenCenter
        let changes = center.changes()
        let latest = center.latest
        return Task { [weak self] in
            if let latest { await self?.adopt(latest) }
            for await token in changes {
                guard let self else { return }
                await self.adopt(token)
            }
        }
    }

    private func adopt(_ token: DeviceTokenCenter.Token) async {
        guard push.current.token != token.hex || push.current.environment != token.environment else { return }
        do {
            try await setDeviceToken(hex: token.hex, environment: token.environment)
        } catch {
            logger.warning("The new push token could not be registered now; it will be at the next sign-in: \(error)")
        }
    }

    /// ``setDeviceToken(_:environment:)-swift.method`` with the token in hexadecimal.
    public func setDeviceToken(hex: String, environment: PushEnvironment = .production) async throws {
        guard let token = Device.normalizedToken(hex) else {
            throw ParleyError(.invalidDeviceToken, "A push token is an even number of 16 to 400 hexadecimal digits.")
        }
        try push.update { saved in
            saved.token = token
            saved.environment = environment
        }
        guard let session = state.withLockedValue({ $0.session }) else { return }
        try await registerPushToken(for: session)
    }

    /// The id of this installation on the server's device list (`GET /v1/me/devices`).
    public var deviceId: String { push.current.deviceId }

    /// Registers the saved token for the user when the server does not have it yet.
    func registerPushToken(for session: StoredSession) async throws {
        guard let pending = push.pending(for: session.user.uid) else { return }
        let deviceId = push.current.deviceId
        let rest = RESTClient(serverURL: settings.serverURL) { (session.authToken, nil) }
        let body = RegisterDeviceRequest(platform: .apns, token: pending.token, environment: pending.environment)
        _ = try await rest.call {
            try await $0.registerDevice(path: .init(deviceId: deviceId), body: .json(body)).ok.body.json
        }
        try push.update { $0.registered = pending }
    }

    /// ``registerPushToken(for:)``, logging a failure (sign-in does not fail because of push).
    func registerPushTokenQuietly(for session: StoredSession) async {
        do {
            try await registerPushToken(for: session)
        } catch {
            logger.warning("The push token could not be registered now; it will be at the next sign-in: \(error)")
        }
    }

    /// Removes this device's push registration of the user from the server, when there is one.
    func unregisterPushToken(for session: StoredSession) async throws {
        guard let registered = push.current.registered, registered.uid == session.user.uid else { return }
        let deviceId = push.current.deviceId
        let rest = RESTClient(serverURL: settings.serverURL) { (session.authToken, nil) }
        do {
            _ = try await rest.call { try await $0.unregisterDevice(path: .init(deviceId: deviceId)).noContent }
        } catch let error as ParleyError
            where ([.deviceNotFound, .serverUnreachable, .authTokenInvalid] as [ErrorCode]).contains(error.code)
        {
            logger.info("Logout: the push registration could not be removed on the server (\(error.code)).")
        }
        try push.update { $0.registered = nil }
    }

    // MARK: Signed-in zone

    /// Enters the signed-in zone with the app's development Auth Key: the same as ``login(uid:authKey:)``.
    @discardableResult
    public func authorize(uid: String, authKey: String) async throws -> User {
        try await login(uid: uid, authKey: authKey)
    }

    /// Enters the signed-in zone with a token your server issued: the same as ``login(authToken:)``.
    @discardableResult
    public func authorize(authToken: String) async throws -> User {
        try await login(authToken: authToken)
    }

    /// Enters the signed-in zone again after ``deauthorizeUser()``, with the session kept on disk: no request, the
    /// socket opens at once. Returns the user; when already signed in, returns them.
    ///
    /// - Throws: `ERR_NOT_LOGGED_IN` when no session is saved (after `logout()`, or before any login).
    @discardableResult
    public func authorize() async throws -> User {
        if let user = getLoggedInUser() { return user }
        guard let saved = try sessionStore.load(), saved.appId == appId,
            settings.isServer(saved.serverURL)
        else { throw ParleyError(.notLoggedIn, "No saved session: log in first.") }
        pipeline.begin(uid: saved.user.uid)
        outbox.begin(uid: saved.user.uid)
        state.withLockedValue { state in
            state.session = saved
            state.sessionEpoch += 1
            state.directConversations = [:]
        }
        await driver.loggedIn()
        await registerPushTokenQuietly(for: saved)
        return saved.user
    }

    /// Leaves the signed-in zone (a lock screen, a PIN prompt) without signing out: closes the socket and the open
    /// chat, keeps the session on disk and the push registration on the server. ``authorize()`` comes back at once.
    /// Never fails; does nothing when nobody is signed in.
    public func deauthorizeUser() async {
        let chat = state.withLockedValue { state -> ChatSession? in
            defer {
                state.chat = nil
                state.session = nil
                state.sessionEpoch += 1
                state.directConversations = [:]
            }
            return state.chat
        }
        chat?.markClosed()
        await driver.loggedOut()
    }

    // MARK: Chat

    /// Opens the chat of a conversation, closing the one open before. The session gets the text of
    /// ``prefill(message:)`` given since the last chat opened.
    ///
    /// - Throws: `ERR_NOT_LOGGED_IN` before `authorize`/`login` (or after `deauthorizeUser()`).
    public func openChat(conversationId: String) throws -> ChatSession {
        _ = try requireSession()
        let (chat, previous) = state.withLockedValue { state -> (ChatSession, ChatSession?) in
            let chat = ChatSession(client: self, conversationId: conversationId, prefill: state.prefill)
            defer {
                state.prefill = nil
                state.chat = chat
            }
            return (chat, state.chat)
        }
        previous?.markClosed()
        return chat
    }

    /// The chat open now, if any.
    public var openedChat: ChatSession? { state.withLockedValue { $0.chat } }

    /// Text to put in the input field of the next chat opened (kept until then); an empty string clears it.
    public func prefill(message: String) {
        state.withLockedValue { $0.prefill = message.isEmpty ? nil : message }
    }

    func chatClosed(_ chat: ChatSession) {
        state.withLockedValue { state in
            if state.chat === chat { state.chat = nil }
        }
    }

    // MARK: Notifications

    /// Parley's part of a notification's `userInfo`, or nil when it has none.
    public static func pushPayload(from userInfo: [AnyHashable: Any]) -> PushPayload? {
        let parley: [AnyHashable: Any]?
        if let dictionary = userInfo["parley"] as? [AnyHashable: Any] {
            parley = dictionary
        } else if let dictionary = userInfo["parley"] as? [String: Any] {
            parley = Dictionary(uniqueKeysWithValues: dictionary.map { (AnyHashable($0.key), $0.value) })
        } else {
            parley = nil
        }
        guard let parley, let conversationId = parley["conversationId"] as? String, !conversationId.isEmpty else {
            return nil
        }
        let seq: Int64?
        switch parley["seq"] {
        case let value as Int64: seq = value
        case let value as Int: seq = Int64(value)
        case let value as NSNumber: seq = value.int64Value
        case let value as String: seq = Int64(value)
        default: seq = nil
        }
        return PushPayload(
            conversationId: conversationId, messageId: parley["messageId"] as? String, seq: seq,
            mentioned: parley["mentioned"] as? Bool
        )
    }

    /// Hands a tapped or received notification to the SDK (from `UNUserNotificationCenterDelegate`).
    ///
    /// When the open chat is the notification's conversation, the payload goes to its
    /// ``ChatSession/notifications`` and the call returns true; when another chat is open it returns false (show
    /// the notification, or open that chat).
    ///
    /// - Throws: `ERR_NOT_A_PARLEY_NOTIFICATION` when `userInfo` has no `parley` payload; `ERR_CHAT_NOT_OPENED` when
    ///   no chat is open.
    @discardableResult
    public func handleNotification(userInfo: [AnyHashable: Any]) throws -> Bool {
        guard let payload = Self.pushPayload(from: userInfo) else {
            throw ParleyError(.notAParleyNotification, "The notification carries no Parley payload.")
        }
        return try handleNotification(payload)
    }

    /// `handleNotification(userInfo:)` with `[String: Any]`.
    @discardableResult
    public func handleNotification(userInfo: [String: Any]) throws -> Bool {
        let converted = Dictionary(uniqueKeysWithValues: userInfo.map { (AnyHashable($0.key), $0.value) })
        return try handleNotification(userInfo: converted)
    }

    /// `handleNotification(userInfo:)` with a parsed payload.
    @discardableResult
    public func handleNotification(_ payload: PushPayload) throws -> Bool {
        guard let chat = openedChat, chat.isOpen else {
            throw ParleyError(.chatNotOpened, "No chat is open: open one with openChat(conversationId:).")
        }
        guard chat.conversationId == payload.conversationId else { return false }
        chat.deliver(payload)
        return true
    }

    // MARK: Unread badge and delegate

    /// The signed-in user's total of unread messages.
    ///
    /// - Throws: `ERR_NOT_LOGGED_IN`, and the server's errors.
    public func unreadCount() async throws -> Int {
        try await unreadCounts().total
    }

    /// Callback form of ``unreadCount()``, called on `queue` (the settings' callback queue by default).
    public func unreadCount(
        queue: DispatchQueue? = nil, completion: @escaping @Sendable (Result<Int, ParleyError>) -> Void
    ) {
        let queue = queue ?? settings.callbackQueue
        Task {
            let result: Result<Int, ParleyError>
            do {
                result = .success(try await unreadCount())
            } catch {
                result = .failure(RESTClient.parleyError(error))
            }
            queue.async { completion(result) }
        }
    }

    /// ChatCenterUI's name for ``unreadCount(queue:completion:)``: the signed-in user's total of unread messages,
    /// given to `completion` on the settings' callback queue (the main queue on Apple platforms); without a signed-in
    /// user, `ERR_NOT_LOGGED_IN`.
    public func getUnreadMessagesCount(completion: @escaping @Sendable (Result<Int, ParleyError>) -> Void) {
        unreadCount(completion: completion)
    }

    /// Sets the delegate (held weakly), the queue it is called on (the settings' callback queue, the main queue on
    /// Apple platforms, by default) and the lowest level of log lines it gets.
    public func setDelegate(
        _ delegate: (any ParleyDelegate)?, queue: DispatchQueue? = nil, logLevel: Logger.Level = .info
    ) {
        delegates.set(delegate, queue: queue ?? settings.callbackQueue, logLevel: logLevel)
    }

    /// Asks the delegate whether a link tapped in a chat may open (true without a delegate).
    public func shouldOpenLink(_ url: URL) async -> Bool {
        await delegates.ask(true) { $0.shouldOpenLink(url) }
    }

    /// Opens a link tapped in a chat (a URL in a message's text, a file's link): asks the delegate's
    /// ``ParleyDelegate/shouldOpenLink(_:)`` first, then gives it to the settings' ``AppSettings/linkOpener`` (the
    /// system's on iOS and macOS). Returns whether it was opened: false when the delegate said no, or there is no
    /// opener (Linux), or the opener could not.
    @discardableResult
    public func openLink(_ url: URL) async -> Bool {
        guard await shouldOpenLink(url) else { return false }
        guard let opener = settings.linkOpener else { return false }
        return await opener.open(url)
    }
}
