import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle

/// The listening socket of the REST API and the WebSocket endpoint: what Hummingbird's `Application` and `Server` do
/// for Parley, on NIO's `ServerBootstrap`, with a task only for HTTP connections.
///
/// Hummingbird's server hands every accepted connection to a task of its own, through an async sequence, and that task
/// waits for the connection's first request: for a WebSocket, which then lives in its NIO pipeline, that was a task,
/// two hand-offs to the threads of Swift concurrency and the wake-ups they cost, about a fifth of the server's CPU per
/// connection in `parley-bench connect` (docs/BENCHMARKS.md). Here the first request decides on the connection's event
/// loop (``ParleyHTTPChannel/decided(_:_:logger:serve:)``): a WebSocket costs no task, and an HTTP connection gets one,
/// in this service's task group, running Hummingbird's HTTP/1 loop with the router's responder.
///
/// What Hummingbird's did and this keeps: the backlog, `SO_REUSEADDR`, remote half-closure, the back-off after a
/// failed accept, the `Date` and `Server` headers, a 500 for an error no middleware answered, a request id in each
/// request's logger. On graceful shutdown the listening socket closes, every connection that is not a WebSocket is
/// asked to quiesce (an idle keep-alive connection closes, one serving a request closes after its response, as with
/// Hummingbird's `ServerQuiescingHelper`; the ``AdmissionGate`` knows them, so no handler of the listening socket keeps
/// a second list of every connection), and `run()` returns once every HTTP connection's task ended; WebSockets are
/// closed by ``SocketCloser``.
struct ParleyHTTPServer: Service, CustomStringConvertible {
    struct Configuration: Sendable {
        var hostname: String
        var port: Int
        var backlog: Int
        var serverName: String
    }

    let channel: ParleyHTTPChannel
    let configuration: Configuration
    let onServerRunning: @Sendable (any Channel) async -> Void
    let logger: Logger

    /// - Parameter makeChannel: the child channel for the HTTP responder this builds from `responder`.
    init<Responder: HTTPResponder>(
        responder: Responder, configuration: Configuration, logger: Logger,
        onServerRunning: @escaping @Sendable (any Channel) async -> Void,
        makeChannel: (@escaping HTTPChannelHandler.Responder) -> ParleyHTTPChannel
    ) where Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
        self.channel = makeChannel(
            Self.respond(with: responder, serverName: configuration.serverName, logger: logger)
        )
        self.configuration = configuration
        self.onServerRunning = onServerRunning
        self.logger = logger
    }

    /// What service lifecycle logs: not the configuration, which holds secrets (the metrics token).
    var description: String { "ParleyHTTPServer(\(configuration.hostname):\(configuration.port))" }

    func run() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        let (connections, continuation) = AsyncStream.makeStream(of: ParleyHTTPChannel.Value.self)
        let channel = self.channel
        let logger = self.logger
        let serverChannel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: Int32(clamping: configuration.backlog))
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            // Accepting pauses for a second after it failed (EMFILE, ENFILE): ``AdmissionGate/install(on:logger:)``
            // puts ``AcceptFailureLogger`` first on the listening socket.
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { child in
                child.eventLoop.makeCompletedFuture {
                    try child.pipeline.syncOperations.addHandler(
                        SetUpWhenActive { child in
                            channel.setup(channel: child, logger: logger).map { value in
                                value.upgradeOutcome.whenDecided { outcome in
                                    channel.decided(value, outcome, logger: logger) { value in
                                        // After shutdown no task is started: the connection is closed instead.
                                        if case .terminated = continuation.yield(value) {
                                            value.channel.close(promise: nil)
                                        }
                                    }
                                }
                            }
                        }
                    )
                }
            }
            .bind(host: configuration.hostname, port: configuration.port).get()
        serverChannel.closeFuture.whenComplete { _ in continuation.finish() }
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await onServerRunning(serverChannel)
                await withDiscardingTaskGroup { group in
                    for await value in connections {
                        group.addTask { await channel.handle(value: value, logger: logger) }
                    }
                }
            } onGracefulShutdown: {
                // No connection comes in any more; those there finish (the WebSockets: SocketCloser).
                serverChannel.close(promise: nil)
                channel.gateway.admission.quiesceEveryConnection()
            }
        } onCancel: {
            continuation.finish()
            serverChannel.close(promise: nil)
        }
        try? await serverChannel.close()
    }

    /// Answers a request with `responder`, as Hummingbird's `Application` does.
    static func respond<Responder: HTTPResponder>(
        with responder: Responder, serverName: String, logger: Logger
    ) -> HTTPChannelHandler.Responder
    where Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
        let dates = HTTPDates()
        return { request, responseWriter, channel in
            var logger = logger
            logger[metadataKey: "hb.request.id"] = .stringConvertible(RequestID())
            let context = Responder.Context(source: .init(channel: channel, logger: logger))
            var response: Response
            do {
                response = try await responder.respond(to: request, context: context)
            } catch let error as HTTPParserError {
                // Hummingbird's HTTP/1 loop answers it with 400 and closes the connection.
                throw error
            } catch {
                logger.debug("Unrecognised Error", metadata: ["error.type": "\(error)"])
                response = Response(status: .internalServerError, body: .init())
            }
            response.headers[.date] = dates.now()
            response.headers[.server] = serverName
            do {
                try await responseWriter.write(response: response.head, body: response.body)
            } catch is HTTPParserError {
                // Not the parser error itself, which would make the loop write a second response: the connection
                // closes.
                throw ResponseInterrupted()
            }
        }
    }

    /// The request turned out malformed while its response was being written.
    struct ResponseInterrupted: Error {}
}

/// Sets a connection up once it is registered and active, then leaves its pipeline: NIO's `ServerBootstrap` runs the
/// child initializer before the channel is registered, and ``ParleyHTTPChannel/setup(channel:logger:)`` may answer at
/// once (429), which needs an active channel (Hummingbird's async bootstrap ran it after registration too).
final class SetUpWhenActive: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private let setUp: (any Channel) -> EventLoopFuture<Void>

    init(_ setUp: @escaping (any Channel) -> EventLoopFuture<Void>) {
        self.setUp = setUp
    }

    func channelActive(context: ChannelHandlerContext) {
        let channel = context.channel
        setUp(channel).whenFailure { _ in channel.close(promise: nil) }
        context.fireChannelActive()
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}

/// The `Date` header's value (RFC 9110, `Sun, 06 Nov 1994 08:49:37 GMT`), formatted once per second.
final class HTTPDates: Sendable {
    private let cached = NIOLockedValueBox<(second: Int, text: String)>((-1, ""))

    /// The current time, formatted.
    func now() -> String {
        let second = Int(Date().timeIntervalSince1970)
        if let text = cached.withLockedValue({ $0.second == second ? $0.text : nil }) { return text }
        let text = Self.format(second)
        cached.withLockedValue { $0 = (second, text) }
        return text
    }

    static func format(_ secondsSince1970: Int) -> String {
        var time = time_t(secondsSince1970)
        var parts = tm()
        gmtime_r(&time, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return
            "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(1900 + parts.tm_year) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}
