extension Duration {
    /// The duration in whole nanoseconds, clamped to `Int64`.
    var wholeNanoseconds: Int64 {
        let (seconds, attoseconds) = self.components
        let (secondsNanos, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow {
            return seconds < 0 ? .min : .max
        }
        return secondsNanos.addingReportingOverflow(attoseconds / 1_000_000_000).overflow
            ? .max : secondsNanos + attoseconds / 1_000_000_000
    }

    /// This duration times a fraction in `0...1`, to the nanosecond.
    func scaled(by fraction: Double) -> Duration {
        .nanoseconds(Int64((Double(self.wholeNanoseconds) * fraction).rounded(.down)))
    }
}
