import NIOCore
import NIOWebSocket

/// The first handler of every accepted connection: reads the start of the first request and, when it is a plain
/// WebSocket upgrade to ``WebSocketGateway/path`` (``WebSocketUpgradeRequest``), answers it and installs the WebSocket
/// handlers itself; for anything else it installs NIO's HTTP pipeline (with its upgrader, as before) and hands it the
/// bytes read so far.
///
/// Measured in `parley-bench connect`, NIO's HTTP decoder, upgrade handler and upgrader cost a WebSocket 65 µs of
/// server CPU before its first frame (parsing the head, then removing the HTTP handlers again); this reads the head
/// once and changes the pipeline once. The decision goes to `outcome`: `.websocket`, or what NIO's pipeline decides.
///
/// Until it decides, the connection is this handler's to end: it closes at once when the peer half-closes (a TCP
/// health check's connect-then-close) or when the server shuts down (`ChannelShouldQuiesceEvent`), and when the head is
/// not complete ``EdgeLimits/requestHeadTimeout`` after the accept (408 if anything arrived). It also tells the
/// admission gate when the connection stops costing the server anything: when everything it sent is read and the
/// head is still incomplete (the connection waits on its peer, not on the server).
final class WebSocketUpgradeSniffer: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Installs the WebSocket handlers after this one (it writes nothing).
    typealias Upgrade = (any Channel, _ authorization: String?) throws -> Void
    /// Installs NIO's HTTP pipeline after this one; its future tells how that pipeline ended.
    typealias FallBack = (any Channel) throws -> EventLoopFuture<ParleyHTTPChannel.UpgradeResult>

    private let outcome: UpgradeOutcome
    private let maxFrameSize: Int
    private let limits: EdgeLimits
    private let admitted: (any Channel) -> Void
    private let heard: (any Channel) -> Void
    private let upgrade: Upgrade
    private let fallBack: FallBack
    private var buffered: ByteBuffer?
    private var decided = false

    /// - Parameters:
    ///   - admitted: Tells the admission gate that the connection no longer counts as being set up.
    ///   - heard: Tells it that the connection sent its first bytes.
    init(
        outcome: UpgradeOutcome, maxFrameSize: Int, limits: EdgeLimits, admitted: @escaping (any Channel) -> Void,
        heard: @escaping (any Channel) -> Void, upgrade: @escaping Upgrade, fallBack: @escaping FallBack
    ) {
        self.outcome = outcome
        self.maxFrameSize = maxFrameSize
        self.limits = limits
        self.admitted = admitted
        self.heard = heard
        self.upgrade = upgrade
        self.fallBack = fallBack
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // Never cancelled (cancelling searches the loop's whole timer heap, see WebSocketConnectionHandler): it holds
        // the handler and the channel weakly and does nothing once the head is decided. (It held the channel strongly:
        // every connection's channel, pipeline and handlers, ~4.5 KiB, outlived its close by the head timeout, and a
        // burst of 20,000 WebSocket cycles left the process 68 MiB larger for good, glibc unable to give the
        // fragmented pages back.)
        let channel = context.channel
        context.eventLoop.assumeIsolated().scheduleTask(in: limits.requestHeadTimeout.timeAmount) {
            [weak self, weak channel] in
            guard let self, let channel, !decided else { return }
            headTimedOut(channel: channel)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !decided else {
            context.fireChannelRead(data)
            return
        }
        var incoming = unwrapInboundIn(data)
        if buffered == nil {
            heard(context.channel)
            buffered = incoming
        } else {
            buffered!.writeBuffer(&incoming)
        }
        switch buffered!.withUnsafeReadableBytes({ WebSocketUpgradeRequest.parse($0) }) {
        case .incomplete:
            return
        case .webSocket(let request):
            upgrade(context: context, request)
        case .other:
            handOver(context: context)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // Everything the peer sent so far is read, and the head is not complete: the peer is the one being slow.
        if !decided, buffered != nil { admitted(context.channel) }
        context.fireChannelReadComplete()
    }

    /// Whether a timer due at `due` fired so late that its loop is busy (more than half the grace behind).
    static func isLate(_ now: NIODeadline, due: NIODeadline, grace: TimeAmount) -> Bool {
        now - due > .nanoseconds(grace.nanoseconds / 2)
    }

    /// Answers the upgrade and installs the WebSocket handlers (the pipeline NIO's upgrader builds), then passes on
    /// whatever followed the head.
    private func upgrade(context: ChannelHandlerContext, _ request: WebSocketUpgradeRequest) {
        decided = true
        var rest = buffered!
        buffered = nil
        rest.moveReaderIndex(forwardBy: request.headLength)
        do {
            context.writeAndFlush(wrapOutboundOut(request.response(allocator: context.channel.allocator)), promise: nil)
            let pipeline = context.pipeline.syncOperations
            try pipeline.addHandler(WebSocketFrameEncoder())
            try pipeline.addHandler(ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: maxFrameSize)))
            try upgrade(context.channel, request.authorization)
        } catch {
            outcome.decide(.failure(error))
            context.close(promise: nil)
            return
        }
        // A WebSocket now (the admission gate hears it from whoever awaits the outcome): its handler keeps the
        // connection's slot until it is live, or gives it up if its client waits too long to send `connect`.
        outcome.decide(.success(.websocket))
        if rest.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(rest)) }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    /// Installs NIO's HTTP pipeline and passes it everything read so far.
    private func handOver(context: ChannelHandlerContext) {
        decided = true
        let bytes = buffered!
        buffered = nil
        do {
            let outcome = self.outcome
            try fallBack(context.channel).whenComplete { outcome.decide($0) }
            // Whatever NIO's pipeline does, the task Hummingbird runs for the connection ends when it closes.
            context.channel.closeFuture.whenComplete { _ in outcome.decide(.failure(ChannelError.alreadyClosed)) }
        } catch {
            outcome.decide(.failure(error))
            context.close(promise: nil)
            return
        }
        context.fireChannelRead(wrapInboundOut(bytes))
        context.fireChannelReadComplete()
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard !decided else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        switch event {
        case ChannelEvent.inputClosed, is ChannelShouldQuiesceEvent:
            // The peer will send no more (its head can never complete), or the server is shutting down: nothing is in
            // progress on this connection, so it ends now.
            undecidedEnd(ChannelError.inputClosed)
            context.close(promise: nil)
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    /// The head did not arrive in time: 408 when something did, then close.
    private func headTimedOut(channel: any Channel) {
        let answer = buffered != nil
        undecidedEnd(ChannelError.inputClosed)
        guard answer else {
            channel.close(promise: nil)
            return
        }
        channel.writeAndFlush(
            EdgeResponse.bytes(.requestTimeout, code: .requestTimeout, "The request head did not arrive in time.")
        ).whenComplete { _ in EdgeResponse.closeAfterAnswer(channel) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        undecidedEnd(ChannelError.inputClosed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard !decided else {
            context.fireErrorCaught(error)
            return
        }
        undecidedEnd(error)
        context.close(promise: nil)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        undecidedEnd(ChannelError.inputClosed)
    }

    /// The connection ended (or the pipeline went away) before its first request was read.
    private func undecidedEnd(_ error: any Error) {
        guard !decided else { return }
        decided = true
        buffered = nil
        outcome.decide(.failure(error))
    }
}
