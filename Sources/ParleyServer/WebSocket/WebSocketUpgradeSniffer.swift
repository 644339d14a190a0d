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
    private let upgrade: Upgrade
    private let fallBack: FallBack
    private var buffered: ByteBuffer?
    private var decided = false

    init(
        outcome: UpgradeOutcome, maxFrameSize: Int, upgrade: @escaping Upgrade,
        fallBack: @escaping FallBack
    ) {
        self.outcome = outcome
        self.maxFrameSize = maxFrameSize
        self.upgrade = upgrade
        self.fallBack = fallBack
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !decided else {
            context.fireChannelRead(data)
            return
        }
        var incoming = unwrapInboundIn(data)
        if buffered == nil {
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
        } catch {
            outcome.decide(.failure(error))
            context.close(promise: nil)
            return
        }
        context.fireChannelRead(wrapInboundOut(bytes))
        context.fireChannelReadComplete()
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
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
