import NIOConcurrencyHelpers
import ParleyStore

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
