/// Time as Parley's timing rules see it: a duration since a start, read from an injected clock.
///
/// Heartbeats, backoff, typing expiry and presence grace take a `Timeline`, so that tests run them on a virtual
/// clock. Sleeping is until an absolute point of the timeline: a clock that moves between reading ``now`` and
/// starting to sleep (a test's clock, a device waking up) never stretches a deadline.
public struct Timeline: Sendable {
    /// Time since the timeline started.
    public let now: @Sendable () -> Duration
    /// Sleeps until `deadline` (time since the start); returns at once if it has passed.
    public let sleepUntil: @Sendable (_ deadline: Duration) async throws -> Void

    /// A timeline that starts now on `clock`.
    public init<C: Clock>(_ clock: C) where C.Duration == Duration {
        let start = clock.now
        now = { start.duration(to: clock.now) }
        sleepUntil = { deadline in try await clock.sleep(until: start.advanced(by: deadline), tolerance: nil) }
    }

    /// Sleeps for `duration` from now.
    public func sleep(for duration: Duration) async throws {
        try await sleepUntil(now() + duration)
    }
}
