import NIOCore

/// The NIO decoder for server operations: wraps ``NATSProtocolParser`` in a `ByteToMessageDecoder`.
struct NATSProtocolDecoder: ByteToMessageDecoder {
    typealias InboundOut = NATSServerOperation

    private var parser = NATSProtocolParser()

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let operation = try self.parser.next(from: &buffer) else {
            return .needMoreData
        }
        context.fireChannelRead(Self.wrapInboundOut(operation))
        return .continue
    }

    mutating func decodeLast(
        context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool
    ) throws -> DecodingState {
        // A partial operation at EOF is dropped: the connection is gone anyway.
        while let operation = try? self.parser.next(from: &buffer) {
            context.fireChannelRead(Self.wrapInboundOut(operation))
        }
        buffer.moveReaderIndex(to: buffer.writerIndex)
        return .needMoreData
    }
}
