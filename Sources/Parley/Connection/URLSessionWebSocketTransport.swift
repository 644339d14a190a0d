import Foundation
import NIOConcurrencyHelpers

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The SDK's WebSocket on Apple platforms: `URLSessionWebSocketTask`, the system's network stack (its proxy, VPN
/// and cellular handling, one stack with the REST calls). It compiles on Linux, where FoundationNetworking has the
/// types but libcurl has no WebSocket: there the SDK uses `WSClientTransport`, and the tests run this transport's
/// logic through its seam (`WebSocketTaskSeam`) over a real connection.
public struct URLSessionWebSocketTransport: WebSocketTransport {
    /// Makes the task of one connection, reporting its opening and closing to `observer`.
    let makeTask: @Sendable (URLRequest, WebSocketTaskObserver) -> any WebSocketTaskSeam
    /// How long opening may take before the attempt is given up.
    var openTimeout: Duration = .seconds(20)

    /// A transport over `URLSession`s made with `configuration` (one per connection), accepting messages of at most
    /// `maximumMessageSize` bytes from the server.
    public init(configuration: URLSessionConfiguration = .default, maximumMessageSize: Int = 8 * 1024 * 1024) {
        makeTask = { request, observer in
            SystemWebSocketTask(
                request: request, configuration: configuration, maximumMessageSize: maximumMessageSize,
                observer: observer
            )
        }
    }

    /// A transport over tasks `makeTask` makes (tests: a seam over another WebSocket client).
    @_spi(Testing) public init(
        makeTask: @escaping @Sendable (URLRequest, WebSocketTaskObserver) -> any WebSocketTaskSeam
    ) {
        self.makeTask = makeTask
    }

    /// Starts a connection to `url` with the token in its `Authorization` header, on a `URLSession` of its own.
    public func open(url: String, authToken: String) -> any TransportConnection {
        URLSessionConnection(url: url, authToken: authToken, openTimeout: openTimeout, makeTask: makeTask)
    }
}

/// What ``URLSessionWebSocketTransport`` does with a WebSocket task: `URLSessionWebSocketTask`'s calls, with
/// callbacks, so that the transport's logic can run over another client where URLSession has no WebSocket.
@_spi(Testing) public protocol WebSocketTaskSeam: Sendable {
    /// Starts the opening handshake; the observer hears `opened`, or `completed` with the error.
    func start()
    /// Sends a text message.
    func send(text: String, completion: @escaping @Sendable ((any Error)?) -> Void)
    /// The next message: its text (nil for a binary message), or the error that ended the connection.
    func receive(completion: @escaping @Sendable (Result<String?, any Error>) -> Void)
    /// Starts the close handshake with `code` (or drops the connection).
    func cancel(code: UInt16)
    /// The server's close frame, once one arrived (`closeCode` and `closeReason` of the task).
    var closeFrame: (code: UInt16, reason: String?)? { get }
}

/// Hears what a task's delegate hears.
@_spi(Testing) public final class WebSocketTaskObserver: Sendable {
    let opened: @Sendable () -> Void
    let closed: @Sendable (UInt16?, String?) -> Void
    let completed: @Sendable ((any Error)?) -> Void

    init(
        opened: @escaping @Sendable () -> Void, closed: @escaping @Sendable (UInt16?, String?) -> Void,
        completed: @escaping @Sendable ((any Error)?) -> Void
    ) {
        self.opened = opened
        self.closed = closed
        self.completed = completed
    }

    /// The handshake succeeded.
    public func didOpen() { opened() }
    /// The server's close frame arrived (its code and reason), or the close handshake ended.
    public func didClose(code: UInt16?, reason: String?) { closed(code, reason) }
    /// The task ended, with the error when it failed (before opening: the connection could not be made).
    public func didComplete(error: (any Error)?) { completed(error) }
}

/// One connection of ``URLSessionWebSocketTransport``: reads in a loop once open, reports exactly one ending.
final class URLSessionConnection: TransportConnection {
    let events: AsyncStream<TransportEvent>
    private let sink: AsyncStream<TransportEvent>.Continuation
    private struct State {
        var opened = false
        var ended = false
        var task: (any WebSocketTaskSeam)?
    }
    private let state = NIOLockedValueBox(State())

    init(
        url: String, authToken: String, openTimeout: Duration,
        makeTask: @Sendable (URLRequest, WebSocketTaskObserver) -> any WebSocketTaskSeam
    ) {
        (events, sink) = AsyncStream.makeStream(of: TransportEvent.self)
        guard let target = URL(string: url) else {
            end(.failed(ParleyError(.webSocketError, "The WebSocket URL \(url) is invalid.")))
            return
        }
        var request = URLRequest(url: target)
        // An empty token sends no header (a client that authenticates in the connect frame).
        if !authToken.isEmpty { request.setValue("Bearer \(authToken)", forHTTPHeaderField: "Authorization") }
        let observer = WebSocketTaskObserver(
            opened: { [weak self] in self?.didOpen() },
            closed: { [weak self] code, reason in self?.end(.closed(code: code, reason: reason)) },
            completed: { [weak self] error in
                self?.end(
                    error.map { .failed(ParleyError(.webSocketError, "The WebSocket failed.", underlying: "\($0)")) }
                        ?? .closed(code: nil, reason: nil)
                )
            }
        )
        let task = makeTask(request, observer)
        state.withLockedValue { $0.task = task }
        task.start()
        // An attempt that neither opens nor fails is given up.
        Task { [weak self] in
            try? await Task.sleep(for: openTimeout)
            guard let self, !self.state.withLockedValue({ $0.opened }) else { return }
            self.end(.failed(ParleyError(.timeout, "The WebSocket did not open in time.")))
        }
    }

    private func didOpen() {
        let first = state.withLockedValue { state -> Bool in
            guard !state.opened, !state.ended else { return false }
            state.opened = true
            return true
        }
        guard first else { return }
        sink.yield(.opened)
        receiveNext()
    }

    private func receiveNext() {
        guard let task = state.withLockedValue({ $0.ended ? nil : $0.task }) else { return }
        task.receive { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(let text):
                if let text { self.sink.yield(.text(text)) }
                self.receiveNext()
            case .failure(let error):
                // The read fails when the server closes, maybe before the delegate hears the close frame: the task
                // has it already. A read that fails without one is a broken connection.
                if let frame = self.state.withLockedValue({ $0.task })?.closeFrame {
                    self.end(.closed(code: frame.code, reason: frame.reason))
                } else {
                    self.end(.failed(ParleyError(.webSocketError, "The WebSocket failed.", underlying: "\(error)")))
                }
            }
        }
    }

    /// Reports the connection's one ending and lets the task go.
    private func end(_ event: TransportEvent) {
        let task = state.withLockedValue { state -> (any WebSocketTaskSeam)?? in
            guard !state.ended else { return .none }
            state.ended = true
            defer { state.task = nil }
            return .some(state.task)
        }
        guard case .some(let ending) = task else { return }
        sink.yield(event)
        sink.finish()
        ending?.cancel(code: 1001)
    }

    func send(_ text: String) {
        guard let task = state.withLockedValue({ $0.ended ? nil : $0.task }) else { return }
        task.send(text: text) { _ in }
    }

    func close(code: UInt16) {
        guard let task = state.withLockedValue({ $0.ended ? nil : $0.task }) else { return }
        task.cancel(code: code)
        // A connection that never finishes the close handshake is let go.
        Task { [weak self] in
            try? await Task.sleep(for: .seconds(3))
            self?.end(.closed(code: nil, reason: nil))
        }
    }
}

