import Foundation

/// What happens on a transport connection.
public enum TransportEvent: Sendable {
    /// The WebSocket is open: the client may send (and must send `connect` first).
    case opened
    /// A text frame from the server.
    case text(String)
    /// The connection closed; `code` and `reason` are the server's close frame, if it sent one.
    case closed(code: UInt16?, reason: String?)
    /// The connection could not be opened, or broke.
    case failed(ParleyError)
}

/// One WebSocket connection: frames out, events in.
public protocol TransportConnection: Sendable {
    /// Everything that happens on the connection, ending with `.closed` or `.failed`.
    var events: AsyncStream<TransportEvent> { get }
    /// Queues a text frame.
    func send(_ text: String)
    /// Starts the close handshake; a connection that cannot complete it is abandoned shortly after.
    func close(code: UInt16)
}

/// Opens WebSocket connections: ``URLSessionWebSocketTransport`` on Apple platforms, `WSClientTransport` (SwiftNIO)
/// elsewhere, or the app's own (`AppSettings.Builder().webSocketTransport(_:)`). The connection rules above it are the
/// same whatever the transport.
public protocol WebSocketTransport: Sendable {
    /// Starts a connection to `url` (`ws` or `wss`) with `authToken` as its bearer token; its ``TransportConnection/events``
    /// report the open, the frames and the end.
    func open(url: String, authToken: String) -> any TransportConnection
}

#if canImport(WSClient)
    import HTTPTypes
    import Logging
    import NIOConcurrencyHelpers
    import NIOWebSocket
    import WSClient

    /// The SDK's WebSocket on Linux (URLSession has none there): swift-websocket's `WebSocketClient` over SwiftNIO.
    public struct WSClientTransport: WebSocketTransport {
        /// Largest frame accepted from the server.
        var maxFrameSize = 8 * 1024 * 1024
        /// How long the TCP connection and the upgrade may take before the attempt is given up.
        var openTimeout: Duration = .seconds(20)
        var logger: Logger

        /// A transport that logs to `logger`.
        public init(logger: Logger) {
            self.logger = logger
        }

        /// Starts a connection to `url` with the token in its `Authorization` header, in a task of its own.
        public func open(url: String, authToken: String) -> any TransportConnection {
            WSClientConnection(
                url: url, authToken: authToken, maxFrameSize: maxFrameSize, openTimeout: openTimeout, logger: logger
            )
        }
    }

    /// A connection run by `WebSocketClient` in its own task.
    final class WSClientConnection: TransportConnection {
        private enum Outbound: Sendable {
            case text(String)
            case close(UInt16)
        }

        public let events: AsyncStream<TransportEvent>
        private let eventSink: AsyncStream<TransportEvent>.Continuation
        private let outboundSink: AsyncStream<Outbound>.Continuation
        private let task = NIOLockedValueBox<Task<Void, Never>?>(nil)

        init(url: String, authToken: String, maxFrameSize: Int, openTimeout: Duration, logger: Logger) {
            (events, eventSink) = AsyncStream.makeStream(of: TransportEvent.self)
            let (outbound, outboundSink) = AsyncStream.makeStream(of: Outbound.self)
            self.outboundSink = outboundSink
            let eventSink = self.eventSink
            var headers = HTTPFields()
            // An empty token sends no header (protocol tests authenticate in the connect frame, as browsers do).
            if !authToken.isEmpty { headers[.authorization] = "Bearer \(authToken)" }
            let configuration = WebSocketClientConfiguration(
                maxFrameSize: maxFrameSize, additionalHeaders: headers, closeTimeout: .seconds(2)
            )
            let opened = NIOLockedValueBox(false)
            let runner = Task {
                do {
                    let closeFrame = try await WebSocketClient.connect(
                        url: url, configuration: configuration, logger: logger
                    ) { inbound, writer, _ in
                        opened.withLockedValue { $0 = true }
                        eventSink.yield(.opened)
                        try await withThrowingTaskGroup(of: Void.self) { group in
                            group.addTask {
                                for await item in outbound {
                                    switch item {
                                    case .text(let text):
                                        try await writer.write(.text(text))
                                    case .close(let code):
                                        try await writer.close(.init(codeNumber: Int(code)), reason: nil)
                                        return
                                    }
                                }
                            }
                            for try await message in inbound.messages(maxSize: maxFrameSize) {
                                if case .text(let text) = message { eventSink.yield(.text(text)) }
                            }
                            group.cancelAll()
                        }
                    }
                    eventSink.yield(
                        .closed(
                            code: closeFrame.map { UInt16(webSocketErrorCode: $0.closeCode) },
                            reason: closeFrame?.reason)
                    )
                } catch {
                    eventSink.yield(
                        .failed(ParleyError(.webSocketError, "The WebSocket failed.", underlying: "\(error)"))
                    )
                }
                eventSink.finish()
                outboundSink.finish()
            }
            task.withLockedValue { $0 = runner }
            // The upgrade of swift-websocket's client can wait forever when the server half-closes the connection
            // before answering (NIO's client upgrade handler ignores `inputClosed`). Give up on such an attempt: the
            // caller hears `.failed` and retries; the abandoned task is cancelled.
            Task {
                try? await Task.sleep(for: openTimeout)
                guard !opened.withLockedValue({ $0 }) else { return }
                eventSink.yield(.failed(ParleyError(.timeout, "The WebSocket did not open in time.")))
                eventSink.finish()
                runner.cancel()
            }
        }

        public func send(_ text: String) {
            outboundSink.yield(.text(text))
        }

        public func close(code: UInt16) {
            outboundSink.yield(.close(code))
            guard let runner = task.withLockedValue({ $0 }) else { return }
            // A stalled connection never completes the handshake: give it a moment, then abandon it.
            Task {
                try? await Task.sleep(for: .seconds(3))
                runner.cancel()
            }
        }
    }
#endif
