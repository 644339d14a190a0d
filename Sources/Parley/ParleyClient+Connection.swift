import Foundation

extension ParleyClient {
    // MARK: Status

    /// The connection status now.
    public var connectionStatus: ConnectionStatus {
        state.withLockedValue { $0.status }
    }

    /// Adds a connection listener (replacing one with the same id); it is called on the callback queue.
    public func addConnectionListener(_ id: String, _ listener: any ConnectionListener) {
        statusBroadcaster.add(id, listener)
    }

    /// Removes the connection listener with this id; it is called no more.
    public func removeConnectionListener(_ id: String) {
        statusBroadcaster.remove(id)
    }

    /// Every status change from now on.
    public func connectionStatusUpdates() -> AsyncStream<ConnectionStatus> {
        statusBroadcaster.stream()
    }

    // MARK: Manual control

    /// Opens the socket and returns once it is connected.
    ///
    /// Throws `ERR_NOT_LOGGED_IN` before login, `ERROR_WEBSOCKETS_ALLREADY_IN_CONNECTED_STATE` when already
    /// connected, or the error of the first failed attempt (the SDK keeps retrying where the rules allow).
    /// In auto mode it also resumes a connection stopped with ``disconnect()``.
    public func connect() async throws {
        try await driver.connect()
    }

    /// Closes the socket; only ``connect()`` (or, in auto mode, the next login) opens it again.
    public func disconnect() async {
        await driver.disconnect()
    }

    /// Manual mode: tells the SDK the app still wants the socket while in the background (another 30 s, by
    /// default) and returns when the server answers. Throws `ERROR_PING_NOT_AVAILABLE` in auto mode,
    /// `ERR_NOT_CONNECTED` while disconnected.
    public func ping() async throws {
        try await driver.ping()
    }

    /// Callback form of ``connect()``, as in the reference SDK.
    public func connect(
        onSuccess: @escaping @Sendable () -> Void, onError: @escaping @Sendable (ParleyError) -> Void
    ) {
        callback({ try await self.connect() }, onSuccess: { _ in onSuccess() }, onError: onError)
    }

    /// Callback form of ``disconnect()``.
    public func disconnect(
        onSuccess: @escaping @Sendable () -> Void, onError: @escaping @Sendable (ParleyError) -> Void = { _ in }
    ) {
        callback({ await self.disconnect() }, onSuccess: { _ in onSuccess() }, onError: onError)
    }

    /// Callback form of ``ping()``.
    public func ping(onSuccess: @escaping @Sendable () -> Void, onError: @escaping @Sendable (ParleyError) -> Void) {
        callback({ try await self.ping() }, onSuccess: { _ in onSuccess() }, onError: onError)
    }

    // MARK: App and network state

    /// The app went to the background. Auto mode disconnects at once; manual mode keeps the socket for the
    /// background grace period unless `ping()` extends it. While the outbox has work (a send or an upload), the SDK
    /// asks the settings' ``AppSettings/backgroundTime`` for time to finish it.
    public func appDidEnterBackground() async {
        await driver.appEnteredBackground()
        await background.appEnteredBackground()
    }

    /// The app came back to the foreground: reconnects at once where the mode allows.
    public func appWillEnterForeground() async {
        await driver.appEnteredForeground()
        await background.appEnteredForeground()
    }

    /// The device's network changed; reconnects at once when it returns.
    public func networkStatusChanged(available: Bool) async {
        await driver.networkChanged(available: available)
    }

    /// Runs `work` and reports its result on the callback queue.
    func callback<T: Sendable>(
        _ work: @escaping @Sendable () async throws -> T, onSuccess: @escaping @Sendable (T) -> Void,
        onError: @escaping @Sendable (ParleyError) -> Void
    ) {
        let queue = settings.callbackQueue
        Task {
            do {
                let value = try await work()
                queue.async { onSuccess(value) }
            } catch {
                let failure = RESTClient.parleyError(error)
                queue.async { onError(failure) }
            }
        }
    }
}
