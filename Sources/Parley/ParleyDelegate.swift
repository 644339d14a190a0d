import Foundation
import Logging
import NIOConcurrencyHelpers

/// What the app hears from the SDK outside a chat: the unread count, the network status, the SDK's log, and
/// whether a link tapped in a chat may open. Set it with ``ParleyClient/setDelegate(_:queue:logLevel:)``.
///
/// Every method has a default, so implement only what you need. They are called on the queue passed to
/// `setDelegate` (the settings' callback queue by default: the main queue on Apple platforms).
///
/// ```swift
/// @MainActor final class Badge: ParleyDelegate {
///     nonisolated func unreadCountChanged(_ count: Int) { MainActor.assumeIsolated { label.text = "\(count)" } }
/// }
/// client.setDelegate(badge, queue: .main, logLevel: .warning)
/// ```
public protocol ParleyDelegate: AnyObject, Sendable {
    /// The total number of unread messages of the signed-in user changed (any device read or received one).
    func unreadCountChanged(_ count: Int)
    /// The socket's status changed (connecting, connected, disconnected, with the error when there was one).
    func networkStatusChanged(_ status: ConnectionStatus)
    /// A log line of the SDK at or above the level given to `setDelegate`.
    func log(level: Logger.Level, message: String)
    /// Whether a link in a chat may be opened by the SDK's default handling; return false to handle it yourself.
    /// Default: true.
    func shouldOpenLink(_ url: URL) -> Bool
}

extension ParleyDelegate {
    public func unreadCountChanged(_ count: Int) {}
    public func networkStatusChanged(_ status: ConnectionStatus) {}
    public func log(level: Logger.Level, message: String) {}
    public func shouldOpenLink(_ url: URL) -> Bool { true }
}

/// Holds the app's delegate (weakly), its queue and log level, and calls it.
final class DelegateHub: Sendable {
    private struct State {
        weak var delegate: (any ParleyDelegate)?
        var queue: DispatchQueue
        var logLevel: Logger.Level = .info
    }

    private let state: NIOLockedValueBox<State>

    init(queue: DispatchQueue) {
        state = NIOLockedValueBox(State(queue: queue))
    }

    func set(_ delegate: (any ParleyDelegate)?, queue: DispatchQueue, logLevel: Logger.Level) {
        state.withLockedValue { $0 = State(delegate: delegate, queue: queue, logLevel: logLevel) }
    }

    var logLevel: Logger.Level { state.withLockedValue { $0.logLevel } }

    /// Calls `body` with the delegate on its queue, when there is a delegate.
    func notify(_ body: @escaping @Sendable (any ParleyDelegate) -> Void) {
        let (delegate, queue) = state.withLockedValue { ($0.delegate, $0.queue) }
        guard let delegate else { return }
        queue.async { body(delegate) }
    }

    /// Asks the delegate on its queue; `fallback` when there is none.
    func ask<T: Sendable>(_ fallback: T, _ body: @escaping @Sendable (any ParleyDelegate) -> T) async -> T {
        let (delegate, queue) = state.withLockedValue { ($0.delegate, $0.queue) }
        guard let delegate else { return fallback }
        return await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: body(delegate)) }
        }
    }

    /// Follows the SDK's events: an unread summary tells the new total.
    func observe(_ event: Event) {
        if case .unreadUpdated(let summary) = event.payload {
            notify { $0.unreadCountChanged(summary.total) }
        }
    }
}

/// Sends the SDK's log lines where the app's logging system sends them (`base`, at its level) and to the delegate, at
/// the level the app chose with `setDelegate(_:queue:logLevel:)`.
///
/// Not swift-log's `MultiplexLogHandler`: that one fixes its level when it is made, so a delegate that later asks for
/// more (`.trace`) than the handlers had then would never get the lines between.
struct DelegateLogHandler: LogHandler {
    let hub: DelegateHub
    var base: any LogHandler
    var metadata: Logger.Metadata = [:]

    /// The lower of the two levels, read at every line: a line either of them wants gets through.
    var logLevel: Logger.Level {
        get { min(base.logLevel, hub.logLevel) }
        set { base.logLevel = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        if event.level >= base.logLevel { base.log(event: event) }
        guard event.level >= hub.logLevel else { return }
        let text = event.message.description
        let level = event.level
        hub.notify { $0.log(level: level, message: text) }
    }
}
