import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// An app's backend for webhook tests (and an OTLP/HTTP collector for trace tests): an HTTP/1.1 server on 127.0.0.1
/// that records every request and answers what the test scripted (200 unless told otherwise).
///
/// Stop it to make the server's connections be refused; start another on the same ``port`` to come back.
public final class WebhookReceiver: Sendable {
    /// An answer the test scripts.
    public enum Answer: Sendable, Hashable {
        case status(Int)
        /// This status with a JSON body.
        case json(Int, String)
        /// Never answer (the sender's timeout ends it).
        case hang
        /// Close the connection without an answer.
        case close
    }

    /// One request as the receiver saw it.
    public struct Request: Sendable, Hashable {
        public var method: String
        public var path: String
        /// Header names lowercased; the last value of each.
        public var headers: [String: String]
        public var body: [UInt8]
        public var answer: Answer

        /// Whether it was answered with a 2xx status.
        public var accepted: Bool {
            switch answer {
            case .status(let status), .json(let status, _): (200..<300).contains(status)
            case .hang, .close: false
            }
        }

        public func header(_ name: String) -> String? { headers[name.lowercased()] }
    }

    struct State {
        var requests: [Request] = []
        var script: [Answer] = []
        var everyRequest: Answer?
        var waiters:
            [(
                id: UInt64, condition: @Sendable ([Request]) -> Bool,
                continuation: CheckedContinuation<[Request], Never>
            )] = []
        var nextWaiter: UInt64 = 0
    }

    public let port: Int
    private let channel: any Channel
    private let state: NIOLockedValueBox<State>
    private let children: NIOLockedValueBox<[ObjectIdentifier: any Channel]>

    private init(
        port: Int, channel: any Channel, state: NIOLockedValueBox<State>,
        children: NIOLockedValueBox<[ObjectIdentifier: any Channel]>
    ) {
        self.port = port
        self.channel = channel
        self.state = state
        self.children = children
    }

    /// The URL of `path` on this receiver.
    public func url(_ path: String = "/hooks") -> String { "http://127.0.0.1:\(port)\(path)" }

    /// Listens on 127.0.0.1:`port` (0: any free port).
    public static func start(port: Int = 0) async throws -> WebhookReceiver {
        let state = NIOLockedValueBox(State())
        let children = NIOLockedValueBox([ObjectIdentifier: any Channel]())
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                children.withLockedValue { $0[ObjectIdentifier(channel)] = channel }
                channel.closeFuture.whenComplete { _ in
                    _ = children.withLockedValue { $0.removeValue(forKey: ObjectIdentifier(channel)) }
                }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(ReceiverHandler(state: state))
                }
            }
            .bind(host: "127.0.0.1", port: port).get()
        return WebhookReceiver(
            port: channel.localAddress?.port ?? port, channel: channel, state: state, children: children
        )
    }

    /// Stops listening and closes every connection.
    public func stop() async throws {
        try await channel.close()
        for child in children.withLockedValue({ Array($0.values) }) { try? await child.close() }
    }

    /// Answers the next requests with `answers`, in order; then the default again.
    public func script(_ answers: [Answer]) {
        state.withLockedValue { $0.script += answers }
    }

    /// Answers every request not scripted with `answer`; nil goes back to 200.
    public func answerEveryRequest(with answer: Answer?) {
        state.withLockedValue { $0.everyRequest = answer }
    }

    /// Every request so far, in arrival order.
    public var requests: [Request] { state.withLockedValue { $0.requests } }

    /// Waits until `condition` holds for the requests so far, or `timeout` passed; returns the requests so far
    /// either way (a test checks what it waited for: a wait that cannot end must not hang the suite).
    public func wait(
        until condition: @escaping @Sendable ([Request]) -> Bool, timeout: Duration = .seconds(60)
    ) async -> [Request] {
        await withCheckedContinuation { continuation in
            let (ready, id) = state.withLockedValue { state -> ([Request]?, UInt64) in
                if condition(state.requests) { return (state.requests, 0) }
                state.nextWaiter += 1
                state.waiters.append((state.nextWaiter, condition, continuation))
                return (nil, state.nextWaiter)
            }
            if let ready {
                continuation.resume(returning: ready)
                return
            }
            Task { [state] in
                try? await Task.sleep(for: timeout)
                let expired = state.withLockedValue { state -> (CheckedContinuation<[Request], Never>, [Request])? in
                    guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                    return (state.waiters.remove(at: index).continuation, state.requests)
                }
                if let (continuation, requests) = expired { continuation.resume(returning: requests) }
            }
        }
    }

    /// Waits until `count` different delivery ids were accepted; returns every request so far.
    public func waitForAccepted(deliveries count: Int) async -> [Request] {
        await wait { requests in
            Set(requests.filter(\.accepted).compactMap { $0.header("X-Parley-Delivery") }).count >= count
        }
    }
}

/// Gathers one request, records it with the answer the script picks, and answers.
private final class ReceiverHandler: ChannelInboundHandler, @unchecked Sendable {
    // @unchecked: the handler's fields are only touched on its channel's event loop (NIO's handler contract); the
    // shared state is behind its lock.
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let state: NIOLockedValueBox<WebhookReceiver.State>
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    static let maxBody = 4 * 1024 * 1024

    init(state: NIOLockedValueBox<WebhookReceiver.State>) {
        self.state = state
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
        case .body(var buffer):
            body += buffer.readBytes(length: buffer.readableBytes) ?? []
            if body.count > Self.maxBody { context.close(promise: nil) }
        case .end:
            guard let head else { return }
            self.head = nil
            respond(context: context, head: head)
        }
    }

    private func respond(context: ChannelHandlerContext, head: HTTPRequestHead) {
        var headers: [String: String] = [:]
        for (name, value) in head.headers { headers[name.lowercased()] = value }
        let body = self.body
        let (answer, wakeUps) = state.withLockedValue { state in
            let answer = state.script.isEmpty ? (state.everyRequest ?? .status(200)) : state.script.removeFirst()
            state.requests.append(
                WebhookReceiver.Request(
                    method: "\(head.method)", path: head.uri, headers: headers, body: body, answer: answer
                )
            )
            let requests = state.requests
            var wakeUps: [(CheckedContinuation<[WebhookReceiver.Request], Never>, [WebhookReceiver.Request])] = []
            state.waiters.removeAll { waiter in
                guard waiter.condition(requests) else { return false }
                wakeUps.append((waiter.continuation, requests))
                return true
            }
            return (answer, wakeUps)
        }
        switch answer {
        case .status(let status):
            self.answer(context: context, head: head, status: status, type: "text/plain", body: "ok")
        case .json(let status, let body):
            self.answer(context: context, head: head, status: status, type: "application/json", body: body)
        case .hang:
            break
        case .close:
            context.close(promise: nil)
        }
        for (continuation, requests) in wakeUps { continuation.resume(returning: requests) }
    }

    private func answer(context: ChannelHandlerContext, head: HTTPRequestHead, status: Int, type: String, body: String)
    {
        var responseHeaders = HTTPHeaders()
        responseHeaders.add(name: "Content-Length", value: "\(body.utf8.count)")
        responseHeaders.add(name: "Content-Type", value: type)
        let responseHead = HTTPResponseHead(
            version: head.version, status: HTTPResponseStatus(statusCode: status), headers: responseHeaders
        )
        context.write(wrapOutboundOut(.head(responseHead)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: body)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}
