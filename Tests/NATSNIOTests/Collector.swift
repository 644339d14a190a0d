import NIOConcurrencyHelpers
import ParleyTesting

/// Collects values and lets a test wait, bounded, for a condition on them (no sleeping).
final class Collector<Element: Sendable>: Sendable {
    private struct Waiter {
        var predicate: @Sendable ([Element]) -> Bool
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var items: [Element] = []
        var waiters: [UInt64: Waiter] = [:]
        var nextID: UInt64 = 0
    }

    private let state = NIOLockedValueBox(State())

    init() {}

    /// Everything collected so far.
    var items: [Element] { self.state.withLockedValue { $0.items } }

    func append(_ newItems: some Sequence<Element>) {
        let ready: [CheckedContinuation<Void, any Error>] = self.state.withLockedValue { state in
            state.items.append(contentsOf: newItems)
            var ready: [CheckedContinuation<Void, any Error>] = []
            for (id, waiter) in state.waiters where waiter.predicate(state.items) {
                ready.append(waiter.continuation)
                state.waiters[id] = nil
            }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    /// Waits until `predicate` holds for the items; throws after `timeout` naming `what`.
    @discardableResult
    func wait(
        for what: String, timeout: Duration = .seconds(60), until predicate: @escaping @Sendable ([Element]) -> Bool
    ) async throws -> [Element] {
        let id = self.state.withLockedValue { state in
            state.nextID += 1
            return state.nextID
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await Task.sleep(for: timeout)
                let waiter = self.state.withLockedValue { $0.waiters.removeValue(forKey: id) }
                let count = self.items.count
                waiter?.continuation.resume(
                    throwing: TestFailure("timed out after \(timeout) waiting for \(what) (\(count) items)"))
            }
            defer { group.cancelAll() }
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let satisfied = self.state.withLockedValue { state in
                    if predicate(state.items) { return true }
                    state.waiters[id] = Waiter(predicate: predicate, continuation: continuation)
                    return false
                }
                if satisfied { continuation.resume() }
            }
        }
        return self.items
    }
}
