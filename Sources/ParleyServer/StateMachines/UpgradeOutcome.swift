import NIOConcurrencyHelpers

/// How a connection's first request ended (``ParleyHTTPChannel/UpgradeResult``), decided on the connection's event
/// loop. ``ParleyHTTPServer`` hears it through ``whenDecided(_:)`` on that loop, and only an HTTP connection then gets a
/// task, whose ``value()`` has the decision without suspending.
///
/// `EventLoopFuture.get()` would do the same with two thread hops for every connection: the task's callback is
/// scheduled on the event loop, which then resumes the task. Here the loop resumes a waiting task directly, and a task
/// that asks after the decision does not suspend at all.
final class UpgradeOutcome: Sendable {
    typealias Value = Result<ParleyHTTPChannel.UpgradeResult, any Error>

    private enum State {
        case pending
        case waiting(CheckedContinuation<Value, Never>)
        case notifying(@Sendable (Value) -> Void)
        case decided(Value)
    }

    private let state = NIOLockedValueBox(State.pending)

    /// Whether a task is suspended in ``value()``, waiting for the decision.
    var hasWaiter: Bool {
        state.withLockedValue { state in
            if case .waiting = state { true } else { false }
        }
    }

    /// Records the outcome and resumes the task waiting for it, or calls the ``whenDecided(_:)`` callback. Only the
    /// first decision counts.
    func decide(_ value: Value) {
        let (waiter, callback) = state.withLockedValue {
            state -> (CheckedContinuation<Value, Never>?, (@Sendable (Value) -> Void)?) in
            switch state {
            case .pending:
                state = .decided(value)
                return (nil, nil)
            case .waiting(let continuation):
                state = .decided(value)
                return (continuation, nil)
            case .notifying(let callback):
                state = .decided(value)
                return (nil, callback)
            case .decided:
                return (nil, nil)
            }
        }
        waiter?.resume(returning: value)
        callback?(value)
    }

    /// Calls `callback` with the outcome: now if it is decided, else from ``decide(_:)`` (on the thread that decides,
    /// the connection's event loop). One callback, instead of a task waiting in ``value()``.
    func whenDecided(_ callback: @escaping @Sendable (Value) -> Void) {
        let decided = state.withLockedValue { state -> Value? in
            switch state {
            case .pending:
                state = .notifying(callback)
                return nil
            case .decided(let value):
                return value
            case .waiting, .notifying:
                preconditionFailure("UpgradeOutcome: one listener")
            }
        }
        if let decided { callback(decided) }
    }

    /// The outcome, once decided. Like `EventLoopFuture.get()`, it does not end early when the task is cancelled: the
    /// connection's own close decides it.
    func value() async throws -> ParleyHTTPChannel.UpgradeResult {
        if case .decided(let value) = state.withLockedValue({ $0 }) { return try value.get() }
        let value = await withCheckedContinuation { continuation in
            let decided = state.withLockedValue { state -> Value? in
                switch state {
                case .decided(let value):
                    return value
                case .pending:
                    state = .waiting(continuation)
                    return nil
                case .waiting, .notifying:
                    preconditionFailure("UpgradeOutcome: one listener")
                }
            }
            if let decided { continuation.resume(returning: decided) }
        }
        return try value.get()
    }
}
