import Histogram
import NIOConcurrencyHelpers

/// Which socket received which bench message, when: end-to-end latency, lost and duplicated deliveries.
final class DeliveryLedger: Sendable {
    private struct State {
        var seen: [Set<Int32>]
        var unique = 0
        var duplicates = 0
        var histogram = LatencyRecorder.empty()
        var firstDelivery: UInt64 = .max
        var lastDelivery: UInt64 = 0
        /// Every text frame, bench message or not (to see when the server has gone quiet).
        var frames = 0
    }

    private let state: NIOLockedValueBox<State>

    init(sockets: Int) {
        state = NIOLockedValueBox(State(seen: Array(repeating: [], count: sockets)))
    }

    func frame() {
        state.withLockedValue { $0.frames += 1 }
    }

    /// A bench message reached a socket; its latency counts unless `measure` is false (a warm-up message).
    func delivered(socket: Int, message: Int, sentAt: UInt64, receivedAt: UInt64, measure: Bool = true) {
        state.withLockedValue { state in
            state.frames += 1
            if state.seen[socket].insert(Int32(message)).inserted {
                state.unique += 1
                if measure {
                    _ = state.histogram.record(min(receivedAt > sentAt ? (receivedAt - sentAt) / 1000 : 0, 600_000_000))
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
    var duplicates: Int { state.withLockedValue { $0.duplicates } }
    var latency: LatencySummary { LatencySummary(state.withLockedValue { $0.histogram }) }
    var lastDelivery: UInt64 { state.withLockedValue { $0.lastDelivery } }

    /// Forgets the latencies recorded so far (after a warm-up), keeping the delivery bookkeeping.
    func resetLatency() {
        state.withLockedValue { $0.histogram.reset() }
    }
}

/// Counts from any thread.
final class Counter: Sendable {
    private let value = NIOLockedValueBox(0)
    func add(_ amount: Int = 1) { value.withLockedValue { $0 += amount } }
    var count: Int { value.withLockedValue { $0 } }
}
