import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore

/// Where the server is in its life, for `GET /health/ready`: starting until it listens (and, a node of several, until
/// it is connected to NATS), ready, then draining from the start of a graceful shutdown (a load balancer stops sending
/// new clients while the open ones are closed).
final class Readiness: Sendable {
    enum Phase: Sendable, Equatable {
        case starting
        case serving
        case draining
    }

    private struct State {
        var phase = Phase.starting
        var listening = false
        var clusterConnected: Bool
    }

    private let state: NIOLockedValueBox<State>

    /// - Parameter waitsForCluster: Whether the node is one of several: it is ready only once it is connected to NATS.
    init(waitsForCluster: Bool = false) {
        state = NIOLockedValueBox(State(clusterConnected: !waitsForCluster))
    }

    var current: Phase { state.withLockedValue { $0.phase } }

    /// The listener is up.
    func markServing() {
        state.withLockedValue { state in
            state.listening = true
            if state.phase == .starting, state.clusterConnected { state.phase = .serving }
        }
    }

    /// The node is connected to the other nodes.
    func markClusterConnected() {
        state.withLockedValue { state in
            state.clusterConnected = true
            if state.phase == .starting, state.listening { state.phase = .serving }
        }
    }

    /// A graceful shutdown began; never ready again.
    func markDraining() {
        state.withLockedValue { $0.phase = .draining }
    }
}
