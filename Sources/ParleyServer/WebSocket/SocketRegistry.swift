import NIOConcurrencyHelpers
import NIOCore
import ParleyProtocol

/// Every upgraded WebSocket of the server, registered or still in its handshake: what shutdown closes.
final class SocketRegistry: Sendable {
    private struct State {
        var sockets: [ObjectIdentifier: SocketHandle] = [:]
        var shuttingDown = false
    }

    private let state = NIOLockedValueBox(State())

    /// Adds a socket; false when the server is shutting down (the socket must close).
    func add(_ socket: SocketHandle) -> Bool {
        state.withLockedValue { state in
            guard !state.shuttingDown else { return false }
            state.sockets[ObjectIdentifier(socket)] = socket
            return true
        }
    }

    func remove(_ socket: SocketHandle) {
        _ = state.withLockedValue { $0.sockets.removeValue(forKey: ObjectIdentifier(socket)) }
    }

    var count: Int { state.withLockedValue { $0.sockets.count } }

    var isShuttingDown: Bool { state.withLockedValue { $0.shuttingDown } }

    /// Refuses new sockets from now on and asks every open one to close.
    func closeAll(code: UInt16, reason: ErrorCode) {
        let sockets = state.withLockedValue { state in
            state.shuttingDown = true
            return Array(state.sockets.values)
        }
        for socket in sockets { socket.close(code: code, reason: reason) }
    }

    /// Closes what is still open without waiting for the clients (the end of a shutdown).
    func closeChannels() {
        for socket in state.withLockedValue({ Array($0.sockets.values) }) {
            socket.channel.close(promise: nil)
        }
    }
}
