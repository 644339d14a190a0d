import NIOCore
import NIOEmbedded
import NIOWebSocket
import ParleyServer

extension FuzzTarget {
    /// A WebSocket connection's inbound path after the handshake: NIO's frame decoder and the server's
    /// `WebSocketFrameAssembler` (RFC 6455 section 5), fed the input at once and again cut into pieces (the input's
    /// first byte sets their size). Both ways must pass on the same messages and stop at the same violation; every
    /// message passed on is whole, within the size limit, and nothing follows a violation.
    static let webSocketFrames = FuzzTarget(
        name: "websocket-frames",
        summary: "frame decoder + WebSocketFrameAssembler: the same messages however the bytes are cut, within limits",
        largestPiece: 16
    ) { pieces throws(FuzzFinding) in
        try WebSocketFramesCase.run(pieces)
    }
}

enum WebSocketFramesCase {
    static let maxMessageSize = 4096
    static let maxFragments = 4

    enum Output: Equatable, CustomStringConvertible {
        case message(WebSocketOpcode, [UInt8])
        case failed(String)

        var description: String {
            switch self {
            case .message(let opcode, let payload): "\(opcode) \(payload.count) bytes"
            case .failed(let error): "failed: \(error)"
            }
        }
    }

    /// Records what reaches the connection's handler; checks each message as it comes.
    final class Recorder: ChannelInboundHandler {
        typealias InboundIn = WebSocketFrame
        var outputs: [Output] = []
        var finding: String?

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            if case .failed = outputs.last {
                finding = finding ?? "a frame was passed on after the connection failed"
            }
            if !frame.fin { finding = finding ?? "a fragment was passed on, not a whole message" }
            if frame.maskKey != nil { finding = finding ?? "a frame was passed on still masked" }
            let payload = Array(frame.data.readableBytesView)
            switch frame.opcode {
            case .text, .binary:
                if payload.count > WebSocketFramesCase.maxMessageSize {
                    finding = finding ?? "a message of \(payload.count) bytes passed the limit"
                }
            case .connectionClose, .ping, .pong:
                if payload.count > 125 { finding = finding ?? "a control frame of \(payload.count) bytes" }
            default:
                finding = finding ?? "opcode \(frame.opcode) was passed on"
            }
            outputs.append(.message(frame.opcode, payload))
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            // The first error ends the connection (its handler closes it); the decoder repeats it for later bytes.
            if case .failed = outputs.last { return }
            if let violation = error as? WebSocketProtocolViolation {
                outputs.append(.failed("close \(violation.code): \(violation.detail)"))
            } else {
                outputs.append(.failed("\(error)"))
            }
        }
    }

    static func run(_ pieces: [UnsafeRawBufferPointer]) throws(FuzzFinding) -> [Output] {
        let channel = EmbeddedChannel()
        let recorder = Recorder()
        do {
            try channel.pipeline.syncOperations.addHandlers([
                ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: maxMessageSize)),
                WebSocketFrameAssembler(maxMessageSize: maxMessageSize, maxFragments: maxFragments),
                recorder,
            ])
        } catch {
            throw FuzzFinding("the pipeline could not be set up: \(error)")
        }
        for piece in pieces {
            let buffer = channel.allocator.buffer(bytes: piece)
            do {
                try channel.writeInbound(buffer)
            } catch {
                throw FuzzFinding("an error reached the end of the pipeline: \(error)")
            }
        }
        _ = try? channel.finish(acceptAlreadyClosed: true)
        if let finding = recorder.finding { throw FuzzFinding(finding) }
        return recorder.outputs
    }
}
