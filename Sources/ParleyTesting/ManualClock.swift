import NIOConcurrencyHelpers

/// A clock that moves only when a test says so: virtual time for the SDK's timing rules.
///
/// Sleepers wake, in deadline order, when ``advance(by:)`` passes their deadline. A sleeper whose deadline has
/// already passed when it starts sleeping returns at once, so a test cannot lose a wake-up by advancing before
/// the code under test reached its `sleep`.
///
/// ```swift
/// let clock = ManualClock()
/// let client = try ParleyClient(appId: id, settings: settings, clock: clock)
/// clock.advance(by: .seconds(30))   // the background grace expires
/// ```
public final class ManualClock: Clock, Sendable {
    public struct Instant: InstantProtocol, Sendable, Hashable, Comparable {
        /// Time since the clock was created.
        public var offset: Duration

        public init(offset: Duration) { self.offset = offset }
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper {
        var id: UInt64
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct Waiter {
        var matches: @Sendable (Instant) -> Bool
        var continuation: CheckedContinuation<Instant, Never>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [Sleeper] = []
        var waiters: [Waiter] = []
        var nextID: UInt64 = 0
    }

    private let state = NIOLockedValueBox(State())

    public init() {}

    public var now: Instant { state.withLockedValue { $0.now } }
    public var minimumResolution: Duration { .zero }

    /// How many tasks are sleeping on this clock.
    public var sleeperCount: Int { state.withLockedValue { $0.sleepers.count } }

    /// The earliest deadline of a sleeper, if any.
    public var nextDeadline: Instant? { state.withLockedValue { $0.sleepers.map(\.deadline).min() } }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id = state.withLockedValue { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (ready, woken) = state.withLockedValue { state -> (Bool, [Waiter]) in
                    if deadline <= state.now { return (true, []) }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    let woken = state.waiters.filter { $0.matches(deadline) }
                    state.waiters.removeAll { $0.matches(deadline) }
                    return (false, woken)
                }
                if ready { continuation.resume() }
                for waiter in woken { waiter.continuation.resume(returning: deadline) }
            }
        } onCancel: {
            let cancelled = state.withLockedValue { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index).continuation
            }
            cancelled?.resume(throwing: CancellationError())
        }
    }

    /// Waits until some task sleeps until a deadline that satisfies `matches` (at once if one already does);
    /// returns that deadline. Lets a test advance time only once the code under test is waiting for it.
    @discardableResult
    public func sleeper(where matches: @escaping @Sendable (Instant) -> Bool) async -> Instant {
        await withCheckedContinuation { continuation in
            let found = state.withLockedValue { state -> Instant? in
                if let sleeper = state.sleepers.first(where: { matches($0.deadline) }) { return sleeper.deadline }
                state.waiters.append(Waiter(matches: matches, continuation: continuation))
                return nil
            }
            if let found { continuation.resume(returning: found) }
        }
    }

    /// Waits for a sleeper whose deadline is exactly `offset` after the clock's start.
    @discardableResult
    public func sleeper(at offset: Duration) async -> Instant {
        await sleeper { $0.offset == offset }
    }

    /// Moves time forward, waking every sleeper whose deadline is reached.
    public func advance(by duration: Duration) {
        let woken = state.withLockedValue { state -> [Sleeper] in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }.sorted { $0.deadline < $1.deadline }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }

    /// Moves time to the earliest sleeper's deadline (if there is one) and wakes it; returns how far time moved.
    @discardableResult
    public func advanceToNextDeadline() -> Duration? {
        guard let deadline = nextDeadline else { return nil }
        let step = max(.zero, now.duration(to: deadline))
        advance(by: step)
        return step
    }
}
