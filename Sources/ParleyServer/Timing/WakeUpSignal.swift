import NIOConcurrencyHelpers
import ParleyProtocol

/// Wakes one waiting task; a signal sent while nobody waits is kept for the next wait.
final class WakeUpSignal: Sendable {
    private struct State {
        var signalled = false
        var waiter: (id: UInt64, continuation: CheckedContinuation<Void, Never>)?
        var nextID: UInt64 = 0
    }

    private let state = NIOLockedValueBox(State())

    func signal() {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.signalled = true
                return nil
            }
            state.waiter = nil
            return waiter.continuation
        }
        waiter?.resume()
    }

    /// Returns when signalled (at once if a signal came since the last wait), when `deadline` passes on the timeline,
    /// or when the task is cancelled.
    func wait(orUntil deadline: Duration?, on timeline: Timeline) async {
        guard let deadline else {
            await wait()
            return
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await timeline.sleepUntil(deadline) }
            group.addTask { await self.wait() }
            await group.next()
            group.cancelAll()
        }
    }

    private func wait() async {
        let id = state.withLockedValue { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLockedValue { state -> Bool in
                    if state.signalled || Task.isCancelled {
                        state.signalled = false
                        return true
                    }
                    state.waiter = (id, continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
                guard let waiter = state.waiter, waiter.id == id else { return nil }
                state.waiter = nil
                return waiter.continuation
            }
            waiter?.resume()
        }
    }
}
