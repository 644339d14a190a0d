import NIOConcurrencyHelpers
import ParleyStore

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
