import NIOConcurrencyHelpers
import ParleyStore

/// A budget of actions, refilled continuously on the timeline: `burst` at once, then `perSecond`.
struct TokenBucket: Sendable {
    let limit: RateLimit
    private var tokens: Double
    private var last: Duration

    init(_ limit: RateLimit, now: Duration) {
        self.limit = limit
        self.tokens = Double(limit.burst)
        self.last = now
    }

    /// A bucket of `perSecond` actions per second, with as many at once.
    init(perSecond: Int, now: Duration) {
        self.init(RateLimit(perSecond: Double(perSecond), burst: perSecond), now: now)
    }

    var capacity: Int { limit.burst }

    /// Takes one token; false when the budget is spent.
    mutating func take(now: Duration) -> Bool {
        retryAfter(takingAt: now) == nil
    }

    /// Takes one token and returns nil, or returns how long until one is there (and takes nothing).
    mutating func retryAfter(takingAt now: Duration) -> Duration? {
        refill(now: now)
        guard tokens >= 1 else {
            guard limit.perSecond > 0 else { return .seconds(3600) }
            return .nanoseconds(Int64(((1 - tokens) / limit.perSecond * 1e9).rounded(.up)))
        }
        tokens -= 1
        return nil
    }

    /// Whether the bucket is full at `now` (it then holds nothing worth keeping).
    mutating func isFull(now: Duration) -> Bool {
        refill(now: now)
        return tokens >= Double(limit.burst)
    }

    private mutating func refill(now: Duration) {
        guard now > last else { return }
        let elapsed = now - last
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        tokens = min(Double(limit.burst), tokens + seconds * limit.perSecond)
        last = now
    }
}
