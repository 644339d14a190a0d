import NIOConcurrencyHelpers
import ParleyProtocol

/// One-shot timers of one fixed delay by key, on a ``Timeline``, all run by one task: scheduling a key again
/// replaces its timer, cancelling it drops it.
///
/// Because every timer has the same delay, deadlines come in the order timers are scheduled: they wait in a queue and
/// ``run(_:)`` sleeps until the first one. A timer costs a queue entry, not a task (``KeyedTimers`` starts one per
/// key), so ten thousand sockets closing at once (a presence grace each) cost ten thousand entries.
final class FixedDelayTimers<Key: Hashable & Sendable>: Sendable {
    private struct Entry: Sendable {
        var deadline: Duration
        var key: Key
        var generation: UInt64
    }

    private struct State: Sendable {
        /// The live timer of each key.
        var generations: [Key: UInt64] = [:]
        var queue = FIFO<Entry>()
        var nextGeneration: UInt64 = 0
    }

    let delay: Duration
    let timeline: Timeline
    private let state = NIOLockedValueBox(State())
    private let wakeUp = WakeUpSignal()

    init(delay: Duration, timeline: Timeline) {
        self.delay = delay
        self.timeline = timeline
    }

    /// Starts (or restarts) the timer of `key`: it runs out `delay` from now.
    func schedule(_ key: Key) {
        let deadline = timeline.now() + delay
        let wasEmpty = state.withLockedValue { state -> Bool in
            state.nextGeneration += 1
            state.generations[key] = state.nextGeneration
            let wasEmpty = state.queue.count == 0
            state.queue.append(Entry(deadline: deadline, key: key, generation: state.nextGeneration))
            return wasEmpty
        }
        // A queue that had entries has its runner sleeping until a deadline no later than this one.
        if wasEmpty { wakeUp.signal() }
    }

    /// Stops the timer of `key`; returns whether there was one.
    @discardableResult
    func cancel(_ key: Key) -> Bool {
        state.withLockedValue { $0.generations.removeValue(forKey: key) != nil }
    }

    func isScheduled(_ key: Key) -> Bool {
        state.withLockedValue { $0.generations[key] != nil }
    }

    /// Calls `expired` with each key whose timer ran out, in deadline order, until the task is cancelled.
    func run(_ expired: (Key) async -> Void) async {
        while !Task.isCancelled {
            let now = timeline.now()
            let (due, next) = state.withLockedValue { state -> ([Key], Duration?) in
                var due: [Key] = []
                while let first = state.queue.first, first.deadline <= now {
                    state.queue.removeFirst()
                    guard state.generations[first.key] == first.generation else { continue }
                    state.generations[first.key] = nil
                    due.append(first.key)
                }
                return (due, state.queue.first?.deadline)
            }
            for key in due { await expired(key) }
            if due.isEmpty { await wakeUp.wait(orUntil: next, on: timeline) }
        }
    }
}
