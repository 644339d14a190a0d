import Foundation
import Histogram
import NIOConcurrencyHelpers

/// Which socket received which bench message, when: end-to-end latency, lost and duplicated deliveries. Latency is
/// also kept apart by a path the caller names (e.g. 0 = sender and receiver on one node, 1 = on two nodes).
final class DeliveryLedger: Sendable {
    private struct State {
        var seen: [Set<Int32>]
        var unique = 0
        var duplicates = 0
        var histogram = LatencyRecorder.empty()
        /// One per path, for ``latency(path:)``; none with one path (the overall histogram is that path's).
        var paths: [Histogram<UInt64>]
        /// Unique deliveries, per path.
        var uniqueByPath: [Int]
        var firstDelivery: UInt64 = .max
        var lastDelivery: UInt64 = 0
        /// Every text frame, bench message or not (to see when the server has gone quiet).
        var frames = 0
        /// Each measured delivery, when asked for (``writeDeliveries(to:)``).
        var deliveries: [Delivery]?
    }

    /// One measured delivery.
    struct Delivery {
        var sentAt: UInt64
        var receivedAt: UInt64
        var message: Int32
        var socket: Int32
    }

    private let state: NIOLockedValueBox<State>

    /// - Parameters:
    ///   - paths: how many paths deliveries are told apart by
    ///     (``delivered(socket:message:sentAt:receivedAt:measure:path:)``).
    ///   - keepsDeliveries: keep every measured delivery for ``writeDeliveries(to:)``.
    init(sockets: Int, paths: Int = 1, keepsDeliveries: Bool = false) {
        state = NIOLockedValueBox(
            State(
                seen: Array(repeating: [], count: sockets),
                paths: paths > 1 ? Array(repeating: LatencyRecorder.empty(), count: paths) : [],
                uniqueByPath: Array(repeating: 0, count: max(1, paths)),
                deliveries: keepsDeliveries ? [] : nil
            )
        )
    }

    func frame() {
        state.withLockedValue { $0.frames += 1 }
    }

    /// A bench message reached a socket by `path`; its latency counts unless `measure` is false (a warm-up message).
    func delivered(socket: Int, message: Int, sentAt: UInt64, receivedAt: UInt64, measure: Bool = true, path: Int = 0) {
        state.withLockedValue { state in
            state.frames += 1
            if state.seen[socket].insert(Int32(message)).inserted {
                state.unique += 1
                state.uniqueByPath[path] += 1
                if measure {
                    let micros = min(receivedAt > sentAt ? (receivedAt - sentAt) / 1000 : 0, 600_000_000)
                    _ = state.histogram.record(micros)
                    if !state.paths.isEmpty { _ = state.paths[path].record(micros) }
                    state.deliveries?.append(
                        Delivery(
                            sentAt: sentAt, receivedAt: receivedAt, message: Int32(message), socket: Int32(socket)))
                }
                state.firstDelivery = min(state.firstDelivery, receivedAt)
                state.lastDelivery = max(state.lastDelivery, receivedAt)
            } else {
                state.duplicates += 1
            }
        }
    }

    var frames: Int { state.withLockedValue { $0.frames } }
    var unique: Int { state.withLockedValue { $0.unique } }
    /// Unique deliveries by one path.
    func unique(path: Int) -> Int { state.withLockedValue { $0.uniqueByPath[path] } }
    var duplicates: Int { state.withLockedValue { $0.duplicates } }
    var latency: LatencySummary { LatencySummary(state.withLockedValue { $0.histogram }) }
    /// The latency of the deliveries by one path.
    func latency(path: Int) -> LatencySummary {
        LatencySummary(state.withLockedValue { $0.paths.isEmpty ? $0.histogram : $0.paths[path] })
    }
    var lastDelivery: UInt64 { state.withLockedValue { $0.lastDelivery } }

    /// Forgets the latencies recorded so far (after a warm-up), keeping the delivery bookkeeping.
    func resetLatency() {
        state.withLockedValue { state in
            state.histogram.reset()
            for index in state.paths.indices { state.paths[index].reset() }
            if state.deliveries != nil { state.deliveries = [] }
        }
    }

    /// Writes the measured deliveries as CSV, in the order they were sent: `sent_us,latency_us,message,socket`, the
    /// send time on `CLOCK_MONOTONIC` (as `perf record -k CLOCK_MONOTONIC` stamps samples, to line them up).
    func writeDeliveries(to path: String) throws {
        let deliveries = state.withLockedValue { $0.deliveries ?? [] }.sorted { $0.sentAt < $1.sentAt }
        var text = "sent_us,latency_us,message,socket\n"
        for delivery in deliveries {
            let latency = delivery.receivedAt > delivery.sentAt ? (delivery.receivedAt - delivery.sentAt) / 1000 : 0
            text += "\(delivery.sentAt / 1000),\(latency),\(delivery.message),\(delivery.socket)\n"
        }
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }
}

/// Counts from any thread.
final class Counter: Sendable {
    private let value = NIOLockedValueBox(0)
    func add(_ amount: Int = 1) { value.withLockedValue { $0 += amount } }
    var count: Int { value.withLockedValue { $0 } }
}
