import NIOConcurrencyHelpers
import NIOCore

/// Caps how many accepted connections the server sets up at once: a connection is "being admitted" from its accept
/// until it serves its first HTTP request, its WebSocket is live (after `caughtUp`), it closes, or one second has
/// passed (so that connections that send nothing cannot hold the gate shut). Past
/// ``ServerConfiguration/maxConnectionsInSetup`` the listening socket is not read: new connections wait in the kernel's
/// backlog instead of in the event loops.
///
/// Without it, a reconnection storm (thousands of clients at once) puts thousands of handshakes on the event loops at
/// once; every turn of a loop then works through all of them, and requests on established connections (`/health`,
/// sends) wait seconds behind them. With it, a turn holds at most the cap's worth of handshake work.
final class AdmissionGate: Sendable {
    let limit: Int
    /// How long a connection counts at most.
    let timeout: TimeAmount
    private let installed = InstalledAdmission()

    init(limit: Int, timeout: TimeAmount = .seconds(1)) {
        self.limit = limit
        self.timeout = timeout
    }

    /// Puts the gate in front of the listening socket (call once, when the server runs).
    func install(on serverChannel: any Channel) async throws {
        let handler = try await serverChannel.eventLoop.submit {
            let handler = AdmissionHandler(limit: self.limit, timeout: self.timeout)
            try serverChannel.pipeline.syncOperations.addHandler(handler, position: .first)
            return NIOLoopBound(handler, eventLoop: serverChannel.eventLoop)
        }.get()
        installed.set(handler, eventLoop: serverChannel.eventLoop)
    }

    /// The connection is set up (or gone): it no longer counts. Idempotent; any thread.
    func admitted(_ channel: any Channel) {
        guard let (handler, loop) = installed.get() else { return }
        let id = ObjectIdentifier(channel)
        loop.execute { handler.value.release(id, accept: nil) }
    }
}

/// Holds the installed handler (set once, from the server's start).
private final class InstalledAdmission: Sendable {
    private let box = NIOLockedValueBox<(NIOLoopBound<AdmissionHandler>, any EventLoop)?>(nil)

    func set(_ handler: NIOLoopBound<AdmissionHandler>, eventLoop: any EventLoop) {
        box.withLockedValue { $0 = (handler, eventLoop) }
    }

    func get() -> (NIOLoopBound<AdmissionHandler>, any EventLoop)? {
        box.withLockedValue { $0 }
    }
}

/// On the listening socket: counts the connections being admitted and withholds `read` (accepting) at the limit.
final class AdmissionHandler: ChannelDuplexHandler {
    typealias InboundIn = any Channel
    typealias InboundOut = any Channel
    typealias OutboundIn = Never
    typealias OutboundOut = Never

    let limit: Int
    let timeout: TimeAmount
    /// The connections being admitted, with the number of their accept (a closed channel's identifier may be reused).
    private var admitting: [ObjectIdentifier: UInt64] = [:]
    private var accepts: UInt64 = 0
    private var context: ChannelHandlerContext?
    private var readWithheld = false

    init(limit: Int, timeout: TimeAmount) {
        self.limit = limit
        self.timeout = timeout
    }

    var inProgress: Int { admitting.count }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let child = unwrapInboundIn(data)
        let id = ObjectIdentifier(child)
        accepts += 1
        let accept = accepts
        admitting[id] = accept
        // A connection that closes while being set up stops counting then.
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let loop = context.eventLoop
        child.closeFuture.whenComplete { _ in loop.execute { handler.value.release(id, accept: accept) } }
        // ... and one that takes too long (or sends nothing) stops counting after the timeout.
        loop.assumeIsolated().scheduleTask(in: timeout) { [self] in release(id, accept: accept) }
        context.fireChannelRead(data)
    }

    func read(context: ChannelHandlerContext) {
        guard admitting.count < limit else {
            readWithheld = true
            return
        }
        context.read()
    }

    /// The connection `id` no longer counts (only if it is still the one of `accept`, when given).
    func release(_ id: ObjectIdentifier, accept: UInt64?) {
        guard let current = admitting[id], accept.map({ $0 == current }) ?? true else { return }
        admitting[id] = nil
        guard readWithheld, admitting.count < limit, let context else { return }
        readWithheld = false
        context.read()
    }
}
