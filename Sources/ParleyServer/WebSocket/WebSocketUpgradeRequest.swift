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
package struct WebSocketUpgradeRequest: Equatable, Sendable {
    /// `Sec-WebSocket-Key`.
    package var key: String
    /// `Authorization`, when there is one.
    package var authorization: String?
    /// Bytes of the request head, through its empty line.
    package var headLength: Int

    package enum Parse: Equatable, Sendable {
        /// The head has not fully arrived and may still be an upgrade.
        case incomplete
        case webSocket(WebSocketUpgradeRequest)
        /// Anything else: NIO's pipeline takes the connection.
        case other
    }

    /// The longest head read before leaving the connection to NIO's pipeline.
    package static let maxHeadLength = 8192

    private static let requestLinePrefix = Array("GET \(WebSocketGateway.path)".utf8)
    private static let requestLineSuffix = Array(" HTTP/1.1".utf8)
    private static let headEnd: [UInt8] = [13, 10, 13, 10]

    /// Reads the start of a connection's bytes.
    package static func parse(_ bytes: UnsafeRawBufferPointer) -> Parse {
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

    /// The key and authorization of a head (without its final empty line) that is a plain upgrade, else nil. Reads the
    /// bytes where they are: only the key and the token become strings.
    private static func upgrade(inHead head: UnsafeRawBufferPointer) -> (key: String, authorization: String?)? {
        var upgrades = 0
        var connectionUpgrade = false
        var key: Slice<UnsafeRawBufferPointer>?
        var versions = 0
        var authorization: Slice<UnsafeRawBufferPointer>?
        var authorizations = 0
        var hosts = 0
        var start = 0
        var isRequestLine = true
        var index = 0
        while index <= head.count {
            let atEnd = index == head.count
            let byte = atEnd ? 13 : head[index]
            if byte == 10 || (byte < 0x20 && byte != 9 && byte != 13) || byte >= 0x7F { return nil }
            guard byte == 13 else {
                index += 1
                continue
            }
            if !atEnd { guard index + 1 < head.count, head[index + 1] == 10 else { return nil } }
            let line = head[start..<index]
            start = index + 2
            index += 2
            if isRequestLine {
                isRequestLine = false
                guard requestLine(line) else { return nil }
                continue
            }
            // A folded line (obsolete continuation), a header without a name or a colon, a name that is not a token
            // (RFC 9110 section 5.1: NIO's parser refuses it): not for the fast path.
            guard let first = line.first, first != 32, first != 9, let colon = line.firstIndex(of: UInt8(ascii: ":")),
                colon > line.startIndex, line[..<colon].allSatisfy(HTTPRequestHeadGuard.isTokenCharacter)
            else { return nil }
            let name = line[..<colon]
            let value = trimmed(line[(colon + 1)...])
            if matches(name, "upgrade") {
                guard matches(value, "websocket") else { return nil }
                upgrades += 1
            } else if matches(name, "connection") {
                if value.split(separator: UInt8(ascii: ",")).contains(where: { matches(trimmed($0), "upgrade") }) {
                    connectionUpgrade = true
                }
            } else if matches(name, "sec-websocket-key") {
                guard key == nil else { return nil }
                key = value
            } else if matches(name, "sec-websocket-version") {
                guard value.elementsEqual("13".utf8) else { return nil }
                versions += 1
            } else if matches(name, "host") {
                hosts += 1
            } else if matches(name, "authorization") {
                authorizations += 1
                authorization = value
            } else if matches(name, "content-length") {
                guard value.elementsEqual("0".utf8) else { return nil }
            } else if matches(name, "transfer-encoding") {
                return nil
            }
        }
        guard upgrades == 1, connectionUpgrade, let key, isValidKey(key), versions == 1, authorizations <= 1, hosts == 1
        else {
            return nil
        }
        return (String(decoding: key, as: UTF8.self), authorization.map { String(decoding: $0, as: UTF8.self) })
    }

    /// Whether a `Sec-WebSocket-Key` is, as RFC 6455 section 4.1 requires, the base64 of 16 bytes: 22 characters of the
    /// base64 alphabet, then `==`.
    package static func isValidKey(_ key: some Collection<UInt8>) -> Bool {
        guard key.count == 24 else { return false }
        var index = 0
        for byte in key {
            if index >= 22 {
                guard byte == UInt8(ascii: "=") else { return false }
            } else {
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "/"):
                    break
                default:
                    return false
                }
            }
            index += 1
        }
        return true
    }

    /// `GET <gateway path>[?query] HTTP/1.1`.
    private static func requestLine(_ line: Slice<UnsafeRawBufferPointer>) -> Bool {
        guard line.starts(with: requestLinePrefix), line.count >= requestLinePrefix.count + requestLineSuffix.count,
            line.suffix(requestLineSuffix.count).elementsEqual(requestLineSuffix)
        else { return false }
        let target = line.dropFirst(4).dropLast(requestLineSuffix.count)
        guard !target.contains(32) else { return false }
        // The path itself, or with a query after it.
        return target.count == requestLinePrefix.count - 4
            || target[target.startIndex + requestLinePrefix.count - 4] == UInt8(ascii: "?")
    }

    /// Whether `bytes` are `lowercase` (letters and `-`) in any case.
    private static func matches(_ bytes: Slice<UnsafeRawBufferPointer>, _ lowercase: StaticString) -> Bool {
        guard bytes.count == lowercase.utf8CodeUnitCount else { return false }
        let expected = UnsafeRawBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount)
        return zip(bytes, expected).allSatisfy { $0 | 0x20 == $1 }
    }

    private static func trimmed(_ bytes: Slice<UnsafeRawBufferPointer>) -> Slice<UnsafeRawBufferPointer> {
        var value = bytes
        while let first = value.first, first == 32 || first == 9 { value = value.dropFirst() }
        while let last = value.last, last == 32 || last == 9 { value = value.dropLast() }
        return value
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
