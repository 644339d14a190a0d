import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import ParleyProtocol

/// The byte side of ``HTTPRequestGuard``: follows each request through the byte stream (``HTTPRequestFraming``, so
/// that requests pipelined in one read or split across reads are each seen), starts each head's deadline at its first
/// byte, and checks every request line (RFC 9112 section 3) before the decoder does: at most
/// ``EdgeLimits/maxRequestLineBytes`` (414), lines ended by CRLF, `method SP target SP HTTP/x.y` (400), a method the
/// server implements (501), HTTP/1.0 or 1.1 (505, also for an HTTP/0.9 request line); chunk-size lines and trailers are
/// bounded (400, 431). Tells the admission gate when a connection's head is incomplete with everything read (the
/// connection waits on its peer).
package final class HTTPRequestHeadGuard: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = ByteBuffer
    package typealias InboundOut = ByteBuffer
    package typealias OutboundOut = ByteBuffer

    private let limits: EdgeLimits
    private let admitted: (any Channel) -> Void
    private var framing: HTTPRequestFraming
    /// Refused: closing; nothing more is passed on.
    private var isRefused = false
    /// When the head being read must be complete.
    private var headDeadline: NIODeadline?
    /// When the watchdog timer fires, if it is armed.
    private var watchdogAt: NIODeadline?
    /// Counts the watchdog's timers: one that was replaced by an earlier one does nothing.
    private var watchdogGeneration: UInt64 = 0
    private weak var requestGuard: HTTPRequestGuard?
    /// The start of a request line that has not ended: held back from NIO's decoder until it has, so that the line is
    /// judged here whole however its bytes were cut (NIO's parser refuses the first bytes of a method it does not know
    /// with 400, where the whole line gets 501). At most ``EdgeLimits/maxRequestLineBytes``: a longer line is refused.
    private var heldLine: ByteBuffer?
    private var context: ChannelHandlerContext?

    /// - Parameter admitted: Tells the admission gate that the connection no longer counts as being set up.
    package init(limits: EdgeLimits, admitted: @escaping (any Channel) -> Void) {
        self.limits = limits
        self.admitted = admitted
        self.framing = HTTPRequestFraming(
            maxRequestLineBytes: limits.maxRequestLineBytes, maxTrailerBytes: limits.maxHeaderBytes,
            maxHeaderFieldBytes: limits.maxHeaderFieldBytes, maxHeaderBytes: limits.maxHeaderBytes,
            maxHeaderCount: limits.maxHeaderCount
        )
    }

    package func attach(_ requestGuard: HTTPRequestGuard) {
        self.requestGuard = requestGuard
    }

    /// A request's head is being read.
    var isReadingHead: Bool { !isRefused && framing.isReadingHead }

    package func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !isRefused else { return }
        let bytes = unwrapInboundIn(data)
        // Where the request being read started in this read (0 for one that started in an earlier read).
        var requestStart = 0
        var startedHere = false
        var refusal: (HTTPResponse.Status, ErrorCode, String)?
        // With a refusal: how many bytes of this read go to the decoder first (nil: those before the refused line).
        var passedBeforeRefusal: Int?
        bytes.withUnsafeReadableBytes { buffer in
            var index = 0
            while refusal == nil {
                let inRequestLine = framing.state == .requestLine
                guard let event = framing.next(buffer, &index) else { break }
                switch event {
                case .requestStarted:
                    requestStart = index
                    startedHere = true
                    let deadline = context.eventLoop.now + limits.requestHeadTimeout.timeAmount
                    headDeadline = deadline
                    arm(deadline)
                case .requestLine(let line):
                    refusal = Self.refusal(ofRequestLine: line)
                case .headEnded, .requestEnded:
                    headDeadline = nil
                case .refused(let reason):
                    refusal = answer(to: reason)
                    // Past its request line, everything before the byte refused goes to the decoder first, as it
                    // would have had the byte come in a later read: the answer does not depend on how bytes are cut.
                    if !inRequestLine { passedBeforeRefusal = index - 1 }
                }
            }
        }
        // The bytes of this read after those held back from the last one.
        var stream = bytes
        var held = 0
        if var line = heldLine.take() {
            held = line.readableBytes
            line.writeBuffer(&stream)
            stream = line
        }
        guard let (status, code, message) = refusal else {
            if framing.state == .requestLine {
                // The line goes on in the next read: NIO's decoder gets it whole, after it was checked here.
                let start = startedHere ? held + requestStart : 0
                heldLine = stream.getSlice(at: stream.readerIndex + start, length: stream.readableBytes - start)
                stream = stream.getSlice(at: stream.readerIndex, length: start)!
            }
            if stream.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(stream)) }
            return
        }
        // The requests before the refused one are answered first (in order), then the refusal; a request line is
        // never passed on before it was checked whole.
        let passed = passedBeforeRefusal.map { held + $0 } ?? (startedHere ? held + requestStart : 0)
        if passed > 0 {
            context.fireChannelRead(wrapInboundOut(stream.getSlice(at: stream.readerIndex, length: passed)!))
        }
        // What the decoder made of them may have refused the connection already (its answer stands).
        refuse(channel: context.channel, status, code: code, message)
    }

    package func channelReadComplete(context: ChannelHandlerContext) {
        if isReadingHead { admitted(context.channel) }
        context.fireChannelReadComplete()
    }

    private func answer(to refusal: HTTPRequestFraming.Refusal) -> (HTTPResponse.Status, ErrorCode, String) {
        switch refusal {
        case .requestLineTooLong:
            (.uriTooLong, .uriTooLong, "The request line may have at most \(limits.maxRequestLineBytes) bytes.")
        case .bareLineEnding:
            (.badRequest, .badRequest, "Lines of a request end with CRLF (no bare CR or LF).")
        case .chunkLineTooLong:
            (
                .badRequest, .badRequest,
                "A chunk-size line may have at most \(HTTPRequestFraming.maxChunkLineBytes) bytes."
            )
        case .trailersTooLarge:
            (.requestHeaderFieldsTooLarge, .headersTooLarge, "The request's trailer fields are too large.")
        case .headersTooLarge:
            (
                .requestHeaderFieldsTooLarge, .headersTooLarge,
                "The request's header fields are too large or too many."
            )
        }
    }

    // MARK: The deadlines' watchdog

    /// Arms the connection's one watchdog timer for `deadline`, unless it fires earlier already. The timer is never
    /// cancelled (see WebSocketConnectionHandler): when it fires it checks the deadlines as they are then, and arms
    /// itself again for the next one. So a keep-alive connection's requests (a head deadline each, and a body deadline
    /// for those with a body) cost a timer every few seconds, not two per request.
    func arm(_ deadline: NIODeadline) {
        guard let context else { return }
        if let armed = watchdogAt, armed <= deadline { return }
        watchdogAt = deadline
        watchdogGeneration += 1
        let generation = watchdogGeneration
        context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [weak self] in
            guard let self, generation == watchdogGeneration else { return }
            watchdogAt = nil
            checkDeadlines()
        }
    }

    private func checkDeadlines() {
        guard let context else { return }
        let now = context.eventLoop.now
        if isReadingHead, let headDeadline, now >= headDeadline {
            refuse(
                channel: context.channel, .requestTimeout, code: .requestTimeout,
                "The request head did not arrive in time."
            )
            return
        }
        if let bodyDeadline = requestGuard?.bodyDeadline, now >= bodyDeadline {
            requestGuard?.bodyTimedOut()
            return
        }
        let pending = [isReadingHead ? headDeadline : nil, requestGuard?.bodyDeadline].compactMap { $0 }
        if let next = pending.min() { arm(next) }
    }

    /// Why a request line (without its CRLF) is refused, if it is.
    static func refusal(ofRequestLine line: [UInt8]) -> (HTTPResponse.Status, ErrorCode, String)? {
        let fields = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard let method = fields.first, !method.isEmpty, method.allSatisfy(isTokenCharacter) else {
            return (.badRequest, .badRequest, "The request line does not start with a method.")
        }
        guard fields.count == 3 || fields.count == 2, !fields[1].isEmpty else {
            return (.badRequest, .badRequest, "A request line is: method, one space, target, one space, version.")
        }
        guard fields.count == 3 else {
            return (.httpVersionNotSupported, .httpVersionNotSupported, "HTTP/0.9 is not supported: send HTTP/1.1.")
        }
        let version = fields[2]
        guard version.count == 8, version.starts(with: "HTTP/".utf8),
            version[version.startIndex + 6] == UInt8(ascii: "."),
            isDigit(version[version.startIndex + 5]), isDigit(version[version.startIndex + 7])
        else {
            return (.badRequest, .badRequest, "The request line's version is not HTTP/x.y.")
        }
        guard version.elementsEqual("HTTP/1.1".utf8) || version.elementsEqual("HTTP/1.0".utf8) else {
            return (
                .httpVersionNotSupported, .httpVersionNotSupported,
                "\(String(decoding: version, as: UTF8.self)) is not supported: send HTTP/1.1."
            )
        }
        let name = String(decoding: method, as: UTF8.self)
        guard HTTPRequestGuard.methods.contains(where: { $0.rawValue == name }) else {
            return (.notImplemented, .notImplemented, "The method \(name) is not implemented.")
        }
        return nil
    }

    /// `tchar` of RFC 9110 section 5.6.2: what methods and header field names are made of.
    static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"),
            UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"),
            UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    /// Answers with an error written straight to the socket (unless a response is being written) and closes.
    private func refuse(channel: any Channel, _ status: HTTPResponse.Status, code: ErrorCode, _ message: String) {
        if isRefused { return }
        isRefused = true
        if let requestGuard, requestGuard.closing {
            // A response that closes the connection was the last thing to say on it.
            return
        } else if let requestGuard, requestGuard.hasRequestsInFlight {
            // Its answer goes after theirs.
            requestGuard.refuseForHeadGuard(status, code: code, message)
        } else if let context {
            context.writeAndFlush(wrapOutboundOut(EdgeResponse.bytes(status, code: code, message)))
                .whenComplete { _ in EdgeResponse.closeAfterAnswer(channel) }
        } else {
            channel.close(promise: nil)
        }
    }

    /// The request guard refused the connection.
    func refused() {
        isRefused = true
    }
}
