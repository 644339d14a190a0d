import NIOConcurrencyHelpers

/// A value that arrives once, awaited by at most one task; cancellation of the waiting task completes it with
/// `CancellationError`. Completing it again is ignored.
final class NATSOneShot<Value: Sendable>: Sendable {
    private enum State {
        case idle
        case waiting(CheckedContinuation<Value, any Error>)
        case done(Result<Value, any Error>)
    }

    private let state = NIOLockedValueBox(State.idle)

    /// Completes the value (first completion wins).
    func complete(_ result: Result<Value, any Error>) {
        let continuation: CheckedContinuation<Value, any Error>? = self.state.withLockedValue { state in
            switch state {
            case .idle:
                state = .done(result)
                return nil
            case .waiting(let continuation):
                state = .done(result)
                return continuation
            case .done:
                return nil
            }
        }
        continuation?.resume(with: result)
    }

    /// Waits for the value.
    func value() async throws -> Value {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let result: Result<Value, any Error>? = self.state.withLockedValue { state in
                    switch state {
                    case .idle:
                        state = .waiting(continuation)
                        return nil
                    case .waiting:
                        preconditionFailure("NATSOneShot awaited twice")
                    case .done(let result):
                        return result
                    }
                }
                if let result {
                    continuation.resume(with: result)
                }
            }
        } onCancel: {
            self.complete(.failure(CancellationError()))
        }
    }
}
