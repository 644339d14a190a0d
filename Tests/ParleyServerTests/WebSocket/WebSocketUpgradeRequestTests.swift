import NIOCore
import Testing

@testable import ParleyServer

/// The heads the server upgrades itself (``WebSocketUpgradeRequest``): plain upgrades to `/v1/ws`, read as they
/// arrive; anything unusual goes to NIO's pipeline (`.other`), which answers it as it always did.
@Suite struct WebSocketUpgradeRequestTests {
    static let plain =
        "GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        + "Authorization: Bearer tok_1\r\n\r\n"

    static func parse(_ text: String) -> WebSocketUpgradeRequest.Parse {
        Array(text.utf8).withUnsafeBytes { WebSocketUpgradeRequest.parse($0) }
    }

    @Test func aPlainUpgradeIsRecognisedWithItsKeyTokenAndLength() {
        let request = WebSocketUpgradeRequest(
            key: "dGhlIHNhbXBsZSBub25jZQ==", authorization: "Bearer tok_1", headLength: Self.plain.utf8.count
        )
        #expect(Self.parse(Self.plain) == .webSocket(request))
        // What follows the head (a client that sends its connect frame at once) is not part of it.
        #expect(Self.parse(Self.plain + "\u{81}\u{80}") == .webSocket(request))
    }

    @Test func everyPrefixOfAPlainUpgradeWaitsForMore() {
        let bytes = Array(Self.plain.utf8)
        for length in 0..<bytes.count {
            let parse = bytes[..<length].withUnsafeBytes { WebSocketUpgradeRequest.parse($0) }
            #expect(parse == .incomplete, "\(length) bytes")
        }
    }

    @Test(arguments: [
        // Header names in any case, blanks around values, a query, other Connection tokens, no token, Content-Length 0.
        "GET /v1/ws?x=1 HTTP/1.1\r\nhost: a\r\nUPGRADE:WebSocket\r\nconnection: keep-alive, upgrade\r\n"
            + "sec-websocket-key:  cGFybGV5LXVwZ3JhZGUxNg==  \r\nSEC-WEBSOCKET-VERSION: 13\r\n\r\n",
        "GET /v1/ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: cGFybGV5LXVwZ3JhZGUxNg==\r\n"
            + "Sec-WebSocket-Version: 13\r\nContent-Length: 0\r\nX-Other: \t\r\n\r\n",
    ])
    func variationsOfAPlainUpgradeAreRecognised(head: String) {
        guard case .webSocket(let request) = Self.parse(head) else {
            Issue.record("not recognised: \(head)")
            return
        }
        #expect(request.key == "cGFybGV5LXVwZ3JhZGUxNg==" && request.headLength == head.utf8.count)
    }

    @Test(arguments: [
        ("POST /v1/ws HTTP/1.1", "another method"),
        ("GET /v1/wss HTTP/1.1", "another path"),
        ("GET /v1/other HTTP/1.1", "another path"),
        ("GET /v1/ws HTTP/1.0", "HTTP/1.0"),
        ("GET /v1/ws  HTTP/1.1", "a space in the target"),
    ])
    func anotherRequestLineGoesToNIO(requestLine: String, why: String) {
        let head = Self.plain.replacingOccurrences(of: "GET /v1/ws HTTP/1.1", with: requestLine)
        #expect(Self.parse(head) == .other, "\(why)")
    }

    @Test(arguments: [
        ("Upgrade: websocket\r\n", "", "no Upgrade"),
        ("Host: 127.0.0.1:8080\r\n", "", "no Host"),
        ("Host: 127.0.0.1:8080\r\n", "Host: a\r\nHost: b\r\n", "two Hosts"),
        ("Upgrade: websocket\r\n", "Upgrade: h2c\r\n", "another protocol"),
        ("Upgrade: websocket\r\n", "Upgrade: websocket\r\nUpgrade: websocket\r\n", "two Upgrade headers"),
        ("Connection: Upgrade\r\n", "", "no Connection"),
        ("Connection: Upgrade\r\n", "Connection: keep-alive\r\n", "Connection without upgrade"),
        ("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", "", "no key"),
        (
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", "Sec-WebSocket-Key: a\r\nSec-WebSocket-Key: b\r\n",
            "two keys"
        ),
        ("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", "Sec-WebSocket-Key: c2hvcnQ=\r\n", "a key of 5 bytes"),
        (
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ!!\r\n",
            "a key that is not base64"
        ),
        (
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==AA\r\n",
            "a key of 17 bytes"
        ),
        ("Sec-WebSocket-Version: 13\r\n", "Sec-WebSocket-Version: 12\r\n", "version 12"),
        ("Sec-WebSocket-Version: 13\r\n", "", "no version"),
        ("Sec-WebSocket-Version: 13\r\n", "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Version: 13\r\n", "two versions"),
        ("Authorization: Bearer tok_1\r\n", "Authorization: Bearer a\r\nAuthorization: Bearer b\r\n", "two tokens"),
        ("Host: 127.0.0.1:8080\r\n", "Host: 127.0.0.1:8080\r\nContent-Length: 5\r\n", "a body"),
        ("Host: 127.0.0.1:8080\r\n", "Host: 127.0.0.1:8080\r\nTransfer-Encoding: chunked\r\n", "a chunked body"),
        ("Host: 127.0.0.1:8080\r\n", "Host: 127.0.0.1\r\n :8080\r\n", "a folded line"),
        ("Host: 127.0.0.1:8080\r\n", "Host: 127.0.0.1:8080\nX: y\r\n", "a bare line feed"),
        ("Host: 127.0.0.1:8080\r\n", "Host : 127.0.0.1:8080\r\n", "a blank before the colon"),
        ("Host: 127.0.0.1:8080\r\n", "Host 127.0.0.1:8080\r\n", "no colon"),
        ("Host: 127.0.0.1:8080\r\n", "Host: 127.0.0.1\u{1}\r\n", "a control byte"),
        ("Host: 127.0.0.1:8080\r\n", "Host: caf\u{E9}\r\n", "a byte past ASCII"),
    ])
    func anUnusualHeaderGoesToNIO(replacing: String, with replacement: String, why: String) {
        let head = Self.plain.replacingOccurrences(of: replacing, with: replacement)
        #expect(head != Self.plain)
        #expect(Self.parse(head) == .other, "\(why)")
    }

    @Test func otherRequestsAreHandedOverAsSoonAsTheyDiffer() {
        #expect(Self.parse("P") == .other)
        #expect(Self.parse("GET /h") == .other)
        #expect(Self.parse("GET /v1/wsx") == .other)
        #expect(Self.parse("GET /v1/ws") == .incomplete)
    }

    @Test func aHeadLongerThanTheLimitGoesToNIO() {
        let long =
            "GET /v1/ws HTTP/1.1\r\nX-Padding: " + String(repeating: "a", count: WebSocketUpgradeRequest.maxHeadLength)
        #expect(Self.parse(long) == .other)
    }

    @Test func theResponseIsRFC6455sWithTheAcceptValueOfItsExample() {
        // RFC 6455 section 1.3: this key gives this accept value.
        #expect(
            WebSocketUpgradeRequest.acceptValue(forKey: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        let request = WebSocketUpgradeRequest(key: "dGhlIHNhbXBsZSBub25jZQ==", authorization: nil, headLength: 0)
        let response = request.response(allocator: ByteBufferAllocator())
        #expect(
            String(buffer: response)
                == "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                + "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nConnection: upgrade\r\n\r\n"
        )
    }
}
