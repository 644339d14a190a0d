import NIOConcurrencyHelpers
import ParleyStore

/// One ``TokenBucket`` per key (a client address, a user), any thread.
///
/// Memory stays bounded: full buckets are dropped every `sweepInterval`, and should more than `maxKeys` be live at
/// once (an attack from very many addresses), the limiter forgets them all and starts over rather than grow.
final class RateLimiter<Key: Hashable & Sendable>: Sendable {
    let limit: RateLimit
    let maxKeys: Int
    let sweepInterval: Duration
    private let time: ServerClock

    private struct State {
        var buckets: [Key: TokenBucket] = [:]
        var lastSweep: Duration = .zero
    }

    private let state = NIOLockedValueBox(State())

    init(_ limit: RateLimit, time: ServerClock, maxKeys: Int = 100_000, sweepInterval: Duration = .seconds(10)) {
        self.limit = limit
        self.time = time
        self.maxKeys = maxKeys
        self.sweepInterval = sweepInterval
    }

    /// Takes one action of `key`'s budget: nil when allowed, else how long until the next one would be.
    func take(_ key: Key) -> Duration? {
        let now = time.timeline.now()
        let limit = self.limit
        return state.withLockedValue { state in
            if now - state.lastSweep >= sweepInterval || state.buckets.count >= maxKeys {
                state.lastSweep = now
                state.buckets = state.buckets.filter { _, bucket in
                    var bucket = bucket
                    return !bucket.isFull(now: now)
                }
                if state.buckets.count >= maxKeys { state.buckets = [:] }
            }
            var bucket = state.buckets[key] ?? TokenBucket(limit, now: now)
            let wait = bucket.retryAfter(takingAt: now)
            state.buckets[key] = bucket
            return wait
        }
    }

    /// Keys with a bucket now (the tests look at it).
    var keyCount: Int { state.withLockedValue { $0.buckets.count } }
}
