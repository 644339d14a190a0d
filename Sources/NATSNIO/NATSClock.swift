/// The injected clock, opened once so the rest of the code deals in `Duration` since the clock box was made.
struct NATSClock: Sendable {
    /// The time since this box was made.
    let now: @Sendable () -> Duration
    /// Sleeps until a time (as returned by ``now``); throws when the task is cancelled.
    let sleepUntil: @Sendable (Duration) async throws -> Void

    init<C: Clock>(_ clock: C) where C.Duration == Duration {
        let start = clock.now
        self.now = { start.duration(to: clock.now) }
        self.sleepUntil = { deadline in
            try await clock.sleep(until: start.advanced(by: deadline), tolerance: nil)
        }
    }

    /// Sleeps for a duration.
    func sleep(for duration: Duration) async throws {
        try await self.sleepUntil(self.now() + duration)
    }

    /// Waits for a one-shot value; completes it with `error` when it has not arrived after `timeout`.
    func value<T: Sendable>(of waiter: NATSOneShot<T>, timeout: Duration, orThrow error: NATSError) async throws -> T {
        try await withThrowingTaskGroup(of: Void.self) { group in
            let deadline = self.now() + timeout
            group.addTask {
                try await self.sleepUntil(deadline)
                waiter.complete(.failure(error))
            }
            defer { group.cancelAll() }
            return try await waiter.value()
        }
    }
}
