/// How the server delivers webhooks to the apps' backends (docs/PROTOCOL.md, "Webhooks").
public struct WebhookConfiguration: Sendable, Hashable {
    /// How long one request may take (connecting, sending, the answer's head and body) before it counts as failed.
    public var requestTimeout: Duration = .seconds(10)
    /// Most requests in flight at once on one node.
    public var maxConcurrentRequests: Int = 16
    /// How failed deliveries are tried again.
    public var retry = WebhookRetryPolicy()
    /// Failed attempts in a row (no delivery taken in between) after which an endpoint is disabled.
    public var disableAfterFailures: Int = 50
    /// How often a node looks for deliveries it was not told about (events another node stored, retries).
    public var pollInterval: Duration = .seconds(1)
    /// The most of an answer's body read (and dropped); a receiver sending more is cut off, not failed.
    public var maxResponseBytes: Int = 64 * 1024

    public init() {}
}

/// When failed deliveries are tried again: exponential backoff with jitter, capped, then given up.
public struct WebhookRetryPolicy: Sendable, Hashable {
    /// The wait after the first failure; doubled after each further one.
    public var initialDelay: Duration = .seconds(5)
    /// The longest wait between two attempts.
    public var maximumDelay: Duration = .seconds(3600)
    /// Attempts after which a delivery is given up (state `failed`, listed, and can be sent again).
    public var maximumAttempts: Int = 12

    public init() {}

    /// The wait before attempt `attempts + 1` after `attempts` failures: `initialDelay * 2^(attempts-1)`, capped at
    /// `maximumDelay`, times a jitter factor in [0.5, 1) (`unit` in [0, 1), random in production) so that deliveries
    /// failed together do not come back together.
    public func delay(afterAttempts attempts: Int, unit: Double) -> Duration {
        var delay = initialDelay
        for _ in 1..<max(attempts, 1) {
            delay *= 2
            if delay >= maximumDelay { break }
        }
        let capped = min(delay, maximumDelay)
        return capped * (0.5 + 0.5 * min(max(unit, 0), 1))
    }
}
