import Foundation
import ParleyProtocol
import ParleyServer
import ParleyTesting
import Testing

/// docs/PROTOCOL.md, "The connection edge": malformed, smuggling-shaped, oversized or unsupported HTTP gets the
/// documented status and error code within the moment it is read, then the connection closes; the server keeps serving
/// and holds nothing for those connections afterwards. Raw bytes over real sockets to the real server.
@Suite(.serialized, .timeLimit(.minutes(3))) struct HostileHTTPTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var bytes: [UInt8]
        var status: Int
        var code: ErrorCode
        /// Requests before the refused one, pipelined with it: each is answered 200 first.
        var servedBefore: Int
        var testDescription: String { name }

        init(_ name: String, _ text: String, _ status: Int, _ code: ErrorCode, servedBefore: Int = 0) {
            self.init(name, Array(text.utf8), status, code, servedBefore: servedBefore)
        }

        init(_ name: String, _ bytes: [UInt8], _ status: Int, _ code: ErrorCode, servedBefore: Int = 0) {
            self.name = name
            self.bytes = bytes
            self.status = status
            self.code = code
            self.servedBefore = servedBefore
        }
    }

    static let upgradeHead =
        "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"

    static let cases: [Case] = {
        var random = SeededRandom(seed: 6455)
        let noise = (0..<300).map { _ in UInt8.random(in: 0...255, using: &random) }
        return [
            Case("random bytes", [0x01, 0xFE] + noise, 400, .badRequest),
            Case(
                "a TLS ClientHello", [0x16, 0x03, 0x01, 0x00, 0xA5, 0x01, 0x00, 0x00, 0xA1, 0x03, 0x03] + noise, 400,
                .badRequest),
            Case(
                "Content-Length with Transfer-Encoding",
                "POST /v1/login HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                400, .badRequest
            ),
            Case(
                "two Content-Lengths",
                "POST /v1/login HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
                400, .badRequest
            ),
            Case(
                "a negative Content-Length", "POST /v1/login HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 400,
                .badRequest),
            Case("a bare LF", "GET /health HTTP/1.1\nHost: x\n\n", 400, .badRequest),
            Case("a bare CR", "GET /health HTTP/1.1\rHost: x\r\r", 400, .badRequest),
            Case("a bare LF in a header", "GET /health HTTP/1.1\r\nHost: x\nX: y\r\n\r\n", 400, .badRequest),
            Case("obs-fold", "GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", 400, .badRequest),
            Case("HTTP/0.9", "GET /health\r\n", 505, .httpVersionNotSupported),
            Case("HTTP/9.9", "GET /health HTTP/9.9\r\nHost: x\r\n\r\n", 505, .httpVersionNotSupported),
            Case("HTTP/2.0", "GET /health HTTP/2.0\r\nHost: x\r\n\r\n", 505, .httpVersionNotSupported),
            Case("a version that is not one", "GET /health HTTP/1.x\r\nHost: x\r\n\r\n", 400, .badRequest),
            Case("two spaces in the request line", "GET  /health HTTP/1.1\r\nHost: x\r\n\r\n", 400, .badRequest),
            Case("an unknown method", "FOO /health HTTP/1.1\r\nHost: x\r\n\r\n", 501, .notImplemented),
            Case(
                "a method the API has no use for", "PROPFIND /health HTTP/1.1\r\nHost: x\r\n\r\n", 501, .notImplemented),
            Case("CONNECT", "CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: x\r\n\r\n", 501, .notImplemented),
            Case(
                "a 100 KB URL",
                "GET /health?" + String(repeating: "a", count: 100_000) + " HTTP/1.1\r\nHost: x\r\n\r\n",
                414, .uriTooLong
            ),
            Case(
                "a 1 MB header",
                "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "a", count: 1_000_000) + "\r\n\r\n",
                431, .headersTooLarge
            ),
            Case(
                "10,000 headers",
                "GET /health HTTP/1.1\r\nHost: x\r\n" + (0..<10_000).map { "X-\($0): 1\r\n" }.joined() + "\r\n",
                431, .headersTooLarge
            ),
            Case(
                "a NUL in the target", "GET /v1/conversations/c_1%00x/messages HTTP/1.1\r\nHost: x\r\n\r\n", 400,
                .badRequest),
            Case("a C1 control in the target", "GET /v1/users/a%C2%85b HTTP/1.1\r\nHost: x\r\n\r\n", 400, .badRequest),
            Case(
                "a body larger than the limit",
                "POST /v1/login HTTP/1.1\r\nHost: x\r\nContent-Length: 600000000\r\n\r\n",
                413, .requestTooLarge
            ),
            Case(
                "an upgrade with POST", "POST /v1/ws HTTP/1.1\r\nHost: x\r\n" + upgradeHead + "\r\n", 400, .badRequest),
            Case(
                "an upgrade over HTTP/1.0", "GET /v1/ws HTTP/1.0\r\nHost: x\r\n" + upgradeHead + "\r\n", 400,
                .badRequest),
            Case(
                "an upgrade with a body",
                "GET /v1/ws HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n" + upgradeHead + "\r\nabc",
                400, .badRequest
            ),
            Case(
                "an upgrade with a short key",
                "GET /v1/ws HTTP/1.1\r\nHost: x\r\n"
                    + upgradeHead.replacingOccurrences(of: "dGhlIHNhbXBsZSBub25jZQ==", with: "c2hvcnQ=") + "\r\n",
                400, .badRequest
            ),
            Case(
                "an upgrade to another path", "GET /v1/other HTTP/1.1\r\nHost: x\r\n" + upgradeHead + "\r\n", 400,
                .badRequest),
            Case(
                "an upgrade as a second request",
                "GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET //evil.example/x HTTP/1.1\r\nHost: x\r\n"
                    + upgradeHead + "\r\n",
                400, .badRequest, servedBefore: 1
            ),
            Case("HTTP/1.1 without Host", "GET /health/live HTTP/1.1\r\n\r\n", 400, .badRequest),
            Case("two Hosts", "GET /health/live HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, .badRequest),
            Case(
                "an upgrade without a WebSocket version",
                "GET /v1/ws HTTP/1.1\r\nHost: x\r\n"
                    + upgradeHead.replacingOccurrences(of: "Sec-WebSocket-Version: 13\r\n", with: "") + "\r\n",
                400, .badRequest
            ),
            Case(
                "a transfer coding other than chunked",
                "POST /v1/login HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
                501, .notImplemented
            ),
            Case(
                "identity before chunked",
                "POST /v1/login HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n",
                501, .notImplemented
            ),
            Case(
                "Transfer-Encoding in HTTP/1.0",
                "POST /v1/login HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                400, .badRequest
            ),
            Case(
                "an endless chunk extension",
                "POST /v1/login HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;"
                    + String(repeating: "x", count: 100_000),
                400, .badRequest
            ),
            // Pipelined after requests that are served: each refusal still comes, after their answers.
            Case(
                "an unknown method after pipelined requests",
                String(repeating: "GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n", count: 5)
                    + "BREW /pot HTTP/1.1\r\nHost: x\r\n\r\n",
                501, .notImplemented, servedBefore: 5
            ),
            Case(
                "two spaces after a pipelined request",
                "GET /health/live HTTP/1.1\r\nHost: x\r\n\r\nGET  /x HTTP/1.1\r\nHost: x\r\n\r\n",
                400, .badRequest, servedBefore: 1
            ),
            Case(
                "a 9 KB request line after a pipelined request",
                "GET /health/live HTTP/1.1\r\nHost: x\r\n\r\nGET /" + String(repeating: "a", count: 9_000)
                    + " HTTP/1.1\r\nHost: x\r\n\r\n",
                414, .uriTooLong, servedBefore: 1
            ),
            Case(
                "a bare LF after a pipelined request with a body",
                "POST /v1/login HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}GET /health/live HTTP/1.1\nHost: x\r\n\r\n",
                400, .badRequest, servedBefore: 1
            ),
        ]
    }()

    @Test(arguments: cases) func aMalformedRequestIsAnsweredWithItsStatusThenClosed(_ test: Case) async throws {
        let server = try await TestServer.startForEdgeTests()
        let socket = try await RawSocket.connected(port: server.port, readTimeout: .seconds(10))
        try? await socket.send(test.bytes)
        for _ in 0..<test.servedBefore {
            let served = try await socket.readResponse()
            #expect(served.status == 200 || served.status == 400, "\(test.name): \(served.head)")
        }
        let response = try await socket.readResponse()
        // No redirect built from a request's path (the upgrade as a second request).
        #expect(response.header("location") == nil)
        #expect(response.status == test.status, "\(test.name): \(response.head)")
        #expect(response.errorCode == test.code.rawValue, "\(test.name)")
        #expect(response.header("connection")?.lowercased() == "close")
        let (_, ending) = try await socket.readToEnd()
        #expect(ending != .stillOpen, "\(test.name): the connection stayed open")
        socket.close()
        try await server.stop()
    }

    /// Every case above on one server, one after the other: afterwards it serves a normal client, and holds no
    /// connection, no setup slot and no socket for any of them.
    @Test func afterHostileRequestsTheServerServesAndHoldsNothing() async throws {
        let server = try await TestServer.startForEdgeTests()
        let before = await server.snapshot()
        for test in Self.cases {
            let socket = try await RawSocket.connected(port: server.port, readTimeout: .seconds(10))
            try? await socket.send(test.bytes)
            _ = try await socket.readToEnd()
            socket.close()
        }
        let health = try await server.request("GET", "/health")
        #expect(health.status == 200)
        let token = try await server.login("alice")
        let client = try await RawSocket.openWebSocket(port: server.port, token: token)
        #expect(try await client.readFrame().text.contains(#""type":"hello""#))
        client.close()
        let after = await server.snapshot { $0.openConnections == 0 && $0.webSockets == 0 && $0.liveConnections == 0 }
        #expect(after.openConnections == 0, "\(after)")
        #expect(after.connectionsInSetup == 0 && after.webSockets == 0 && after.liveConnections == 0, "\(after)")
        #expect(after.handshakesInProgress == 0 && after.handshakesWaiting == 0, "\(after)")
        #expect(before.openConnections == 0)
        try await server.stop()
    }

    /// A chunked body is refused with 413 as soon as it passes the limit: the answer comes while the body is still
    /// arriving (what follows is read and dropped, for a second at most, so that the client gets the answer).
    @Test func aChunkedBodyIsRefusedAsSoonAsItPassesTheLimit() async throws {
        let server = try await TestServer.startForEdgeTests { $0.edge.maxRequestBodyBytes = 64 * 1024 }
        let socket = try await RawSocket.connected(port: server.port, readTimeout: .seconds(10))
        try await socket.send(
            "POST /v1/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        let chunk = Array("4000\r\n".utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: 0x4000) + Array("\r\n".utf8)
        // 128 KiB of a body that has no end yet.
        try await socket.send(Array(repeating: chunk, count: 8).flatMap { $0 })
        let response = try await socket.readResponse()
        #expect(response.status == 413 && response.errorCode == ErrorCode.requestTooLarge.rawValue)
        #expect(try await socket.readToEnd().ending == .closed)
        try await server.stop()
    }

    /// An upgrade to a protocol the server does not speak is ignored (RFC 9110 section 7.8): the request is served. A
    /// request that names `upgrade` in `Connection` too is the last of its connection (NIO's decoder reads nothing after
    /// it), which its response says; one that does not leaves the connection serving.
    @Test(arguments: ["h2c", "foo", "TLS/1.2, h2c"]) func anUpgradeToAnotherProtocolIsServedAsAPlainRequest(
        _ proto: String
    ) async throws {
        let server = try await TestServer.startForEdgeTests()
        let upgrading = try await RawSocket.connected(port: server.port, readTimeout: .seconds(10))
        try await upgrading.send(
            "GET /health/live HTTP/1.1\r\nHost: x\r\nUpgrade: \(proto)\r\nConnection: Upgrade\r\n\r\n"
        )
        let response = try await upgrading.readResponse()
        #expect(response.status == 200 && response.header("connection")?.lowercased() == "close", "\(response.head)")
        #expect(try await upgrading.readToEnd().ending == .closed)
        let naming = try await RawSocket.connected(port: server.port, readTimeout: .seconds(10))
        try await naming.send(
            "GET /health/live HTTP/1.1\r\nHost: x\r\nUpgrade: \(proto)\r\n\r\n"
                + "GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        #expect(try await naming.readResponse().status == 200)
        #expect(try await naming.readResponse().status == 200)
        upgrading.close()
        naming.close()
        try await server.stop()
    }

    /// Pipelined requests are each answered, in order, whether they come in one write (several reads on the server's
    /// side) or cut anywhere into many: each request line is checked wherever it starts.
    @Test(arguments: [false, true]) func pipelinedRequestsAreAllAnsweredInOrder(cutAnywhere: Bool) async throws {
        let server = try await TestServer.startForEdgeTests()
        let socket = try await RawSocket.connected(port: server.port, readTimeout: .seconds(20))
        let requests = (0..<300).map { index in
            index % 3 == 2
                ? "POST /v1/login HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
                : "GET /health/live?n=\(index) HTTP/1.1\r\nHost: x\r\n\r\n"
        }
        let stream = Array(requests.joined().utf8)
        if cutAnywhere {
            var random = SeededRandom(seed: 7230)
            var start = 0
            while start < stream.count {
                let end = min(stream.count, start + Int.random(in: 1...700, using: &random))
                try await socket.send(Array(stream[start..<end]))
                start = end
            }
        } else {
            try await socket.send(stream)
        }
        for index in 0..<300 {
            let response = try await socket.readResponse()
            #expect(response.status == (index % 3 == 2 ? 400 : 200), "request \(index): \(response.head)")
            if response.status != (index % 3 == 2 ? 400 : 200) { break }
        }
        socket.close()
        try await server.stop()
    }

    /// HTTP/1.0 without keep-alive, and `Connection: close` in any case: the connection closes after the response.
    @Test(arguments: ["GET /health HTTP/1.0\r\n\r\n", "GET /health HTTP/1.1\r\nHost: x\r\nConnection: Close\r\n\r\n"])
    func aRequestThatAsksToCloseIsClosedAfterItsResponse(_ request: String) async throws {
        let server = try await TestServer.startForEdgeTests()
        let socket = try await RawSocket.connected(port: server.port, readTimeout: .seconds(10))
        try await socket.send(request)
        #expect(try await socket.readResponse().status == 200)
        #expect(try await socket.readToEnd().ending == .closed)
        try await server.stop()
    }
}

/// A small deterministic generator (SplitMix64), so that "random" test input is the same on every run.
struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var value = state
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        return value ^ (value >> 31)
    }
}
