import NIOCore

/// Writes complete WebSocket frames (``FrameEncoding``) straight to the socket.
///
/// It sits first in an upgraded channel's pipeline, next to the socket, so what it writes skips NIO's
/// `WebSocketFrameEncoder`: an event framed once goes to every recipient as the same bytes, in one `iovec`, with no
/// header allocated per recipient. ``WebSocketConnectionHandler`` writes every frame through it, on the event loop.
final class RawFrameWriter: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    /// Writes a frame (without flushing); false when the channel is gone.
    func write(_ frame: ByteBuffer, promise: EventLoopPromise<Void>? = nil) {
        guard let context else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        context.write(wrapOutboundOut(frame), promise: promise)
    }

    func flush() {
        context?.flush()
    }

    /// Writes and flushes a frame; the future completes once it is written to the socket.
    func writeAndFlush(_ frame: ByteBuffer, on eventLoop: any EventLoop) -> EventLoopFuture<Void> {
        let promise = eventLoop.makePromise(of: Void.self)
        write(frame, promise: promise)
        flush()
        return promise.futureResult
    }
}
