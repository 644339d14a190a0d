import NIOConcurrencyHelpers
import NIOCore
import ParleyProtocol

/// One upgraded WebSocket as other threads see it: wakes its writer or asks it to close, always on the socket's
/// event loop, where its ``WebSocketConnectionHandler`` runs.
final class SocketHandle: Sendable {
    let channel: any Channel
    var eventLoop: any EventLoop { channel.eventLoop }
    private let handler: NIOLoopBound<WebSocketConnectionHandler>

    init(channel: any Channel, handler: NIOLoopBound<WebSocketConnectionHandler>) {
        self.channel = channel
        self.handler = handler
    }

    /// Asks the writer to take what is queued (on the next turn of the loop, so that what is pushed until then is
    /// written with it).
    func wake() {
        let handler = self.handler
        eventLoop.execute { handler.value.drain() }
    }

    /// Runs the writer now. Only on the socket's event loop (the hub wakes many sockets of one loop in one task).
    func drainOnLoop() {
        handler.value.drain()
    }

    /// Closes the socket with a close frame and waits (a bounded time) for the client's answer.
    func close(code: UInt16, reason: ErrorCode) {
        let handler = self.handler
        eventLoop.execute { handler.value.serverClose(code: code, reason: reason) }
    }
}
