import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore

/// Asks the database whether it answers, with one question in flight at a time: callers that come while one is out
/// wait for its answer, each at most until its own deadline. A database that hangs holds one question, not one per
/// health request.
final class DatabaseProbe: Sendable {
    private struct State {
        var asking = false
        var waiters: [UInt64: CheckedContinuation<String?, Never>] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let state = NIOLockedValueBox(State())

    /// Nil when the store answered in time; else why not.
    func check(_ store: any ParleyStore, timeline: Timeline, timeout: Duration) async -> String? {
        let deadline = timeline.now() + timeout
        return await withCheckedContinuation { continuation in
            let (id, ask) = state.withLockedValue { state -> (UInt64, Bool) in
                let id = state.nextWaiter
                state.nextWaiter += 1
                state.waiters[id] = continuation
                let ask = !state.asking
                state.asking = true
                return (id, ask)
            }
            if ask {
                Task {
                    var failure: String?
                    do {
                        try await store.checkHealth()
                    } catch {
                        failure = "\(error)"
                    }
                    let waiters = self.state.withLockedValue { state in
                        defer {
                            state.waiters = [:]
                            state.asking = false
                        }
                        return Array(state.waiters.values)
                    }
                    for waiter in waiters { waiter.resume(returning: failure) }
                }
            }
            Task {
                try? await timeline.sleepUntil(deadline)
                let waiter = self.state.withLockedValue { $0.waiters.removeValue(forKey: id) }
                waiter?.resume(returning: "no answer within \(timeout)")
            }
        }
    }
}
