import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// What a scenario does with a socket's frames. Called on the socket's event loop: keep it short.
struct SocketCallbacks: Sendable {
    /// A text frame after `hello`, with the monotonic time it was read.
    var text: @Sendable (_ socket: BenchSocket, _ frame: ByteBuffer, _ receivedAt: UInt64) -> Void = { _, _, _ in }
    /// The connection ended: the server's close code if it sent one.
    var closed: @Sendable (_ socket: BenchSocket, _ code: UInt16?) -> Void = { _, _ in }
}

/// One Parley WebSocket client: a NIO channel and a single handler that does the HTTP upgrade, sends `connect`,
/// waits for `hello`, answers pings and hands text frames to the scenario. A few hundred bytes per connection on
/// the client side, so that tens of thousands fit in one process.
final class BenchSocket: Sendable {
    let index: Int
    let channel: any Channel
    let connectedAt: UInt64

    init(index: Int, channel: any Channel, connectedAt: UInt64) {
        self.index = index
        self.channel = channel
        self.connectedAt = connectedAt
    }

    /// Sends a text frame (masked with a zero key: valid, and no per-byte work).
    func send(text: String) {
        var payload = channel.allocator.buffer(capacity: text.utf8.count + 14)
        WebSocketWire.writeClientFrameHeader(opcode: 0x1, length: text.utf8.count, into: &payload)
        payload.writeString(text)
        channel.writeAndFlush(payload, promise: nil)
    }

    /// Closes the TCP connection. `abort` resets it (SO_LINGER 0): no close handshake, no TIME_WAIT, what a
    /// dropped network looks like to the server.
    func close(abort: Bool) {
        if abort, let provider = channel as? any SocketOptionProvider {
            let channel = self.channel
            provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in channel.close(promise: nil) }
        } else {
            channel.close(promise: nil)
        }
    }

    /// Closes the WebSocket cleanly: sends a close frame with `code` and lets the server answer it and end the TCP
    /// connection; closes it anyway after `grace`.
    func closeCleanly(code: UInt16 = 1000, grace: TimeAmount = .seconds(2)) {
        let channel = self.channel
        channel.eventLoop.execute {
            guard channel.isActive else { return }
            // The server's answer to this close frame is not answered again.
            try? channel.pipeline.syncOperations.handler(type: WebSocketClientHandler.self).closeSent = true
            var frame = channel.allocator.buffer(capacity: 8)
            WebSocketWire.writeClientFrameHeader(opcode: 0x8, length: 2, into: &frame)
            frame.writeInteger(code)
            channel.writeAndFlush(frame, promise: nil)
            channel.eventLoop.scheduleTask(in: grace) { channel.close(promise: nil) }
        }
    }

    /// Why a connection attempt failed.
    enum Failure: Error, CustomStringConvertible {
        case upgradeRefused(String)
        case refused(code: UInt16?, frame: String)
        case closedBeforeHello
        case timedOut

        var description: String {
            switch self {
            case .upgradeRefused(let status): "upgrade refused: \(status)"
            case .refused(let code, let frame): "refused (close \(code.map(String.init) ?? "-")): \(frame)"
            case .closedBeforeHello: "closed before hello"
            case .timedOut: "timed out"
            }
        }
    }

    /// Connects, upgrades, sends `connect` (`connectFrame` when given, e.g. one with `resume`, else a plain
    /// `{"type":"connect","protocolVersion":1}`) and returns once `hello` arrived.
    static func connect(
        index: Int, target: SocketAddress, source: SocketAddress?, hostHeader: String, token: String,
        group: any EventLoopGroup, timeout: TimeAmount, callbacks: SocketCallbacks, connectFrame: String? = nil
    ) -> EventLoopFuture<BenchSocket> {
        let eventLoop = group.next()
        let ready = eventLoop.makePromise(of: BenchSocket.self)
        var bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(timeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        WebSocketClientHandler(
                            index: index, hostHeader: hostHeader, token: token, ready: ready, callbacks: callbacks,
                            connectFrame: connectFrame
                        )
                    )
                }
            }
        if let source { bootstrap = bootstrap.bind(to: source) }
        let started = Monotonic.nanoseconds()
        bootstrap.connect(to: target).whenComplete { result in
            switch result {
            case .failure(let error): ready.fail(error)
            case .success(let channel):
                // The handshake (upgrade, connect, hello) gets what is left of the timeout.
                let elapsed = Int64(Monotonic.nanoseconds() &- started)
                let left = TimeAmount.nanoseconds(max(1, timeout.nanoseconds - elapsed))
                let timer = channel.eventLoop.scheduleTask(in: left) {
                    ready.fail(Failure.timedOut)
                    channel.close(promise: nil)
                }
                ready.futureResult.whenComplete { _ in timer.cancel() }
            }
        }
        return ready.futureResult
    }
}

