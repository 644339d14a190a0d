import Logging
import NIOConcurrencyHelpers
import NIOCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Caps how many accepted connections the server sets up at once: a connection is "being admitted" from its accept
/// until its first request is read (an HTTP request is being served, or a WebSocket upgrade answered: its handshake
/// then counts against ``HandshakeGate``), it closes, or one second has passed. A connection that waits on its peer
/// stops counting at once: one that has sent nothing ``EdgeLimits/silentConnectionGrace`` after its accept, or whose
/// first head is incomplete with everything it sent read. So silent or slow clients cannot hold the gate shut. Past
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

    /// Puts the gate in front of the listening socket (call once, when the server runs), with a log line when
    /// accepting fails (the file-descriptor limit).
    func install(on serverChannel: any Channel, logger: Logger) async throws {
        let handler = try await serverChannel.eventLoop.submit {
            let pipeline = serverChannel.pipeline.syncOperations
            let handler = AdmissionHandler(limit: self.limit, timeout: self.timeout)
            // Just before NIO's accept handler, so behind its AcceptBackoffHandler: the reads this handler lets
            // through (also when it stops withholding them) pass the back-off, which pauses accepting for a second
            // after accept failed (EMFILE, ENFILE) instead of trying again at once.
            if let accept = try? pipeline.context(name: "AcceptHandler") {
                try pipeline.addHandler(handler, position: .before(accept.handler))
            } else {
                try pipeline.addHandler(handler)
            }
            try pipeline.addHandler(AcceptFailureLogger(logger: logger), position: .first)
            return NIOLoopBound(handler, eventLoop: serverChannel.eventLoop)
        }.get()
        installed.set(handler, eventLoop: serverChannel.eventLoop)
    }

    /// Closes, after `delay`, every connection still open then (the end of a graceful shutdown: whatever state a
    /// connection is in, the server does not wait for it longer).
    func closeEveryConnection(after delay: TimeAmount) {
        guard let (handler, loop) = installed.get() else { return }
        loop.scheduleTask(in: delay) { handler.value.closeEveryConnection() }
    }

    /// Connections accepted and not closed yet, and those of them being set up (read on the listening socket's loop).
    func counts() async -> (open: Int, inSetup: Int) {
        guard let (handler, loop) = installed.get() else { return (0, 0) }
        return (try? await loop.submit { (handler.value.open.count, handler.value.inProgress) }.get()) ?? (0, 0)
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
    /// Every accepted connection until it closes, with the number of its accept.
    private(set) var open: [ObjectIdentifier: (accept: UInt64, channel: any Channel)] = [:]
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
        open[id] = (accept, child)
        // A connection that closes while being set up stops counting then.
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let loop = context.eventLoop
        child.closeFuture.whenComplete { _ in loop.execute { handler.value.closed(id, accept: accept) } }
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

    private func closed(_ id: ObjectIdentifier, accept: UInt64) {
        if open[id]?.accept == accept { open[id] = nil }
        release(id, accept: accept)
    }

    func closeEveryConnection() {
        for (_, connection) in open { connection.channel.close(promise: nil) }
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

/// On the listening socket, first in its pipeline: what happens when accepting fails because the process is at its
/// file-descriptor limit (EMFILE, or ENFILE for the system).
///
/// NIO's `AcceptBackoffHandler` then stops asking for reads for a second, but the read already asked for stays
/// pending, so the listening socket stays registered as readable and the event loop tries `accept` again at once,
/// forever: a core spins. This handler keeps one descriptor in reserve (`/dev/null`): when accept fails it gives the
/// reserve up, so the retry accepts one connection, which it closes at once (there is no descriptor to serve it with)
/// and takes the reserve back. The pending read is then satisfied, and the back-off holds: one attempt a second
/// until descriptors are free again. It logs the first failure, then at most once a minute with a count.
final class AcceptFailureLogger: ChannelInboundHandler {
    typealias InboundIn = any Channel
    typealias InboundOut = any Channel

    private let logger: Logger
    private var lastLogged: NIODeadline?
    private var unlogged = 0
    private var reserve: CInt?
    /// The next accepted connection only frees the reserve's descriptor again: it is closed, not served.
    private var shedNext = false

    init(logger: Logger) {
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        reserve = Self.openReserve()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        if let reserve { _ = close(reserve) }
        reserve = nil
    }

    private static func openReserve() -> CInt? {
        let descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
        return descriptor >= 0 ? descriptor : nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard shedNext else {
            context.fireChannelRead(data)
            return
        }
        shedNext = false
        unwrapInboundIn(data).close(promise: nil)
        if reserve == nil { reserve = Self.openReserve() }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? IOError {
            if error.errnoCode == EMFILE || error.errnoCode == ENFILE, let descriptor = reserve {
                _ = close(descriptor)
                reserve = nil
                shedNext = true
            }
            let now = NIODeadline.now()
            if let lastLogged, now - lastLogged < .seconds(60) {
                unlogged += 1
            } else {
                let meanwhile = unlogged > 0 ? " (\(unlogged) more failures since the last report)" : ""
                logger.warning(
                    "Accepting connections failed: \(error.description); pausing accepts for 1 s at a time\(meanwhile). Raise the file-descriptor limit (ulimit -n) or shed load."
                )
                lastLogged = now
                unlogged = 0
            }
        }
        context.fireErrorCaught(error)
    }
}
