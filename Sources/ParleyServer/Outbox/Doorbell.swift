import NIOConcurrencyHelpers

/// Wakes one waiting task; a ring with nobody waiting is kept for the next wait (several rings count as one).
final class Doorbell: Sendable {
    private struct State {
        var rung = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = NIOLockedValueBox(State())

    func ring() {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.rung = true
            return nil
        }
        waiter?.resume()
    }

    /// Returns at the next ring (at once if one came since the last wait), or when the task is cancelled.
    func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLockedValue { state -> Bool in
                    if state.rung {
                        state.rung = false
                        return true
                    }
                    // Checked under the lock that the cancellation handler takes: no cancel is missed.
                    if Task.isCancelled { return true }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }
}
