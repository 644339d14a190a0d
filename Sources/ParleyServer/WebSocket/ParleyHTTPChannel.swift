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
/// costs no task: ``handle(value:logger:)`` returns at once for it, and the socket lives in its NIO pipeline until it
/// closes. Shutdown closes sockets through the gateway's ``SocketRegistry``, not through the HTTP server.
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

    init(responder: @escaping HTTPChannelHandler.Responder, gateway: WebSocketGateway, http1: HTTP1Channel.Configuration = .init()) {
        self.responder = Self.redirectingLateUpgrades(responder)
        self.gateway = gateway
        self.http1 = http1
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let outcome = UpgradeOutcome()
            let gateway = self.gateway
            let sniffer = WebSocketUpgradeSniffer(
                outcome: outcome, maxFrameSize: gateway.configuration.maxInboundFrameSize,
                upgrade: { channel, authorization in
                    try gateway.addHandlers(to: channel, authorization: authorization)
                },
                fallBack: { channel in try self.configureHTTP(channel: channel, logger: logger) }
            )
            try channel.pipeline.syncOperations.addHandler(sniffer)
            return Value(upgradeOutcome: outcome, channel: channel)
        }
    }

    /// NIO's HTTP/1 pipeline with the WebSocket upgrader, for every connection whose first request is not a plain
    /// upgrade to `/v1/ws` (``WebSocketUpgradeSniffer``): REST, and upgrades NIO answers itself (another path: 400).
    private func configureHTTP(channel: any Channel, logger: Logger) throws -> EventLoopFuture<UpgradeResult> {
        let upgradeAttempted = NIOLoopBoundBox(false, eventLoop: channel.eventLoop)
        let gateway = self.gateway
        let upgrader = NIOTypedWebSocketServerUpgrader<UpgradeResult>(
            maxFrameSize: gateway.configuration.maxInboundFrameSize,
            // Protocol errors are answered by the connection's handler, with Parley's close reasons.
            enableAutomaticErrorHandling: false,
            shouldUpgrade: { channel, head in
                upgradeAttempted.value = true
                return channel.eventLoop.makeSucceededFuture(WebSocketGateway.accepts(uri: head.uri) ? [:] : nil)
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
        return try channel.pipeline.syncOperations.configureUpgradableHTTPServerPipeline(configuration: configuration)
    }

    func handle(value: Value, logger: Logger) async {
        do {
            switch try await value.upgradeOutcome.value() {
            case .websocket:
                // The socket's handler runs it from here on (and tells the admission gate when it is live).
                return
            case .notUpgraded(let http1):
                gateway.admission.admitted(value.channel)
                await handleHTTP(asyncChannel: http1, logger: logger)
            case .failedUpgrade(let http1):
                gateway.admission.admitted(value.channel)
                logger.debug("WebSocket upgrade refused")
                await Self.writeFailedUpgrade(http1, logger: logger)
            }
        } catch let error as ChannelError where error == .inputClosed {
            logger.trace("Upgrade failed as input was closed")
        } catch {
            logger.debug("Error handling upgrade result", metadata: ["error": "\(error)"])
        }
    }

    /// HTTP 400 for an upgrade to a path other than `/v1/ws`.
    private static func writeFailedUpgrade(_ channel: NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>, logger: Logger) async {
        do {
            try await channel.executeThenClose { _, outbound in
                let head = HTTPResponse(status: .badRequest, headerFields: [.connection: "close", .contentLength: "0"])
                try await outbound.write(contentsOf: [.head(head), .end(nil)])
            }
        } catch {
            logger.trace("Failed to write to the channel", metadata: ["error": "\(error)"])
        }
    }

    /// An upgrade request after an HTTP request on a keep-alive connection cannot be upgraded (NIO's upgrader only
    /// looks at a connection's first request): it is redirected to the same URI, on a new connection.
    private static func redirectingLateUpgrades(_ responder: @escaping HTTPChannelHandler.Responder) -> HTTPChannelHandler.Responder {
        struct RedirectCloseError: Error {}
        return { request, responseWriter, channel in
            guard request.headers[.upgrade] == "websocket" else {
                try await responder(request, responseWriter, channel)
                return
            }
            var path = request.uri.path
            if let query = request.uri.query { path += "?\(query)" }
            let response = HTTPResponse(status: .temporaryRedirect, headerFields: [.connection: "close", .location: path])
            try await responseWriter.writeResponse(response)
            throw RedirectCloseError()
        }
    }
}
