import NIOConcurrencyHelpers
import ParleyProtocol
import ServiceLifecycle

/// One-shot timers of one fixed delay by key, on a ``Timeline``, all run by one task: scheduling a key again
/// replaces its timer, cancelling it drops it.
///
/// Because every timer has the same delay, deadlines come in the order timers are scheduled: they wait in a queue and
/// ``run(_:)`` sleeps until the first one. A timer costs a queue entry, not a task (``KeyedTimers`` starts one per
/// key), so ten thousand sockets closing at once (a presence grace each) cost ten thousand entries. Deadlines are
/// rounded up to a multiple of `granularity` on the timeline, so that timers started all the time (every user's
/// unread interval under load) wake the runner at most once per `granularity`, not once per timer.
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
    let granularity: Duration
    let timeline: Timeline
    private let state = NIOLockedValueBox(State())
    private let wakeUp = WakeUpSignal()

    init(delay: Duration, granularity: Duration = .milliseconds(10), timeline: Timeline) {
        self.delay = delay
        self.granularity = granularity
        self.timeline = timeline
    }

    /// Starts (or restarts) the timer of `key`: it runs out `delay` from now (rounded up to the granularity).
    func schedule(_ key: Key) {
        let deadline = Self.roundUp(timeline.now() + delay, to: granularity)
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

    /// `time` rounded up to a whole multiple of `granularity` (in nanoseconds, so exact multiples stay as they are).
    static func roundUp(_ time: Duration, to granularity: Duration) -> Duration {
        let step = granularity.nanoseconds
        let value = time.nanoseconds
        guard step > 0 else { return time }
        let steps = value / step + (value % step > 0 ? 1 : 0)
        return .nanoseconds(steps * step)
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

extension FixedDelayTimers {
    /// Runs a tracker whose changes are handled one at a time, in order, with these timers' expiries fed into the same
    /// stream (as `expired(key)`); returns at graceful shutdown, once the changes queued before it are handled.
    func runInOrder<Change: Sendable>(
        _ changes: AsyncStream<Change>, sink: AsyncStream<Change>.Continuation,
        expired: @escaping @Sendable (Key) -> Change, handle: (Change) async -> Void
    ) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.run { sink.yield(expired($0)) } }
            await withGracefulShutdownHandler {
                for await change in changes {
                    await handle(change)
                }
            } onGracefulShutdown: {
                sink.finish()
            }
            group.cancelAll()
        }
    }
}
