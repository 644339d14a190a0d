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

/// The server's rate limiters, built from ``EdgeLimits`` (nil where a limit is off).
struct EdgeRateLimiters: Sendable {
    /// New connections per client address.
    let connectionAttempts: RateLimiter<String>?
    /// `POST /v1/login` per client address.
    let logins: RateLimiter<String>?
    /// Messages per user, over the socket and REST.
    let sends: SendRateLimiter?

    init(_ limits: EdgeLimits, time: ServerClock) {
        connectionAttempts = limits.connectionAttemptsPerAddress.map { RateLimiter($0, time: time) }
        logins = limits.loginsPerAddress.map { RateLimiter($0, time: time) }
        sends = limits.messagesPerUser.map { SendRateLimiter(RateLimiter($0, time: time)) }
    }
}

/// Messages per user (of an app): the bucket of ``EdgeLimits/messagesPerUser``, on this node.
struct SendRateLimiter: Sendable {
    struct User: Hashable, Sendable {
        var appId: String
        var uid: String
    }

    let limiter: RateLimiter<User>

    init(_ limiter: RateLimiter<User>) {
        self.limiter = limiter
    }

    /// Takes one message of the user's budget; throws `ERR_RATE_LIMITED` with when to retry when it is spent.
    func take(appId: String, uid: String) throws {
        guard let wait = limiter.take(User(appId: appId, uid: uid)) else { return }
        let limit = limiter.limit
        throw DomainError(
            .rateLimited,
            "At most \(limit.burst) messages at once and \(limit.perSecond) per second; try again in \(wait.roundedUpMilliseconds) ms.",
            retryAfter: wait
        )
    }
}
