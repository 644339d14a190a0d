import Foundation
import NIOCore
import NIOEmbedded
import NIOHTTP1
import ParleyServer

extension FuzzTarget {
    /// A connection's HTTP/1 requests through the edge: `HTTPRequestHeadGuard` on the bytes, NIO's decoder, and
    /// `HTTPRequestGuard` on the requests (with small limits, so that inputs reach them), then a handler that answers
    /// every request with 204. The input goes in at once and again cut into pieces (its first byte sets their size):
    /// both ways must pass on the same requests and write the same bytes back, and every request passed on keeps
    /// the limits (a method the API has, one Host, a body within its limit).
    static let httpRequest = FuzzTarget(
        name: "http-request",
        summary: "HTTPRequestHeadGuard + decoder + HTTPRequestGuard: the same answers however the bytes are cut",
        largestPiece: 32
    ) { pieces throws(FuzzFinding) in
        try HTTPRequestCase.run(pieces)
    }
}

enum HTTPRequestCase {
    static let limits: EdgeLimits = {
        var limits = EdgeLimits()
        limits.maxRequestBodyBytes = 256
        limits.maxRequestLineBytes = 256
        limits.maxHeaderFieldBytes = 256
        limits.maxHeaderBytes = 1024
        limits.maxHeaderCount = 16
        return limits
    }()

    static let files: FileSettings = {
        var files = FileSettings()
        files.maxFileBytes = 1024
        return files
    }()

    struct Outcome: Equatable, CustomStringConvertible {
        /// Each request passed on: its method, target and body.
        var requests: [String] = []
        /// Everything written back.
        var written: [UInt8] = []
        var closed = false

        var description: String {
            "requests \(requests), wrote \(String(decoding: written, as: UTF8.self).debugDescription), closed \(closed)"
        }
    }

    /// Stands for the REST router: answers each request with 204 once it has ended; checks what it is given.
    final class Responder: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        var requests: [String] = []
        var head: HTTPRequestHead?
        var body: [UInt8] = []
        var finding: String?

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let request):
                if head != nil { finding = finding ?? "a head before the last request ended" }
                if !HTTPRequestGuard.methods.contains(request.method) {
                    finding = finding ?? "method \(request.method) was passed on"
                }
                if request.version.minor == 1, request.headers["host"].count != 1 {
                    finding = finding ?? "an HTTP/1.1 request without exactly one Host was passed on"
                }
                if request.version.major != 1 || request.version.minor > 1 {
                    finding = finding ?? "HTTP/\(request.version.major).\(request.version.minor) was passed on"
                }
                head = request
                body = []
            case .body(let chunk):
                guard head != nil else {
                    finding = finding ?? "a body without a head"
                    return
                }
                body += chunk.readableBytesView
            case .end:
                guard let request = head else {
                    finding = finding ?? "an end without a head"
                    return
                }
                // An upload (`POST /v1/conversations/{id}/attachments`) may be as large as a file.
                let path = request.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
                let segments = path.split(separator: "/", omittingEmptySubsequences: false)
                let upload =
                    request.method == .POST && segments.count == 5 && segments[1] == "v1"
                    && segments[2] == "conversations" && segments[4] == "attachments"
                let limit =
                    upload ? Int(HTTPRequestCase.files.maxFileBytes) : HTTPRequestCase.limits.maxRequestBodyBytes
                if body.count > limit { finding = finding ?? "a body of \(body.count) bytes was passed on" }
                requests.append("\(request.method) \(request.uri) \(body.count) bytes")
                head = nil
                var headers = HTTPHeaders()
                headers.add(name: "content-length", value: "0")
                context.write(
                    wrapOutboundOut(
                        .head(HTTPResponseHead(version: request.version, status: .noContent, headers: headers))),
                    promise: nil
                )
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            // The guard answers the decoder's errors itself; what reaches here is not the edge's to answer.
        }
    }

    /// The responses written, each JSON body with its keys sorted (Foundation's encoder orders them as it likes).
    static func canonical(_ written: [UInt8]) -> [UInt8] {
        var result: [UInt8] = []
        var rest = written[...]
        let headEnd: [UInt8] = Array("\r\n\r\n".utf8)
        while let end = rest.firstRange(of: headEnd) {
            let head = String(decoding: rest[..<end.upperBound], as: UTF8.self)
            result += rest[..<end.upperBound]
            rest = rest[end.upperBound...]
            let length =
                head.split(separator: "\r\n").lazy.compactMap { line -> Int? in
                    let parts = line.split(separator: ":", maxSplits: 1)
                    guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
                    return Int(parts[1].trimmingCharacters(in: .whitespaces))
                }.first ?? 0
            let body = rest.prefix(length)
            rest = rest.dropFirst(length)
            if let object = try? JSONSerialization.jsonObject(with: Data(body)),
                let sorted = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
            {
                result += sorted
            } else {
                result += body
            }
        }
        return result + rest
    }

    static func run(_ pieces: [UnsafeRawBufferPointer]) throws(FuzzFinding) -> Outcome {
        let channel = EmbeddedChannel()
        let responder = Responder()
        do {
            let headGuard = HTTPRequestHeadGuard(limits: limits, admitted: { _ in })
            let requestGuard = HTTPRequestGuard(limits: limits, files: files, head: headGuard)
            headGuard.attach(requestGuard)
            var decoderLimits = NIOHTTPDecoderLimitConfiguration()
            decoderLimits.maxHeaderFieldSize = limits.maxHeaderFieldBytes
            decoderLimits.maxHeaderListSize = limits.maxHeaderBytes
            decoderLimits.maxHeaderFieldCount = limits.maxHeaderCount
            try channel.pipeline.syncOperations.addHandlers([
                headGuard, HTTPResponseEncoder(),
                ByteToMessageHandler(
                    HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes, limitConfiguration: decoderLimits)),
                requestGuard, responder,
            ])
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        } catch {
            throw FuzzFinding("the pipeline could not be set up: \(error)")
        }
        var outcome = Outcome()
        for piece in pieces {
            guard channel.isActive else { break }
            let buffer = channel.allocator.buffer(bytes: piece)
            do {
                try channel.writeInbound(buffer)
            } catch {
                throw FuzzFinding("an error reached the end of the pipeline: \(error)")
            }
            channel.embeddedEventLoop.run()
        }
        var written: [UInt8] = []
        while let buffer = try? channel.readOutbound(as: ByteBuffer.self) {
            written += buffer.readableBytesView
        }
        outcome.written = canonical(written)
        outcome.closed = !channel.isActive
        outcome.requests = responder.requests
        _ = try? channel.finish(acceptAlreadyClosed: true)
        if let finding = responder.finding { throw FuzzFinding(finding) }
        return outcome
    }
}
