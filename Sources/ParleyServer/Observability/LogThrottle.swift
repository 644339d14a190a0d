import Dispatch
import NIOConcurrencyHelpers

/// At most one of a log line per interval: the line a full disk makes is the same for every request it refuses, and
/// one that names the disk is enough (then one a minute while it lasts).
final class LogThrottle: Sendable {
    private let interval: UInt64
    /// When a line was last let through (uptime nanoseconds).
    private let last = NIOLockedValueBox<UInt64?>(nil)

    init(interval: Duration = .seconds(60)) {
        let (seconds, attoseconds) = interval.components
        self.interval = UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }

    /// Whether a line is due at `now` (uptime nanoseconds): the first one, then one per interval; taking it starts the
    /// next interval.
    func take(now: UInt64 = DispatchTime.now().uptimeNanoseconds) -> Bool {
        last.withLockedValue { last in
            guard last.map({ now &- $0 >= interval }) ?? true else { return false }
            last = now
            return true
        }
    }
}
