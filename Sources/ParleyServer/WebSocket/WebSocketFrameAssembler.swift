import NIOCore
import NIOWebSocket
import ParleyProtocol

/// Between NIO's frame decoder and ``WebSocketConnectionHandler``: checks every frame a client sends against RFC 6455
/// section 5 and joins the fragments of a message (section 5.4), in one handler.
///
/// - A client frame is masked (5.1), sets no reserved bit (no extension is negotiated, 5.2) and has one of the six
///   defined opcodes: else 1002.
/// - A continuation continues a message, and a new text or binary message starts only after the last one ended: else
///   1002; a message comes in at most `maxFragments` fragments (1002) and `maxMessageSize` bytes (1009). Control frames
///   may come between fragments and pass at once.
///
/// A broken rule ends the connection: the error (``WebSocketProtocolViolation``) goes to the connection's handler,
/// which closes with its code, and nothing more is passed on. Frames go on unmasked (unmasked once, here), so the
/// handler reads their payload without copying it again.
package final class WebSocketFrameAssembler: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = WebSocketFrame
    package typealias InboundOut = WebSocketFrame

    private let maxMessageSize: Int
    private let maxFragments: Int
    /// The message being assembled: its opcode, its payload so far, its fragments so far.
    private var message: (opcode: WebSocketOpcode, payload: ByteBuffer, fragments: Int)?
    private var failed = false

    package init(maxMessageSize: Int, maxFragments: Int) {
        self.maxMessageSize = maxMessageSize
        self.maxFragments = maxFragments
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        let frame = unwrapInboundIn(data)
        guard frame.maskKey != nil else { return fail(context, .protocolError, "a client frame must be masked") }
        guard !frame.rsv1, !frame.rsv2, !frame.rsv3 else {
            return fail(context, .protocolError, "reserved bits are set and no extension was negotiated")
        }
        var payload = frame.unmaskedData
        switch frame.opcode {
        case .continuation:
            guard var current = message else {
                return fail(context, .protocolError, "a continuation frame without a message to continue")
            }
            current.fragments += 1
            guard current.fragments <= maxFragments else {
                return fail(context, .protocolError, "a message in more than \(maxFragments) fragments")
            }
            guard current.payload.readableBytes + payload.readableBytes <= maxMessageSize else {
                return fail(context, .messageTooBig, "a message larger than \(maxMessageSize) bytes")
            }
            current.payload.writeBuffer(&payload)
            if frame.fin {
                message = nil
                forward(context, opcode: current.opcode, current.payload)
            } else {
                message = current
            }
        case .text, .binary:
            guard message == nil else {
                return fail(context, .protocolError, "a new message before the last one ended")
            }
            if frame.fin {
                forward(context, opcode: frame.opcode, payload)
            } else {
                message = (frame.opcode, payload, 1)
            }
        case .connectionClose, .ping, .pong:
            forward(context, opcode: frame.opcode, payload)
        default:
            fail(context, .protocolError, "reserved opcode")
        }
    }

    private func forward(_ context: ChannelHandlerContext, opcode: WebSocketOpcode, _ payload: ByteBuffer) {
        context.fireChannelRead(wrapInboundOut(WebSocketFrame(fin: true, opcode: opcode, data: payload)))
    }

    private enum Code {
        case protocolError, messageTooBig
    }

    private func fail(_ context: ChannelHandlerContext, _ code: Code, _ detail: String) {
        failed = true
        message = nil
        let closeCode =
            switch code {
            case .protocolError: WebSocketCloseCode.protocolError
            case .messageTooBig: WebSocketCloseCode.messageTooBig
            }
        context.fireErrorCaught(WebSocketProtocolViolation(code: closeCode, detail: detail))
    }
}

/// A client broke RFC 6455: the connection closes with `code` (1002; 1007 for text that is not UTF-8; 1009 for a
/// message too large).
package struct WebSocketProtocolViolation: Error, Equatable {
    package var code: UInt16
    package var detail: String
}
