import NIOCore
import NIOPosix
import ParleyTesting

/// A TCP listener of the test's own that misbehaves in one way.
final class HostileServer: Sendable {
    enum Behavior: Sendable {
        /// Bytes that are no NATS operation.
        case garbage
        /// `INFO ` followed by 10 MiB without a newline.
        case hugeInfo
        /// A valid INFO, then a MSG declaring a 2 GiB payload.
        case hugeMessage
        /// A valid INFO; refuses the CONNECT with `-ERR 'Authorization Violation'`.
        case authorizationViolation
    }

    let channel: any Channel

    var port: Int { self.channel.localAddress!.port! }
    var url: String { "nats://127.0.0.1:\(self.port)" }

    private init(channel: any Channel) {
        self.channel = channel
    }

    static func start(_ behavior: Behavior) async throws -> HostileServer {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(HostileHandler(behavior: behavior))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return HostileServer(channel: channel)
    }

    func stop() async {
        try? await self.channel.close()
    }
}

private final class HostileHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    static let info = #"INFO {"server_id":"HOSTILE","version":"2.10.0","proto":1,"headers":true,"max_payload":1048576}"#

    let behavior: HostileServer.Behavior
    var received = ByteBuffer()

    init(behavior: HostileServer.Behavior) {
        self.behavior = behavior
    }

    func channelActive(context: ChannelHandlerContext) {
        switch self.behavior {
        case .garbage:
            context.writeAndFlush(
                Self.wrapOutboundOut(ByteBuffer(bytes: [0, 0xFF, 0x13] + Array("GARBAGE!! \r\n".utf8))), promise: nil)
        case .hugeInfo:
            context.write(Self.wrapOutboundOut(ByteBuffer(string: "INFO {\"server_id\":\"")), promise: nil)
            let chunk = ByteBuffer(repeating: UInt8(ascii: "x"), count: 64 * 1024)
            for _ in 0..<160 {
                context.write(Self.wrapOutboundOut(chunk), promise: nil)
            }
            context.flush()
        case .hugeMessage:
            context.writeAndFlush(
                Self.wrapOutboundOut(ByteBuffer(string: Self.info + "\r\nMSG foo 1 2147483648\r\n")), promise: nil)
        case .authorizationViolation:
            context.writeAndFlush(Self.wrapOutboundOut(ByteBuffer(string: Self.info + "\r\n")), promise: nil)
        }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = Self.unwrapInboundIn(data)
        self.received.writeBuffer(&bytes)
        if case .authorizationViolation = self.behavior, self.received.readableBytesView.contains(UInt8(ascii: "\n")) {
            context.writeAndFlush(
                Self.wrapOutboundOut(ByteBuffer(string: "-ERR 'Authorization Violation'\r\n")), promise: nil)
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
