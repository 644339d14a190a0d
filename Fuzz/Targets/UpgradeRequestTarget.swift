import Foundation
import NIOCore
import NIOEmbedded
import NIOHTTP1
import ParleyServer

extension FuzzTarget {
    /// The parser of a connection's first bytes (`WebSocketUpgradeRequest`, which answers plain upgrades to `/v1/ws`
    /// without NIO's HTTP pipeline). It must decide the same on every prefix as it will on the whole (undecided until
    /// the head's end, then the same request), and what it takes for an upgrade must be one for NIO's HTTP decoder
    /// too: a `GET` with the same key, the same `Authorization`, `Upgrade: websocket` and version 13 (values without the
    /// whitespace around them, which RFC 9110 says is not part of a value and NIO keeps at the end).
    static let upgradeRequest = FuzzTarget(
        name: "upgrade-request",
        summary: "WebSocketUpgradeRequest.parse: consistent on every prefix, a subset of what NIO's decoder reads"
    ) { bytes throws(FuzzFinding) in
        let whole = WebSocketUpgradeRequest.parse(bytes)
        // Every prefix of a short input; about 512 of a long one (the parse is linear, the loop would not be).
        for length in stride(from: 0, to: bytes.count, by: max(1, bytes.count / 512)) {
            let prefix = WebSocketUpgradeRequest.parse(UnsafeRawBufferPointer(rebasing: bytes[..<length]))
            switch (prefix, whole) {
            case (.incomplete, _), (.other, .other):
                continue
            case (.webSocket(let early), .webSocket(let request)) where early == request:
                continue
            default:
                throw FuzzFinding("the first \(length) bytes read as \(prefix), all \(bytes.count) as \(whole)")
            }
        }
        guard case .webSocket(let request) = whole else { return }
        let head = try UpgradeRequestCase.nioHead(UnsafeRawBufferPointer(rebasing: bytes[..<request.headLength]))
        // A field's value without the spaces and tabs around it (RFC 9110 section 5.5): NIO keeps trailing ones.
        func values(_ name: String) -> [String] {
            head.headers[name].map { $0.trimmingCharacters(in: CharacterSet(charactersIn: " \t")) }
        }
        guard head.method == .GET, head.version == .http1_1, values("sec-websocket-key") == [request.key],
            values("authorization") == (request.authorization.map { [$0] } ?? []),
            values("sec-websocket-version") == ["13"], values("upgrade").map({ $0.lowercased() }) == ["websocket"]
        else {
            throw FuzzFinding("parsed as \(request), NIO reads \(head)")
        }
    }
}

enum UpgradeRequestCase {
    /// The head as NIO's HTTP decoder reads it.
    static func nioHead(_ bytes: UnsafeRawBufferPointer) throws(FuzzFinding) -> HTTPRequestHead {
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        do {
            try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(HTTPRequestDecoder()))
            var buffer = channel.allocator.buffer(capacity: bytes.count)
            buffer.writeBytes(bytes)
            try channel.writeInbound(buffer)
            guard case .head(let head) = try channel.readInbound(as: HTTPServerRequestPart.self) else {
                throw FuzzFinding("NIO's decoder read no head from \(String(decoding: bytes, as: UTF8.self))")
            }
            return head
        } catch let finding as FuzzFinding {
            throw finding
        } catch {
            throw FuzzFinding("NIO's decoder refused what was parsed as an upgrade: \(error)")
        }
    }
}
