import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore

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
        // The connection is closed on its own event loop: its descriptor is free (and the reserve can be taken back)
        // once that close is done.
        let child = unwrapInboundIn(data)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let loop = context.eventLoop
        child.close(promise: nil)
        child.closeFuture.whenComplete { _ in
            loop.execute { if handler.value.reserve == nil { handler.value.reserve = Self.openReserve() } }
        }
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
