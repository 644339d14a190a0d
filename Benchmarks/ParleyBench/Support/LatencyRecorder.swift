import Histogram
import NIOConcurrencyHelpers

/// Latencies in microseconds, recorded from any thread into one HdrHistogram (3 significant digits, up to 10 min).
final class LatencyRecorder: Sendable {
    private let histogram = NIOLockedValueBox(LatencyRecorder.empty())

    static func empty() -> Histogram<UInt64> {
        Histogram<UInt64>(highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: .three)
    }

    /// Records the time from `start` (monotonic nanoseconds) to `end`.
    func record(from start: UInt64, to end: UInt64) {
        let micros = end > start ? (end - start) / 1_000 : 0
        histogram.withLockedValue { _ = $0.record(Swift.min(micros, 600_000_000)) }
    }

    func record(micros: UInt64) {
        histogram.withLockedValue { _ = $0.record(Swift.min(micros, 600_000_000)) }
    }

    func add(_ other: Histogram<UInt64>) {
        histogram.withLockedValue { $0.add(other) }
    }

    func reset() {
        histogram.withLockedValue { $0.reset() }
    }

    var snapshot: Histogram<UInt64> { histogram.withLockedValue { $0 } }

    var summary: LatencySummary { LatencySummary(snapshot) }
}

/// The percentiles a scenario reports, in milliseconds.
struct LatencySummary: Codable, Sendable {
    var count: UInt64
    var p50: Double
    var p90: Double
    var p99: Double
    var p999: Double
    var max: Double
    var mean: Double

    init(_ histogram: Histogram<UInt64>) {
        count = histogram.totalCount
        func ms(_ micros: UInt64) -> Double { Double(micros) / 1000 }
        if count == 0 {
            p50 = 0
            p90 = 0
            p99 = 0
            p999 = 0
            max = 0
            mean = 0
        } else {
            p50 = ms(histogram.valueAtPercentile(50))
            p90 = ms(histogram.valueAtPercentile(90))
            p99 = ms(histogram.valueAtPercentile(99))
            p999 = ms(histogram.valueAtPercentile(99.9))
            max = ms(histogram.max)
            mean = histogram.mean / 1000
        }
    }

    /// `p50=0.81ms p99=3.2ms` style, for the summary line.
    func line(_ percentiles: [(String, KeyPath<LatencySummary, Double>)]) -> String {
        percentiles.map { "\($0.0)=\(Format.ms(self[keyPath: $0.1]))" }.joined(separator: " ")
    }
}

enum Format {
    static func ms(_ value: Double) -> String {
        if value < 10 { return fixed(value, 2) + "ms" }
        if value < 100 { return fixed(value, 1) + "ms" }
        return fixed(value, 0) + "ms"
    }

    static func fixed(_ value: Double, _ digits: Int) -> String {
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let rounded = (value * scale).rounded() / scale
        if digits == 0 { return String(Int(rounded)) }
        var text = String(rounded)
        if let dot = text.firstIndex(of: ".") {
            let decimals = text.distance(from: dot, to: text.endIndex) - 1
            if decimals < digits { text += String(repeating: "0", count: digits - decimals) }
        }
        return text
    }

    static func rate(_ value: Double) -> String { String(Int(value.rounded())) + "/s" }

    static func bytes(_ value: Double) -> String {
        if value >= 1024 * 1024 { return fixed(value / 1024 / 1024, 1) + "MiB" }
        if value >= 1024 { return fixed(value / 1024, 1) + "KiB" }
        return fixed(value, 0) + "B"
    }
}
