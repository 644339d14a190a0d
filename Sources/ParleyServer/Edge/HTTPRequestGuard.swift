import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import ParleyProtocol

/// What the connection edge enforces on every HTTP/1 request that reaches NIO's HTTP pipeline (REST, and upgrades that
/// ``WebSocketUpgradeSniffer`` leaves to NIO), in two handlers around NIO's decoder:
///
/// - ``HTTPRequestHeadGuard`` sits next to the socket and sees bytes: it starts the head deadline at the first byte of
///   each request (408) and bounds the request line (414);
/// - ``HTTPRequestGuard`` sits after the decoder and sees requests: it answers parser errors with the status RFC 9112
///   calls for (400, 431, 501, 505) instead of silence, refuses unsupported versions and methods, control characters
///   in the target, bodies larger than ``EdgeLimits/maxRequestBodyBytes`` (413, from the `Content-Length` before a byte
///   of the body is read, or as soon as chunks pass it), bodies that do not arrive within
///   ``EdgeLimits/requestBodyTimeout`` (408), and a WebSocket upgrade that is not a connection's first request (400).
///
/// Every refusal is the documented JSON error with `Connection: close`, and the connection closes after it. A
/// connection whose request is still being read closes at once when its peer half-closes or the server shuts down;
/// between requests, Hummingbird's `HTTPConnectionStateHandler` closes it after ``EdgeLimits/idleTimeout``.
package final class HTTPRequestGuard: ChannelDuplexHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPServerRequestPart
    package typealias InboundOut = HTTPServerRequestPart
    package typealias OutboundIn = HTTPServerResponsePart
    package typealias OutboundOut = HTTPServerResponsePart

    /// Methods the REST API may route; any other is 501.
    package static let methods: [HTTPMethod] = [.GET, .HEAD, .POST, .PUT, .DELETE, .PATCH, .OPTIONS]

    private let limits: EdgeLimits
    private let files: FileSettings
    private let head: HTTPRequestHeadGuard
    /// The body limit of the request being read: ``EdgeLimits/maxRequestBodyBytes``, or for an upload its
    /// `Content-Length` (at most ``FileSettings/maxFileBytes``).
    private var bodyLimit = 0
    /// Requests whose head has been read (the first is the one NIO's upgrader looks at).
    private var requests = 0
    /// A request's head has been read and its end has not.
    private var readingBody = false
    private var bodyBytes = 0
    /// Requests passed on whose response has not ended.
    private var inFlight = 0
    /// A response has started and not ended.
    private var responding = false
    /// A refusal that waits for the responses in flight to end (a pipelined request after them was refused): sent
    /// right after the last of them, so that every request gets its answer in order.
    private var pendingRefusal: [HTTPServerResponsePart]?
    /// The connection is refused and closing: nothing more is read or passed on.
    private var refused = false
    /// The request asked for the connection to close after its response (`Connection: close`, or HTTP/1.0 without
    /// `keep-alive`).
    private var closeAfterResponse = false

    package init(limits: EdgeLimits, files: FileSettings = FileSettings(), head: HTTPRequestHeadGuard) {
        self.limits = limits
        self.files = files
        self.head = head
    }

    /// The last response closes the connection: nothing more is answered on it (RFC 9112 section 9.6).
    private(set) var closing = false

    /// Whether requests passed on still wait for their response (a refusal then waits for them).
    var hasRequestsInFlight: Bool { inFlight > 0 }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        switch unwrapInboundIn(data) {
        case .head(let request):
            if let (status, code, message) = refusal(of: request) {
                refuse(context: context, status, code: code, message)
                return
            }
            if requests == 0, let refusal = WebSocketUpgradeValidation.refusal(of: request) {
                refuse(context: context, refusal.status, code: .badRequest, refusal.message, headers: refusal.headers)
                return
            }
            requests += 1
            inFlight += 1
            var served = request
            if request.headers.contains(name: "upgrade"),
                !request.headers["upgrade"].contains(where: { $0.lowercased().contains("websocket") })
            {
                // An upgrade to a protocol the server does not speak (h2c, ...) is ignored (RFC 9110 section 7.8): the
                // request is served as it is (NIO's upgrade handler would drop its head, and so the connection), then
                // the connection closes: NIO's decoder reads nothing after a request it took for an upgrade.
                served.headers.remove(name: "upgrade")
                closeAfterResponse = true
            }
            closeAfterResponse = closeAfterResponse || !request.isKeepAlive
            readingBody = true
            bodyBytes = 0
            let upload = FileRoutes.isUpload(method: request.method.rawValue, target: request.uri)
            let length = request.headers["content-length"].first.flatMap { Int($0) } ?? 0
            bodyLimit = upload ? length : limits.maxRequestBodyBytes
            if Self.hasBody(request) {
                // An upload may take longer: its length at the slowest rate the server accepts, on top.
                let allowance = upload ? TimeAmount.seconds(Int64(length / max(files.minimumTransferRate, 1))) : .zero
                let deadline = context.eventLoop.now + limits.requestBodyTimeout.timeAmount + allowance
                bodyDeadline = deadline
                head.arm(deadline)
            }
            if Self.expectsContinue(request) {
                // The head passed every check the edge makes: the client may send the body (RFC 9110 section 10.1.1)
                // without waiting (curl waits a second for this before an upload of more than 1 MiB).
                served.headers.remove(name: "expect")
                context.writeAndFlush(
                    wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: .continue))), promise: nil
                )
            }
            context.fireChannelRead(wrapInboundOut(.head(served)))
            return
        case .body(let chunk):
            bodyBytes += chunk.readableBytes
            guard bodyBytes <= bodyLimit else {
                refuse(context: context, .contentTooLarge, code: .requestTooLarge, Self.tooLarge(limits))
                return
            }
        case .end:
            readingBody = false
            bodyDeadline = nil
        }
        context.fireChannelRead(data)
    }

    /// Why a request is refused as soon as its head is read, if it is.
    private func refusal(of request: HTTPRequestHead) -> (HTTPResponse.Status, ErrorCode, String)? {
        guard request.version.major == 1, request.version.minor <= 1 else {
            return (
                .httpVersionNotSupported, .httpVersionNotSupported,
                "HTTP/\(request.version.major).\(request.version.minor) is not supported: send HTTP/1.1."
            )
        }
        let hosts = request.headers["host"].count
        guard hosts == 1 || (hosts == 0 && request.version.minor == 0) else {
            return (.badRequest, .badRequest, "A request has one Host header field (RFC 9112 section 3.2).")
        }
        guard Self.methods.contains(request.method) else {
            return (.notImplemented, .notImplemented, "The method \(request.method.rawValue) is not implemented.")
        }
        guard !Self.hasControlCharacter(inTarget: request.uri) else {
            return (.badRequest, .badRequest, "The request target contains a control character.")
        }
        if requests > 0, request.headers[canonicalForm: "upgrade"].contains(where: { $0.lowercased() == "websocket" }) {
            return (
                .badRequest, .badRequest,
                "A WebSocket upgrade must be the first request of its connection: open a new connection for it."
            )
        }
        if let refusal = Self.refusal(ofTransferEncoding: request) { return refusal }
        let lengths = request.headers["content-length"]
        if FileRoutes.isUpload(method: request.method.rawValue, target: request.uri) {
            // An upload says its size up front: refused before a byte of it is read when it is too large.
            guard request.headers["transfer-encoding"].isEmpty, let length = lengths.first.flatMap({ Int64($0) }) else {
                return (.lengthRequired, .lengthRequired, "An upload has a Content-Length (not chunked).")
            }
            guard length <= files.maxFileBytes else {
                return (.contentTooLarge, .fileTooLarge, "A file may have at most \(files.maxFileBytes) bytes.")
            }
            return nil
        }
        if let length = lengths.first.flatMap({ Int($0) }), length > limits.maxRequestBodyBytes {
            return (.contentTooLarge, .requestTooLarge, Self.tooLarge(limits))
        }
        return nil
    }

    /// `Transfer-Encoding` as RFC 9112 section 6.1 has it: only in HTTP/1.1 (400), `chunked` is the one coding the
    /// server implements (501 for any other), and it comes last, once (400).
    private static func refusal(
        ofTransferEncoding request: HTTPRequestHead
    ) -> (HTTPResponse.Status, ErrorCode, String)? {
        let fields = request.headers["transfer-encoding"]
        guard !fields.isEmpty else { return nil }
        guard request.version.minor == 1 else {
            return (.badRequest, .badRequest, "Transfer-Encoding is not allowed in an HTTP/1.0 request.")
        }
        let codings = fields.flatMap { $0.split(separator: ",") }.map {
            $0.trimmingCharacters(in: .whitespaces).lowercased()
        }
        if let unknown = codings.first(where: { $0 != "chunked" }) {
            return (
                .notImplemented, .notImplemented,
                "The transfer coding \(unknown.prefix(64)) is not implemented: send the body with Content-Length or chunked."
            )
        }
        guard codings.count == 1 else {
            return (.badRequest, .badRequest, "A request body is chunked once: Transfer-Encoding: chunked.")
        }
        return nil
    }

    private static func tooLarge(_ limits: EdgeLimits) -> String {
        "A request body may have at most \(limits.maxRequestBodyBytes) bytes."
    }

    /// Whether an HTTP/1.1 request with a body waits for `100 Continue` before sending it.
    private static func expectsContinue(_ request: HTTPRequestHead) -> Bool {
        request.version == .http1_1 && hasBody(request)
            && request.headers["expect"].contains {
                $0.trimmingCharacters(in: .whitespaces).lowercased() == "100-continue"
            }
    }

    /// Whether a request announces a body (`Content-Length` above 0, or `Transfer-Encoding`).
    private static func hasBody(_ request: HTTPRequestHead) -> Bool {
        if request.headers.contains(name: "transfer-encoding") { return true }
        return request.headers["content-length"].first.flatMap { Int($0) }.map { $0 > 0 } ?? false
    }

    /// Whether a request target has a control character in it, percent-encoded (`%00`-`%1F`, `%7F`, and C1 as UTF-8,
    /// `%C2%80`-`%C2%9F`): such a character would reach an identifier once the path is decoded. Raw control bytes never
    /// get here (the decoder refuses them).
    static func hasControlCharacter(inTarget target: String) -> Bool {
        let bytes = Array(target.utf8)
        func decoded(at index: Int) -> UInt8? {
            guard index + 2 < bytes.count, bytes[index] == UInt8(ascii: "%"), let high = hexValue(bytes[index + 1]),
                let low = hexValue(bytes[index + 2])
            else { return nil }
            return high << 4 | low
        }
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte < 0x20 || byte == 0x7F { return true }
            if byte == 0xC2, index + 1 < bytes.count, (0x80...0x9F).contains(bytes[index + 1]) { return true }
            if let value = decoded(at: index) {
                if value < 0x20 || value == 0x7F { return true }
                if value == 0xC2, let next = decoded(at: index + 3), (0x80...0x9F).contains(next) { return true }
                index += 3
            } else {
                index += 1
            }
        }
        return false
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// When the body being read must have arrived.
    private(set) var bodyDeadline: NIODeadline?

    /// The body did not arrive by its deadline (the head guard's watchdog tells).
    func bodyTimedOut() {
        guard let context, !refused, readingBody else { return }
        refuse(context: context, .requestTimeout, code: .requestTimeout, "The request body did not arrive in time.")
    }

    // MARK: Refusing

    /// Answers with an error (unless a response is being written) and closes.
    private func refuse(
        context: ChannelHandlerContext, _ status: HTTPResponse.Status, code: ErrorCode, _ message: String,
        headers: [(String, String)] = []
    ) {
        refuse(channel: context.channel, status, code: code, message, context: context, headers: headers)
    }

    private func refuse(
        channel: any Channel, _ status: HTTPResponse.Status, code: ErrorCode, _ message: String,
        context: ChannelHandlerContext? = nil, headers: [(String, String)] = []
    ) {
        guard !refused else { return }
        refused = true
        head.refused()
        // Nothing is answered after a response that closes the connection (RFC 9112 section 9.6).
        guard !closing else { return }
        let parts = EdgeResponse.parts(status, code: code, message, headers: headers)
        // The request being read is in flight too; only the requests before it wait for an answer first.
        if inFlight - (readingBody ? 1 : 0) > 0 || responding {
            pendingRefusal = parts
            return
        }
        guard let context = context ?? self.context else {
            channel.close(promise: nil)
            return
        }
        write(parts, context: context)
    }

    /// Writes a refusal's parts and closes once they are written.
    private func write(_ parts: [HTTPServerResponsePart], context: ChannelHandlerContext) {
        let channel = context.channel
        for part in parts.dropLast() { context.write(wrapOutboundOut(part), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(parts.last!)).whenComplete { _ in EdgeResponse.closeAfterAnswer(channel) }
    }

    /// Refuses the connection for the head guard (a refusal of the bytes of a request that follows one in flight).
    func refuseForHeadGuard(_ status: HTTPResponse.Status, code: ErrorCode, _ message: String) {
        guard let context else { return }
        refuse(context: context, status, code: code, message)
    }

    private var context: ChannelHandlerContext?

    package func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parserError = error as? HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        let (status, code, message) = Self.answer(to: parserError)
        refuse(context: context, status, code: code, message)
    }

    /// The answer to a request the decoder could not parse.
    static func answer(to error: HTTPParserError) -> (HTTPResponse.Status, ErrorCode, String) {
        switch error {
        case .headerOverflow:
            return (
                .requestHeaderFieldsTooLarge, .headersTooLarge, "The request's header fields are too large or too many."
            )
        case .invalidVersion:
            return (.httpVersionNotSupported, .httpVersionNotSupported, "Only HTTP/1.0 and HTTP/1.1 are supported.")
        case .unexpectedContentLength, .invalidContentLength:
            return (
                .badRequest, .badRequest,
                "The request's Content-Length is invalid, repeated, or sent with Transfer-Encoding."
            )
        default:
            return (.badRequest, .badRequest, "The request is not valid HTTP/1.1 (\(error)).")
        }
    }

    package func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case ChannelEvent.inputClosed where readingBody || head.isReadingHead,
            is ChannelShouldQuiesceEvent where readingBody || head.isReadingHead:
            // A request that can no longer arrive whole (the peer half-closed), or that would hold up a shutdown.
            refused = true
            context.close(promise: nil)
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var response) where response.status.code >= 200:
            responding = true
            if closeAfterResponse, inFlight == 1, !response.headers.contains(name: "connection") {
                // The client learns that the connection closes after this response.
                response.headers.add(name: "Connection", value: "close")
                context.write(wrapOutboundOut(.head(response)), promise: promise)
                return
            }
        case .end:
            responding = false
            inFlight = max(0, inFlight - 1)
            // After a response that closes the connection nothing more is answered (RFC 9112 section 9.6): a
            // refusal of what came after it is dropped, as the bytes would have been had they come later.
            if inFlight == 0, let refusal = pendingRefusal, !closeAfterResponse {
                pendingRefusal = nil
                context.write(data, promise: promise)
                write(refusal, context: context)
                return
            }
            if closeAfterResponse, inFlight == 0 {
                closing = true
                let written = promise ?? context.eventLoop.makePromise()
                let channel = context.channel
                written.futureResult.whenComplete { _ in channel.close(promise: nil) }
                context.write(data, promise: written)
                return
            }
        case .head, .body:
            break
        }
        context.write(data, promise: promise)
    }
}
