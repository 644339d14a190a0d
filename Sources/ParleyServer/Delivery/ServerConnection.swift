import NIOCore
import ParleyProtocol

/// One authenticated WebSocket connection, as the hub sees it.
final class ServerConnection: Sendable {
    let id: String
    let principal: UserPrincipal
    let outbound: OutboundQueue
    /// Receives `presence.update` for every user of the app (the client's `subscribePresenceForAllUsers`).
    let subscribesToAllPresence: Bool
    /// The socket that writes the queue.
    let socket: SocketHandle

    /// - Parameter held: queue frames without writing them until ``OutboundQueue/release()`` (a connection that is
    ///   being caught up).
    init(
        id: String, principal: UserPrincipal, socket: SocketHandle, outboundLimitBytes: Int,
        subscribesToAllPresence: Bool = false, held: Bool = false
    ) {
        self.id = id
        self.principal = principal
        self.socket = socket
        self.outbound = OutboundQueue(limitBytes: outboundLimitBytes, held: held)
        self.subscribesToAllPresence = subscribesToAllPresence
    }

    /// Queues a frame and wakes the writer if it needs waking. Returns false when the connection is closing.
    @discardableResult
    func push(_ frame: ByteBuffer) -> Bool {
        let push = outbound.push(frame)
        if push.wakesWriter { socket.wake() }
        return push.accepted
    }

    /// Closes the connection with this code and reason (what is still queued is dropped, unless `afterQueued`). The
    /// first request wins.
    func requestClose(code: UInt16, reason: ErrorCode, afterQueued: Bool = false) {
        if outbound.requestClose(code: code, reason: reason, afterQueued: afterQueued) { socket.wake() }
    }
}
