import NIOCore

extension Duration {
    /// Whole milliseconds, rounded down (what is added to epoch milliseconds).
    var wholeMilliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }

    /// Whole milliseconds, rounded up (what `retryAfterMs` says).
    var roundedUpMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
    }

    var nanoseconds: Int64 {
        components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
    }

    /// The same duration for NIO's timers.
    var timeAmount: TimeAmount { .nanoseconds(nanoseconds) }
}