/// The bytes of the WebSocket framing this client needs (RFC 6455).
enum WebSocketWire {
    /// A final client frame header with a zero masking key (the payload then goes unchanged).
    static func writeClientFrameHeader(opcode: UInt8, length: Int, into buffer: inout ByteBuffer) {
        buffer.writeInteger(0x80 | opcode)
        if length < 126 {
            buffer.writeInteger(UInt8(0x80 | length))
        } else if length <= 0xFFFF {
            buffer.writeInteger(UInt8(0x80 | 126))
            buffer.writeInteger(UInt16(length))
        } else {
            buffer.writeInteger(UInt8(0x80 | 127))
            buffer.writeInteger(UInt64(length))
        }
        buffer.writeInteger(UInt32(0))
    }
}

/// The single handler of a ``BenchSocket`` channel.
private final class WebSocketClientHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum State {
        case upgrading
        case awaitingHello
        case open(BenchSocket)
        case closed
    }

    private let index: Int
    private let hostHeader: String
    private let token: String
    private let ready: EventLoopPromise<BenchSocket>
    private let callbacks: SocketCallbacks
    private var state = State.upgrading
    private var pending: ByteBuffer?
    private var closeCode: UInt16?
    private var message: ByteBuffer?
    private let connectFrame: String
    /// The client sent a close frame first (``BenchSocket/closeCleanly(code:grace:)``): the server's answer to it is
    /// not answered again.
    var closeSent = false

    init(
        index: Int, hostHeader: String, token: String, ready: EventLoopPromise<BenchSocket>, callbacks: SocketCallbacks,
        connectFrame: String? = nil
    ) {
        self.index = index
        self.hostHeader = hostHeader
        self.token = token
        self.ready = ready
        self.callbacks = callbacks
        self.connectFrame = connectFrame ?? Self.connectFrame
    }

    private static let connectFrame = #"{"type":"connect","protocolVersion":1}"#

    func channelActive(context: ChannelHandlerContext) {
        let request =
            "GET /v1/ws HTTP/1.1\r\nHost: \(hostHeader)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: cGFybGV5LWJlbmNoLWtleQ==\r\nSec-WebSocket-Version: 13\r\n"
            + "Authorization: Bearer \(token)\r\n\r\n"
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: request)), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var incoming = unwrapInboundIn(data)
        if var buffer = pending {
            pending = nil
            buffer.discardReadBytes()
            buffer.writeBuffer(&incoming)
            pending = buffer
        } else {
            pending = incoming
        }
        process(context: context)
        if let buffer = pending, buffer.readableBytes == 0 { pending = nil }
    }

    private func process(context: ChannelHandlerContext) {
        while var buffer = pending {
            pending = nil  // keep the buffer uniquely referenced while it is consumed
            defer { pending = buffer }
            if case .upgrading = state {
                // memchr and memcmp: the standard library's generic `firstRange(of:)` was 11% of the tool's CPU in
                // `connect`.
                guard let end = buffer.withUnsafeReadableBytes({ ByteSearch.first(Self.headEnd, in: $0) }) else {
                    return
                }
                let head = buffer.readString(length: end + Self.headEnd.count) ?? ""
                guard head.hasPrefix("HTTP/1.1 101") else {
                    fail(
                        context: context, BenchSocket.Failure.upgradeRefused(String(head.prefix(while: { $0 != "\r" })))
                    )
                    return
                }
                state = .awaitingHello
                var frame = context.channel.allocator.buffer(capacity: 64)
                WebSocketWire.writeClientFrameHeader(opcode: 0x1, length: connectFrame.utf8.count, into: &frame)
                frame.writeString(connectFrame)
                context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
                continue
            }
            guard let (fin, opcode, payload) = Self.readFrame(&buffer) else { return }
            handle(context: context, fin: fin, opcode: opcode, payload: payload)
            if case .closed = state { return }
        }
    }

    /// One server frame (never masked), or nil when it has not fully arrived.
    private static func readFrame(_ buffer: inout ByteBuffer) -> (Bool, UInt8, ByteBuffer)? {
        let start = buffer.readerIndex
        guard let first = buffer.readInteger(as: UInt8.self), let second = buffer.readInteger(as: UInt8.self) else {
            buffer.moveReaderIndex(to: start)
            return nil
        }
        var length = Int(second & 0x7F)
        if length == 126 {
            guard let value = buffer.readInteger(as: UInt16.self) else {
                buffer.moveReaderIndex(to: start)
                return nil
            }
            length = Int(value)
        } else if length == 127 {
            guard let value = buffer.readInteger(as: UInt64.self) else {
                buffer.moveReaderIndex(to: start)
                return nil
            }
            length = Int(value)
        }
        guard let payload = buffer.readSlice(length: length) else {
            buffer.moveReaderIndex(to: start)
            return nil
        }
        return (first & 0x80 != 0, first & 0x0F, payload)
    }

    private func handle(context: ChannelHandlerContext, fin: Bool, opcode: UInt8, payload: ByteBuffer) {
        switch opcode {
        case 0x1, 0x0:  // text, continuation
            var complete = payload
            if var partial = message {
                partial.writeImmutableBuffer(payload)
                complete = partial
                message = nil
            }
            guard fin else {
                message = complete
                return
            }
            text(context: context, complete)
        case 0x8:  // close
            var data = payload
            closeCode = data.readInteger(as: UInt16.self)
            if case .open = state, !closeSent {
                var frame = context.channel.allocator.buffer(capacity: 8)
                WebSocketWire.writeClientFrameHeader(opcode: 0x8, length: 2, into: &frame)
                frame.writeInteger(closeCode ?? 1000)
                context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
            }
        case 0x9:  // ping
            var frame = context.channel.allocator.buffer(capacity: payload.readableBytes + 8)
            WebSocketWire.writeClientFrameHeader(opcode: 0xA, length: payload.readableBytes, into: &frame)
            frame.writeImmutableBuffer(payload)
            context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
        default:
            break
        }
    }

    private static let helloPrefix = Array(#"{"type":"hello""#.utf8)
    private static let helloTag = Array(#""type":"hello""#.utf8)
    /// The end of an HTTP head.
    private static let headEnd: [UInt8] = [13, 10, 13, 10]

    private func text(context: ChannelHandlerContext, _ frame: ByteBuffer) {
        switch state {
        case .awaitingHello:
            let isHello =
                frame.readableBytesView.starts(with: Self.helloPrefix)
                || FrameKind.contains(frame, Self.helloTag)
            guard isHello else {
                fail(context: context, BenchSocket.Failure.refused(code: nil, frame: String(buffer: frame)))
                return
            }
            let socket = BenchSocket(index: index, channel: context.channel, connectedAt: Monotonic.nanoseconds())
            state = .open(socket)
            ready.succeed(socket)
        case .open(let socket):
            callbacks.text(socket, frame, Monotonic.nanoseconds())
        case .upgrading, .closed:
            break
        }
    }

    private func fail(context: ChannelHandlerContext, _ error: any Error) {
        state = .closed
        pending = nil
        ready.fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        switch state {
        case .open(let socket):
            state = .closed
            callbacks.closed(socket, closeCode)
        case .upgrading, .awaitingHello:
            state = .closed
            ready.fail(
                closeCode.map { BenchSocket.Failure.refused(code: $0, frame: "") }
                    ?? BenchSocket.Failure.closedBeforeHello)
        case .closed:
            break
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if case .open = state {} else { ready.fail(error) }
        context.close(promise: nil)
    }
}
