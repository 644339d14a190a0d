import Foundation
import Logging
import NIOCore

/// On the listening socket, first in its pipeline: what happens when accepting fails because the process is at its
/// file-descriptor limit (EMFILE, or ENFILE for the system).
///
/// NIO keeps the listening socket's read pending after a failed accept (only an accepted connection ends it), so the
/// socket stays registered as readable and the event loop would try `accept` again at once, forever: a core spins (NIO's
/// `AcceptBackoffHandler` does not stop that, since it only holds back the next read). This handler turns the socket's
/// `autoRead` off, which unregisters it, for `pause` (a second), then asks for a read through the pipeline, which the
/// admission gate lets through (turning `autoRead` on again) or holds back: at most one attempt a second while the
/// descriptors are gone, whatever took them. It also tells the admission gate that they ran out (`exhausted`), so that
/// the gate takes the connections it holds then as its budget, less its headroom (a limit lowered while the server
/// runs, or descriptors taken by something else), and stops accepting at it instead of failing. It logs the first failure, then at most once a
/// minute with a count.
final class AcceptFailureLogger: ChannelInboundHandler {
    typealias InboundIn = any Channel
    typealias InboundOut = any Channel

    private let logger: Logger
    private let pause: TimeAmount
    private let exhausted: () -> Void
    private var lastLogged: NIODeadline?
    private var unlogged = 0
    /// Reading is off until this pause ends.
    private var paused: Scheduled<Void>?

    init(logger: Logger, pause: TimeAmount = .seconds(1), exhausted: @escaping () -> Void) {
        self.logger = logger
        self.pause = pause
        self.exhausted = exhausted
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        paused?.cancel()
        paused = nil
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? IOError, error.errnoCode == EMFILE || error.errnoCode == ENFILE {
            exhausted()
            pauseAccepting(context: context)
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
            return
        }
        context.fireErrorCaught(error)
    }

    private func pauseAccepting(context: ChannelHandlerContext) {
        guard paused == nil, let options = context.channel.syncOptions else { return }
        try? options.setOption(.autoRead, value: false)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let channel = NIOLoopBound(context.channel, eventLoop: context.eventLoop)
        paused = context.eventLoop.scheduleTask(in: pause) {
            handler.value.paused = nil
            // A read from the tail: the admission gate decides (its budget, learnt again), and turns `autoRead` back on
            // when it lets the read through.
            channel.value.pipeline.syncOperations.read()
        }
    }
}
