import Crypto
import Foundation
import NIOCore

/// The first request of a connection, read just far enough to tell whether it is a plain WebSocket upgrade to
/// ``WebSocketGateway/path`` that the server answers itself (``WebSocketUpgradeSniffer``).
///
/// It recognises a strict subset of what NIO's HTTP pipeline and WebSocket upgrader accept: `GET <path>[?query]
/// HTTP/1.1` with the gateway's path; exactly one `Upgrade: websocket`, one `Sec-WebSocket-Key`, one
/// `Sec-WebSocket-Version: 13` and at most one `Authorization`; a `Connection` header that names `upgrade`; no body
/// (`Transfer-Encoding`, or a `Content-Length` other than 0); no folded header line, no control or non-ASCII byte in
/// the head. Everything else is ``Parse/other`` and goes to NIO's pipeline, which answers it exactly as before (a
/// REST request, an upgrade to another path with 400, an unsupported version by closing...). The response is the
/// bytes NIO's upgrader writes.
struct WebSocketUpgradeRequest: Equatable, Sendable {
    /// `Sec-WebSocket-Key`.
    var key: String
    /// `Authorization`, when there is one.
    var authorization: String?
    /// Bytes of the request head, through its empty line.
    var headLength: Int

    enum Parse: Equatable, Sendable {
        /// The head has not fully arrived and may still be an upgrade.
        case incomplete
        case webSocket(WebSocketUpgradeRequest)
        /// Anything else: NIO's pipeline takes the connection.
        case other
    }

    /// The longest head read before leaving the connection to NIO's pipeline.
    static let maxHeadLength = 8192

    private static let requestLinePrefix = Array("GET \(WebSocketGateway.path)".utf8)
    private static let requestLineSuffix = Array(" HTTP/1.1".utf8)
    private static let headEnd: [UInt8] = [13, 10, 13, 10]

    /// Reads the start of a connection's bytes.
    static func parse(_ bytes: UnsafeRawBufferPointer) -> Parse {
        // Decided as early as possible: a connection that is not one goes to the HTTP pipeline at once.
        let prefix = min(bytes.count, requestLinePrefix.count + 1)
        for index in 0..<prefix {
            let expected = index < requestLinePrefix.count ? requestLinePrefix[index] : nil
            if let expected, bytes[index] != expected { return .other }
            if expected == nil, bytes[index] != UInt8(ascii: " "), bytes[index] != UInt8(ascii: "?") { return .other }
        }
        guard let end = firstHeadEnd(bytes) else {
            return bytes.count >= maxHeadLength ? .other : .incomplete
        }
        let head = UnsafeRawBufferPointer(rebasing: bytes[..<end])
        guard let request = upgrade(inHead: head) else { return .other }
        return .webSocket(
            WebSocketUpgradeRequest(key: request.key, authorization: request.authorization, headLength: end + 4))
    }

    /// The index of the empty line's `\r\n\r\n`, within ``maxHeadLength``.
    private static func firstHeadEnd(_ bytes: UnsafeRawBufferPointer) -> Int? {
        let limit = min(bytes.count, maxHeadLength)
        guard limit >= 4 else { return nil }
        var index = 0
        while index <= limit - 4 {
            if bytes[index] == 13, bytes[index + 1] == 10, bytes[index + 2] == 13, bytes[index + 3] == 10 {
                return index
            }
            index += 1
        }
        return nil
    }

    /// The key and authorization of a head (without its final empty line) that is a plain upgrade, else nil.
    private static func upgrade(inHead head: UnsafeRawBufferPointer) -> (key: String, authorization: String?)? {
        var lines: [UnsafeRawBufferPointer] = []
        var start = 0
        for index in 0..<head.count {
            let byte = head[index]
            if byte == 13 {
                guard index + 1 < head.count, head[index + 1] == 10 else { return nil }
                lines.append(UnsafeRawBufferPointer(rebasing: head[start..<index]))
                start = index + 2
            } else if byte == 10 {
                if index == 0 || head[index - 1] != 13 { return nil }  // a bare line feed
            } else if (byte < 0x20 && byte != 9) || byte >= 0x7F {
                return nil
            }
        }
        lines.append(UnsafeRawBufferPointer(rebasing: head[start...]))
        guard let requestLine = lines.first, requestLine.starts(with: requestLinePrefix),
            requestLine.count >= requestLinePrefix.count + requestLineSuffix.count,
            requestLine.suffix(requestLineSuffix.count).elementsEqual(requestLineSuffix)
        else { return nil }
        let target = String(decoding: requestLine.dropFirst(4).dropLast(requestLineSuffix.count), as: UTF8.self)
        guard !target.contains(" "), WebSocketGateway.accepts(uri: target) else { return nil }

        var upgrades = 0
        var connectionUpgrade = false
        var keys: [String] = []
        var versions: [String] = []
        var authorizations: [String] = []
        for line in lines.dropFirst() {
            // A folded line (obsolete continuation), a header without a name or a colon: not for the fast path.
            guard let first = line.first, first != 32, first != 9, let colon = line.firstIndex(of: UInt8(ascii: ":")),
                colon > 0, !line[..<colon].contains(32), !line[..<colon].contains(9)
            else { return nil }
            let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
            let value = trimmed(line[(colon + 1)...])
            switch name {
            case "upgrade":
                guard value.lowercased() == "websocket" else { return nil }
                upgrades += 1
            case "connection":
                if value.split(separator: ",").contains(where: { trimmed($0).lowercased() == "upgrade" }) {
                    connectionUpgrade = true
                }
            case "sec-websocket-key": keys.append(value)
            case "sec-websocket-version": versions.append(value)
            case "authorization": authorizations.append(value)
            case "content-length": guard value == "0" else { return nil }
            case "transfer-encoding": return nil
            default: break
            }
        }
        guard upgrades == 1, connectionUpgrade, keys.count == 1, !keys[0].isEmpty, versions == ["13"],
            authorizations.count <= 1
        else { return nil }
        return (keys[0], authorizations.first)
    }

    private static func trimmed(_ bytes: Slice<UnsafeRawBufferPointer>) -> String {
        var value = bytes[...]
        while let first = value.first, first == 32 || first == 9 { value = value.dropFirst() }
        while let last = value.last, last == 32 || last == 9 { value = value.dropLast() }
        return String(decoding: value, as: UTF8.self)
    }

    private static func trimmed(_ text: Substring) -> String {
        String(text.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }

    /// The GUID of RFC 6455 section 1.3, hashed with the client's key into `Sec-WebSocket-Accept`.
    static let acceptGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// `Sec-WebSocket-Accept` for a key: base64 of the SHA-1 of the key and the GUID.
    static func acceptValue(forKey key: String) -> String {
        Data(Insecure.SHA1.hash(data: Data((key + acceptGUID).utf8))).base64EncodedString()
    }

    /// The `101 Switching Protocols` response, byte for byte the one NIO's upgrader writes.
    func response(allocator: ByteBufferAllocator) -> ByteBuffer {
        allocator.buffer(
            string: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: "
                + Self.acceptValue(forKey: key) + "\r\nConnection: upgrade\r\n\r\n"
        )
    }
}
