#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Nanoseconds of the system's monotonic clock: the same clock in every process of the machine, so a time stamped
/// by one process (a sender, a worker) can be compared with one read by another.
enum Monotonic {
    static func nanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    static func seconds(since start: UInt64) -> Double {
        Double(nanoseconds() &- start) / 1e9
    }
}
