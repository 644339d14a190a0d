import NIOCore
import NIOWebSocket
import ParleyProtocol

/// Checks every frame a client sends against RFC 6455 section 5 before the aggregator joins fragments: client frames
/// are masked (5.1), no reserved bit is set (no extension is negotiated, 5.2), the opcode is one of the six defined.
/// A frame that breaks a rule ends the connection: the error goes to ``WebSocketConnectionHandler``, which closes with
/// 1002, and nothing more is passed on.
///
/// Frames go on unmasked (once, here), so the handlers after it read their payload without copying it again.
final class WebSocketFrameValidator: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame

    private var failed = false

    private static let opcodes: [WebSocketOpcode] = [.continuation, .text, .binary, .connectionClose, .ping, .pong]

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        let frame = unwrapInboundIn(data)
        let violation: String? =
            if frame.maskKey == nil {
                "a client frame must be masked"
            } else if frame.rsv1 || frame.rsv2 || frame.rsv3 {
                "reserved bits are set and no extension was negotiated"
            } else if !Self.opcodes.contains(frame.opcode) {
                "reserved opcode"
            } else {
                nil
            }
        if let violation {
            failed = true
            context.fireErrorCaught(
                WebSocketProtocolViolation(code: WebSocketCloseCode.protocolError, detail: violation))
            return
        }
        let unmasked = WebSocketFrame(fin: frame.fin, opcode: frame.opcode, data: frame.unmaskedData)
        context.fireChannelRead(wrapInboundOut(unmasked))
    }
}

/// A client broke RFC 6455: the connection closes with `code` (1002, or 1007 for text that is not UTF-8).
struct WebSocketProtocolViolation: Error, Equatable {
    var code: UInt16
    var detail: String
}