/// `URLSessionWebSocketTask` behind the seam, with the session's delegate feeding the observer.
final class SystemWebSocketTask: NSObject, WebSocketTaskSeam, URLSessionWebSocketDelegate, @unchecked Sendable {
    // Sendable: `task` and `session` are set once in init and never changed (URLSession and its tasks may be used from
    // any thread); `observer` is Sendable.
    private var task: URLSessionWebSocketTask!
    private var session: URLSession!
    private let observer: WebSocketTaskObserver

    init(
        request: URLRequest, configuration: URLSessionConfiguration, maximumMessageSize: Int,
        observer: WebSocketTaskObserver
    ) {
        self.observer = observer
        super.init()
        // The session holds its delegate until it is invalidated (at the task's end).
        session = URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
        task = session.webSocketTask(with: request)
        task.maximumMessageSize = maximumMessageSize
    }

    func start() { task.resume() }

    func send(text: String, completion: @escaping @Sendable ((any Error)?) -> Void) {
        task.send(.string(text)) { error in completion(error) }
    }

    func receive(completion: @escaping @Sendable (Result<String?, any Error>) -> Void) {
        task.receive { result in
            switch result {
            case .success(.string(let text)): completion(.success(text))
            case .success: completion(.success(nil))
            case .failure(let error): completion(.failure(error))
            }
        }
    }

    var closeFrame: (code: UInt16, reason: String?)? {
        guard task.closeCode != .invalid else { return nil }
        return (UInt16(clamping: task.closeCode.rawValue), task.closeReason.map { String(decoding: $0, as: UTF8.self) })
    }

    func cancel(code: UInt16) {
        task.cancel(with: URLSessionWebSocketTask.CloseCode(rawValue: Int(code)) ?? .goingAway, reason: nil)
        session.finishTasksAndInvalidate()
    }

    func urlSession(
        _ session: URLSession, webSocketTask: URLSessionWebSocketTask, didOpenWithProtocol protocol: String?
    ) {
        observer.didOpen()
    }

    func urlSession(
        _ session: URLSession, webSocketTask: URLSessionWebSocketTask,
        didCloseWith closeCode: URLSessionWebSocketTask.CloseCode, reason: Data?
    ) {
        observer.didClose(
            code: UInt16(clamping: closeCode.rawValue), reason: reason.map { String(decoding: $0, as: UTF8.self) })
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        observer.didComplete(error: error)
        session.finishTasksAndInvalidate()
    }
}
