import NIOCore
import NIOHTTP1
import NIOPosix
import ParleyProtocol

/// An HTTP answer: status and body.
struct HTTPAnswer: Sendable {
    var status: Int
    var body: ByteBuffer
    /// From the request's write to the end of its answer, on the connection's event loop (monotonic nanoseconds): what
    /// the server took, without the time the caller's task waited to run.
    var wireNanoseconds: UInt64 = 0

    var text: String { String(buffer: body) }

    func decode<T: Decodable>(_ type: T.Type = T.self) throws -> T {
        try WireCoding.decode(type, from: body.readableBytesView)
    }
}

struct HTTPError: Error, CustomStringConvertible {
    var description: String
}

/// One keep-alive HTTP/1.1 connection, one request at a time: the REST setup (users, tokens, groups) runs several
/// of them side by side; the storm's `/health` probe uses one to measure the server's responsiveness.
final class HTTPConnection: Sendable {
    let channel: any Channel
    let host: String
    private let handler: NIOLoopBound<ResponseHandler>

    private init(channel: any Channel, host: String, handler: NIOLoopBound<ResponseHandler>) {
        self.channel = channel
        self.host = host
        self.handler = handler
    }

    static func connect(to target: SocketAddress, host: String, group: any EventLoopGroup) async throws
        -> HTTPConnection
    {
        let eventLoop = group.next()
        let channel = try await ClientBootstrap(group: eventLoop)
            .connectTimeout(.seconds(10))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(ResponseHandler())
                }
            }
            .connect(to: target).get()
        let handler = try await channel.eventLoop.submit {
            NIOLoopBound(
                try channel.pipeline.syncOperations.handler(type: ResponseHandler.self), eventLoop: channel.eventLoop)
        }.get()
        return HTTPConnection(channel: channel, host: host, handler: handler)
    }

    /// Sends a request and waits for its answer.
    func request(
        _ method: HTTPMethod, _ path: String, headers: [(String, String)] = [], body: ByteBuffer? = nil,
        contentType: String = "application/json"
    ) async throws -> HTTPAnswer {
        let promise = channel.eventLoop.makePromise(of: HTTPAnswer.self)
        var head = HTTPRequestHead(version: .http1_1, method: method, uri: path)
        head.headers.add(name: "Host", value: host)
        for (name, value) in headers { head.headers.add(name: name, value: value) }
        if let body {
            head.headers.add(name: "Content-Type", value: contentType)
            head.headers.add(name: "Content-Length", value: String(body.readableBytes))
        }
        let channel = self.channel
        let handler = self.handler
        let requestHead = head
        channel.eventLoop.execute {
            // A request on a connection that is already gone would wait for an answer forever.
            guard channel.isActive else {
                promise.fail(HTTPError(description: "connection closed"))
                return
            }
            handler.value.waiting.append((promise, Monotonic.nanoseconds()))
            channel.write(HTTPClientRequestPart.head(requestHead), promise: nil)
            if let body { channel.write(HTTPClientRequestPart.body(.byteBuffer(body)), promise: nil) }
            let written = channel.eventLoop.makePromise(of: Void.self)
            written.futureResult.whenFailure { promise.fail($0) }
            channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: written)
        }
        return try await promise.futureResult.get()
    }

    /// A JSON request with a JSON body.
    func json(
        _ method: HTTPMethod, _ path: String, headers: [(String, String)] = [], body: some Encodable
    ) async throws -> HTTPAnswer {
        let bytes = try WireCoding.encode(body)
        return try await request(method, path, headers: headers, body: channel.allocator.buffer(bytes: bytes))
    }

    func close() async {
        try? await channel.close()
    }
}

/// Matches responses to the requests waiting for them, in order.
private final class ResponseHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    var waiting = CircularBuffer<(promise: EventLoopPromise<HTTPAnswer>, sentAt: UInt64)>()
    private var status = 0
    private var body = ByteBuffer()

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = Int(head.status.code)
            body.clear()
        case .body(var part):
            body.writeBuffer(&part)
        case .end:
            var answer = HTTPAnswer(status: status, body: body)
            body = ByteBuffer()
            guard !waiting.isEmpty else { return }
            let (promise, sentAt) = waiting.removeFirst()
            answer.wireNanoseconds = Monotonic.nanoseconds() &- sentAt
            promise.succeed(answer)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        while !waiting.isEmpty { waiting.removeFirst().promise.fail(HTTPError(description: "connection closed")) }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        while !waiting.isEmpty { waiting.removeFirst().promise.fail(error) }
        context.close(promise: nil)
    }
}
