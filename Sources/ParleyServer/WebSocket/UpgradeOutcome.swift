import NIOConcurrencyHelpers

/// How a connection's first request ended (``ParleyHTTPChannel/UpgradeResult``), decided on the connection's event
/// loop and awaited by the task Hummingbird's server runs for the connection.
///
/// `EventLoopFuture.get()` would do the same with two thread hops for every connection: the task's callback is
/// scheduled on the event loop, which then resumes the task. Here the loop resumes the task directly, and a task that
/// asks after the decision does not suspend at all.
final class UpgradeOutcome: Sendable {
    typealias Value = Result<ParleyHTTPChannel.UpgradeResult, any Error>

    private enum State {
        case pending
        case waiting(CheckedContinuation<Value, Never>)
        case decided(Value)
    }

    private let state = NIOLockedValueBox(State.pending)

    /// Whether a task is suspended in ``value()``, waiting for the decision.
    var hasWaiter: Bool {
        state.withLockedValue { state in
            if case .waiting = state { true } else { false }
        }
    }

    /// Records the outcome and resumes the task waiting for it. Only the first decision counts.
    func decide(_ value: Value) {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Value, Never>? in
            switch state {
            case .pending:
                state = .decided(value)
                return nil
            case .waiting(let continuation):
                state = .decided(value)
                return continuation
            case .decided:
                return nil
            }
        }
        waiter?.resume(returning: value)
    }

    /// The outcome, once decided. Like `EventLoopFuture.get()`, it does not end early when the task is cancelled: the
    /// connection's own close decides it.
    func value() async throws -> ParleyHTTPChannel.UpgradeResult {
        if case .decided(let value) = state.withLockedValue({ $0 }) { return try value.get() }
        let value = await withCheckedContinuation { continuation in
            let decided = state.withLockedValue { state -> Value? in
                if case .decided(let value) = state { return value }
                state = .waiting(continuation)
                return nil
            }
            if let decided { continuation.resume(returning: decided) }
        }
        return try value.get()
    }
}
