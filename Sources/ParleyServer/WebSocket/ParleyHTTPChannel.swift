// Adapted from hummingbird-websocket (Sources/HummingbirdWebSocket/WebSocketChannel.swift,
// HTTP1WebSocketUpgradeChannel): Copyright (c) the Hummingbird authors, Apache License 2.0. See NOTICE.
// SPDX-License-Identifier: Apache-2.0

import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOWebSocket

/// Hummingbird's HTTP/1 child channel with Parley's WebSocket upgrade: REST requests go to Hummingbird's responder;
/// an upgrade to `/v1/ws` gets a ``WebSocketConnectionHandler`` on the channel's own event loop.
///
/// Unlike Hummingbird's `HTTP1WebSocketUpgradeChannel` (a task and an async writer per socket), an upgraded socket
/// costs no task: ``ParleyHTTPServer`` starts one only for a connection that ``decided(_:_:logger:serve:)`` found to be
/// HTTP, and the socket lives in its NIO pipeline until it closes. Shutdown closes sockets through the gateway's
/// ``SocketRegistry``, not through the HTTP server.
struct ParleyHTTPChannel: ServerChildChannel, HTTPChannelHandler {
    enum UpgradeResult: Sendable {
        case websocket
        case notUpgraded(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
        case failedUpgrade(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
    }

    struct Value: ServerChildChannelValue {
        let upgradeOutcome: UpgradeOutcome
        let channel: any Channel
    }

    let responder: HTTPChannelHandler.Responder
    let gateway: WebSocketGateway
    let http1: HTTP1Channel.Configuration
    /// New connections per client address, when limited.
    let connectionAttempts: RateLimiter<String>?

    init(
        responder: @escaping HTTPChannelHandler.Responder, gateway: WebSocketGateway,
        connectionAttempts: RateLimiter<String>? = nil
    ) {
        self.responder = responder
        self.gateway = gateway
        self.connectionAttempts = connectionAttempts
        let edge = gateway.configuration.edge
        self.http1 = HTTP1Channel.Configuration(
            idleTimeout: edge.idleTimeout.timeAmount,
            httpDecoderConfiguration: .init(
                maxHeaderFieldSize: edge.maxHeaderFieldBytes, maxHeaderListSize: edge.maxHeaderBytes,
                maxHeaderFieldCount: edge.maxHeaderCount
            )
        )
    }

    /// The receive buffers of a connection: 1 KiB first, adapted to what its reads fill (64 bytes to 64 KiB).
    static let receiveBuffers = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 1024, maximum: 65536)

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let outcome = UpgradeOutcome()
            if let retryAfter = refusedAttempt(channel) {
                outcome.decide(.failure(ChannelError.alreadyClosed))
                let answer = EdgeResponse.bytes(
                    .tooManyRequests, code: .rateLimited, "Too many connections from this address.",
                    retryAfter: retryAfter
                )
                channel.writeAndFlush(answer).whenComplete { _ in EdgeResponse.closeAfterAnswer(channel) }
                return Value(upgradeOutcome: outcome, channel: channel)
            }
            // NIO keeps each channel's last receive buffer for its next read: with its default first size (2 KiB),
            // an idle connection held 2 KiB for a request and a connect frame of a few hundred bytes (connect 19,000:
            // 9.2 KiB per connection, 8.2 with 1 KiB; 512 bytes split upgrade requests in two reads and cost connect
            // rate). Reads that fill the buffer still grow it (up to 64 KiB) for large frames and bodies.
            try channel.syncOptions?.setOption(.recvAllocator, value: Self.receiveBuffers)
            let gateway = self.gateway
            let admission = gateway.admission
            let sniffer = WebSocketUpgradeSniffer(
                outcome: outcome, maxFrameSize: gateway.configuration.maxInboundFrameSize,
                limits: gateway.configuration.edge, admitted: { admission.admitted($0) },
                heard: { admission.heard($0) },
                upgrade: { channel, authorization in
                    try gateway.addHandlers(to: channel, authorization: authorization)
                },
                fallBack: { channel in try self.configureHTTP(channel: channel, logger: logger) }
            )
            try channel.pipeline.syncOperations.addHandler(sniffer)
            if admission.isQuiescing {
                // Accepted just before graceful shutdown began, the connection had no handler yet when the quiesce
                // reached it (a silent one then stayed open until the final close): the sniffer hears it now.
                channel.pipeline.syncOperations.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
            }
            return Value(upgradeOutcome: outcome, channel: channel)
        }
    }

    /// How long until a connection from this channel's address would be accepted, when it is refused now.
    private func refusedAttempt(_ channel: any Channel) -> Duration? {
        guard let connectionAttempts, let address = channel.remoteAddress?.ipAddress,
            !gateway.configuration.edge.trustedProxies.contains(address)
        else { return nil }
        return connectionAttempts.take(address)
    }

    /// NIO's HTTP/1 pipeline with the WebSocket upgrader, for every connection whose first request is not a plain
    /// upgrade to `/v1/ws` (``WebSocketUpgradeSniffer``): REST, and upgrades NIO answers itself (another path: 400).
    private func configureHTTP(channel: any Channel, logger: Logger) throws -> EventLoopFuture<UpgradeResult> {
        let upgradeAttempted = NIOLoopBoundBox(false, eventLoop: channel.eventLoop)
        let gateway = self.gateway
        let admission = gateway.admission
        let headGuard = HTTPRequestHeadGuard(limits: gateway.configuration.edge, admitted: { admission.admitted($0) })
        let requestGuard = HTTPRequestGuard(
            limits: gateway.configuration.edge, files: gateway.configuration.files, head: headGuard
        )
        headGuard.attach(requestGuard)
        let guards = NIOLoopBound((headGuard, requestGuard), eventLoop: channel.eventLoop)
        let upgrader = NIOTypedWebSocketServerUpgrader<UpgradeResult>(
            maxFrameSize: gateway.configuration.maxInboundFrameSize,
            // Protocol errors are answered by the connection's handler, with Parley's close reasons.
            enableAutomaticErrorHandling: false,
            shouldUpgrade: { channel, head in
                upgradeAttempted.value = true
                // HTTPRequestGuard refused every upgrade RFC 6455 does not allow (WebSocketUpgradeValidation).
                guard WebSocketGateway.accepts(uri: head.uri) else {
                    return channel.eventLoop.makeSucceededFuture(nil)
                }
                // The upgraded socket speaks WebSocket frames: the HTTP guards leave with NIO's HTTP handlers.
                let pipeline = channel.pipeline.syncOperations
                pipeline.removeHandler(guards.value.0, promise: nil)
                pipeline.removeHandler(guards.value.1, promise: nil)
                return channel.eventLoop.makeSucceededFuture([:])
            },
            upgradePipelineHandler: { channel, head in
                channel.eventLoop.makeCompletedFuture {
                    try gateway.addHandlers(to: channel, authorization: head.headers.first(name: "authorization"))
                    return UpgradeResult.websocket
                }
            }
        )
        let http1 = self.http1
        let serverUpgradeConfiguration = NIOTypedHTTPServerUpgradeConfiguration(
            upgraders: [upgrader],
            notUpgradingCompletionHandler: { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
                    try channel.pipeline.syncOperations.addHandlers(http1.additionalChannelHandlers())
                    try channel.pipeline.syncOperations.addHandler(
                        HTTPConnectionStateHandler(idleTimeout: http1.idleTimeout.map { .init($0) }, logger: logger)
                    )
                    let asyncChannel = try NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>(
                        wrappingChannelSynchronously: channel,
                        configuration: .init(isOutboundHalfClosureEnabled: true)
                    )
                    return upgradeAttempted.value ? .failedUpgrade(asyncChannel) : .notUpgraded(asyncChannel)
                }
            }
        )
        var configuration = NIOUpgradableHTTPServerPipelineConfiguration<UpgradeResult>(
            upgradeConfiguration: serverUpgradeConfiguration
        )
        configuration.enablePipelining = false  // HTTP is pipelined by NIOAsyncChannel
        configuration.enableErrorHandling = false  // handled by Hummingbird
        configuration.enableResponseHeaderValidation = false  // Swift HTTP Types validate already
        configuration.decoderConfiguration.maxHeaderFieldSize = http1.httpDecoder.maxHeaderFieldSize
        configuration.decoderConfiguration.maxHeaderListSize = http1.httpDecoder.maxHeaderListSize
        configuration.decoderConfiguration.maxHeaderFieldCount = http1.httpDecoder.maxHeaderFieldCount
        let pipeline = channel.pipeline.syncOperations
        try pipeline.addHandler(headGuard)
        let upgraded = try pipeline.configureUpgradableHTTPServerPipeline(configuration: configuration)
        // After NIO's decoder and encoder, in front of its upgrader.
        let upgradeHandler = try pipeline.handler(type: NIOTypedHTTPServerUpgradeHandler<UpgradeResult>.self)
        try pipeline.addHandler(requestGuard, position: .before(upgradeHandler))
        return upgraded
    }

    /// What follows a connection's first request, on its event loop (``UpgradeOutcome/whenDecided(_:)``): a WebSocket
    /// lives on in its pipeline, with no task; an HTTP connection goes to `serve`, which runs ``handle(value:logger:)``
    /// in a task; a connection that ended before its first request was served (or was refused) is closed.
    func decided(_ value: Value, _ outcome: UpgradeOutcome.Value, logger: Logger, serve: (Value) -> Void) {
        switch outcome {
        case .success(.websocket):
            // The socket's handler runs it from here on; its handshake takes a slot of its own.
            gateway.admission.becameWebSocket(value.channel)
        case .success(.notUpgraded), .success(.failedUpgrade):
            gateway.admission.admitted(value.channel)
            serve(value)
        case .failure(let error):
            // Whoever decided it closes the connection, some after an answer (408, 429: EdgeResponse.closeAfterAnswer),
            // which closing now would cut; past that answer's linger it is closed here in any case.
            logger.trace("Connection ended before its first request", metadata: ["error": "\(error)"])
            // No timer for one closed already (a health check's connect and close).
            guard value.channel.isActive else { return }
            value.channel.eventLoop.scheduleTask(in: EdgeResponse.linger) { [weak channel = value.channel] in
                channel?.close(promise: nil)
            }
        }
    }

    /// Serves an HTTP connection (``decided(_:_:logger:serve:)`` chose it): Hummingbird's HTTP/1 loop with the
    /// responder, or the 400 of a refused upgrade.
    func handle(value: Value, logger: Logger) async {
        do {
            switch try await value.upgradeOutcome.value() {
            case .websocket:
                return
            case .notUpgraded(let http1):
                await handleHTTP(asyncChannel: http1, logger: logger)
            case .failedUpgrade(let http1):
                logger.debug("WebSocket upgrade refused")
                await Self.writeFailedUpgrade(http1, logger: logger)
            }
        } catch {
            value.channel.close(promise: nil)
        }
    }

    /// HTTP 400 for an upgrade to a path other than `/v1/ws`, or one RFC 6455 does not allow.
    private static func writeFailedUpgrade(
        _ channel: NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>, logger: Logger
    ) async {
        do {
            try await channel.executeThenClose { _, outbound in
                let body = EdgeResponse.body(
                    code: .badRequest,
                    "Not a valid WebSocket upgrade: GET \(WebSocketGateway.path) over HTTP/1.1, without a body, with "
                        + "Upgrade: websocket, Connection: Upgrade, Sec-WebSocket-Version: 13 and a Sec-WebSocket-Key of "
                        + "16 bytes in base64.",
                    retryAfter: nil
                )
                let head = HTTPResponse(
                    status: .badRequest,
                    headerFields: [
                        .connection: "close", .contentLength: "\(body.count)",
                        .contentType: "application/json; charset=utf-8",
                    ]
                )
                try await outbound.write(contentsOf: [.head(head), .body(ByteBuffer(bytes: body)), .end(nil)])
            }
        } catch {
            logger.trace("Failed to write to the channel", metadata: ["error": "\(error)"])
        }
    }
}
