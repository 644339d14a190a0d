import NIOCore

/// The writers to wake after frames were pushed to many connections: one task per event loop wakes all of that loop's
/// sockets, instead of one task per socket.
///
/// The command writer collects the wake-ups of a whole batch in one (``BatchDelivery``) and runs them once the batch is
/// published and answered: a socket that gets several frames of one batch (a sender's event and ack, a member's events
/// of several messages, the unread counts they changed) writes them all in one flush.
struct WakeUps {
    private var loops: [(loop: any EventLoop, sockets: [SocketHandle])] = []

    /// Pushes the frame; remembers the socket when its writer needs waking.
    mutating func push(_ frame: ByteBuffer, on connection: ServerConnection) {
        guard connection.outbound.push(frame).wakesWriter else { return }
        add(connection.socket)
    }

    mutating func add(_ socket: SocketHandle) {
        if let index = loops.firstIndex(where: { $0.loop === socket.eventLoop }) {
            loops[index].sockets.append(socket)
        } else {
            loops.append((socket.eventLoop, [socket]))
        }
    }

    /// Wakes the remembered writers.
    func run() {
        for (loop, sockets) in loops {
            if sockets.count == 1 {
                sockets[0].wake()
            } else {
                loop.execute { for socket in sockets { socket.drainOnLoop() } }
            }
        }
    }
}
