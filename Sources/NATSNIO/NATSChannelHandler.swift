import NIOCore

/// The connection's handler behind ``NATSProtocolDecoder``: answers server PINGs, delivers messages to inboxes in
/// batches (one look-up per read), and hands control operations to the driver.
final class NATSChannelHandler: ChannelInboundHandler {
    typealias InboundIn = NATSServerOperation
    typealias OutboundOut = ByteBuffer

    /// Messages are delivered at the end of each read, or when this many are waiting.
    static let maxBatch = 1024

    private let connection: NATSConnection
    private let transportID: UInt64
    private var batch: [NATSMessage] = []
    private var pongsOwed = 0
    private var failed = false

    init(connection: NATSConnection, transportID: UInt64) {
        self.connection = connection
        self.transportID = transportID
    }

    func channelActive(context: ChannelHandlerContext) {
        self.connection.yieldInput(.transportConnected(self.transportID, context.channel), counted: false)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.failed else { return }
        switch Self.unwrapInboundIn(data) {
        case .message(let message):
            self.batch.append(message)
            if self.batch.count >= Self.maxBatch {
                self.deliverBatch()
            }
        case .ping:
            self.pongsOwed += 1
        case .pong:
            // Messages before the PONG reach their inboxes before a flush() waiting for it returns.
            self.deliverBatch()
            if !self.connection.pongReceived(on: context.channel, transportID: self.transportID) {
                self.flooded(context: context)
            }
        case .info(let info):
            self.deliverBatch()
            if !self.connection.yieldInput(.info(self.transportID, info), counted: true) {
                self.flooded(context: context)
            }
        case .error(let text):
            self.deliverBatch()
            if !self.connection.yieldInput(.serverError(self.transportID, text), counted: true) {
                self.flooded(context: context)
            }
        case .ok:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.deliverBatch()
        if self.pongsOwed > 0 {
            var buffer = context.channel.allocator.buffer(capacity: 6 * self.pongsOwed)
            for _ in 0..<self.pongsOwed {
                NATSProtocolEncoder.writePong(into: &buffer)
            }
            self.pongsOwed = 0
            context.writeAndFlush(Self.wrapOutboundOut(buffer), promise: nil)
        }
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.connection.writabilityChanged(context.channel, isWritable: context.channel.isWritable)
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.deliverBatch()
        self.connection.yieldInput(.transportClosed(self.transportID), counted: false)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.deliverBatch()
        if !self.failed, let error = error as? NATSProtocolError {
            self.failed = true
            self.connection.yieldInput(.protocolError(self.transportID, error.description), counted: false)
        }
        // Other errors (connection reset, ...) end in channelInactive: the transport closed.
        context.close(promise: nil)
    }

    private func flooded(context: ChannelHandlerContext) {
        guard !self.failed else { return }
        self.failed = true
        self.connection.yieldInput(
            .protocolError(self.transportID, "too many control operations waiting (server flood)"), counted: false)
        context.close(promise: nil)
    }

    private func deliverBatch() {
        guard !self.batch.isEmpty else { return }
        let batch = self.batch
        self.batch.removeAll(keepingCapacity: true)
        self.connection.deliver(batch)
    }
}
