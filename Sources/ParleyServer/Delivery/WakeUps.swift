import NIOConcurrencyHelpers
import NIOCore

/// The writers to wake after frames were pushed to many connections: one task per event loop wakes all of that loop's
/// sockets, instead of one task per socket.
///
/// Inside ``DeferredWakeUps/collect(_:)`` (the command writer publishing a batch and answering its callers), nothing
/// is woken until the batch is done: a socket that gets several frames of one batch (a sender's event and ack, a
/// member's events of several messages) writes them all in one flush.
struct WakeUps {
    fileprivate var loops: [(loop: any EventLoop, sockets: [SocketHandle])] = []

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

    /// Wakes the remembered writers, or leaves them to the batch being collected.
    func run() {
        if let deferred = DeferredWakeUps.current {
            deferred.take(self)
            return
        }
        runNow()
    }

    fileprivate func runNow() {
        for (loop, sockets) in loops {
            if sockets.count == 1 {
                sockets[0].wake()
            } else {
                loop.execute { for socket in sockets { socket.drainOnLoop() } }
            }
        }
    }
}

/// Wake-ups held back while a batch is published (see ``WakeUps``).
final class DeferredWakeUps: Sendable {
    @TaskLocal static var current: DeferredWakeUps?

    private let wakeUps = NIOLockedValueBox(WakeUps())

    /// Runs `body` with wake-ups held back, then wakes every writer that needs it, once.
    static func collect<T>(_ body: () async throws -> T) async rethrows -> T {
        let deferred = DeferredWakeUps()
        defer { deferred.wakeUps.withLockedValue { $0 }.runNow() }
        return try await $current.withValue(deferred) { try await body() }
    }

    /// ``collect(_:)`` for a synchronous `body` (the command writer's thread).
    static func collectOnThread<T>(_ body: () throws -> T) rethrows -> T {
        let deferred = DeferredWakeUps()
        defer { deferred.wakeUps.withLockedValue { $0 }.runNow() }
        return try $current.withValue(deferred) { try body() }
    }

    /// Wakes `socket`'s writer at the end of the batch being collected, if there is one; else now.
    static func wake(_ socket: SocketHandle) {
        guard let deferred = current else {
            socket.wake()
            return
        }
        deferred.wakeUps.withLockedValue { $0.add(socket) }
    }

    fileprivate func take(_ other: WakeUps) {
        wakeUps.withLockedValue { wakeUps in
            for (_, sockets) in other.loops { for socket in sockets { wakeUps.add(socket) } }
        }
    }
}
