import Testing

@testable import ParleyServer

/// ``HTTPRequestFraming`` finds every request of a connection in its byte stream, however the stream is cut into
/// reads: the events of a stream read whole, byte by byte and cut at every offset are the same.
@Suite struct HTTPRequestFramingTests {
    typealias Event = HTTPRequestFraming.Event

    static func events(of reads: [[UInt8]], maxRequestLineBytes: Int = 8 * 1024) -> [Event] {
        var framing = HTTPRequestFraming(
            maxRequestLineBytes: maxRequestLineBytes, maxTrailerBytes: 32 * 1024, maxHeaderFieldBytes: 200,
            maxHeaderBytes: 1000, maxHeaderCount: 10
        )
        var events: [Event] = []
        for read in reads {
            read.withUnsafeBytes { buffer in
                var index = 0
                while let event = framing.next(buffer, &index) { events.append(event) }
                precondition(index == buffer.count)
            }
        }
        return events
    }

    static let pipelined: [String] = [
        "GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
        "POST /v1/login HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n{\"a\":\"b\r\n\"}",
        "\r\n",  // an empty line between requests is ignored
        "PUT /v1/x HTTP/1.1\r\nHost: x\r\ntransfer-encoding:  Chunked \r\n\r\n"
            + "5;name=value\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n",
        "DELETE /v1/y HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        "PATCH /v1/z HTTP/1.0\r\ncontent-length:3\r\n\r\nabc",
        "GET /last HTTP/1.1\r\n\r\n",
    ]

    static let expected: [Event] = [
        .requestStarted, .requestLine(Array("GET /health HTTP/1.1".utf8)), .requestEnded,
        .requestStarted, .requestLine(Array("POST /v1/login HTTP/1.1".utf8)), .headEnded, .requestEnded,
        .requestStarted, .requestLine(Array("PUT /v1/x HTTP/1.1".utf8)), .headEnded, .requestEnded,
        .requestStarted, .requestLine(Array("DELETE /v1/y HTTP/1.1".utf8)), .requestEnded,
        .requestStarted, .requestLine(Array("PATCH /v1/z HTTP/1.0".utf8)), .headEnded, .requestEnded,
        .requestStarted, .requestLine(Array("GET /last HTTP/1.1".utf8)), .requestEnded,
    ]

    @Test func pipelinedRequestsAreFoundHoweverTheStreamIsCut() {
        let stream = Array(Self.pipelined.joined().utf8)
        #expect(Self.events(of: [stream]) == Self.expected)
        #expect(Self.events(of: stream.map { [$0] }) == Self.expected)
        for cut in 1..<stream.count {
            let events = Self.events(of: [Array(stream[..<cut]), Array(stream[cut...])])
            #expect(events == Self.expected, "cut at \(cut)")
            if events != Self.expected { return }
        }
        var random = SeededRandom(seed: 9112)
        for _ in 0..<200 {
            var reads: [[UInt8]] = []
            var start = 0
            while start < stream.count {
                let end = min(stream.count, start + Int.random(in: 1...40, using: &random))
                reads.append(Array(stream[start..<end]))
                start = end
            }
            #expect(Self.events(of: reads) == Self.expected)
        }
    }

    @Test func aLargeBodyIsSkippedWithoutLookingAtIt() {
        let body = String(repeating: "GET / HTTP/1.1\r\n", count: 10_000)
        let head = "POST /a HTTP/1.1\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
        let stream = Array((head + body + "GET /b HTTP/1.1\r\n\r\n").utf8)
        #expect(
            Self.events(of: [stream]) == [
                .requestStarted, .requestLine(Array("POST /a HTTP/1.1".utf8)), .headEnded, .requestEnded,
                .requestStarted, .requestLine(Array("GET /b HTTP/1.1".utf8)), .requestEnded,
            ])
    }

    @Test(arguments: [
        ("GET / HTTP/1.1\nHost: x\r\n\r\n", HTTPRequestFraming.Refusal.bareLineEnding),
        ("GET / HTTP/1.1\r\nHost: x\n\r\n", .bareLineEnding),
        ("GET / HTTP/1.1\r\nHost: x\rY: z\r\n\r\n", .bareLineEnding),
        ("GET /" + String(repeating: "a", count: 200) + " HTTP/1.1\r\n", .requestLineTooLong),
        (
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;" + String(repeating: "x", count: 5000),
            .chunkLineTooLong
        ),
        (
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"
                + String(repeating: "X-T: 1234567890\r\n", count: 3000),
            .trailersTooLarge
        ),
    ])
    func boundsAndLineEndingsAreRefused(_ text: String, _ refusal: HTTPRequestFraming.Refusal) {
        let events = Self.events(of: [Array(text.utf8)], maxRequestLineBytes: 100)
        #expect(events.last == .refused(refusal), "\(events)")
    }

    /// Header limits (a line of 200 bytes, 1000 bytes, 10 lines here) are refused at the byte that passes them,
    /// whether that byte comes with the rest or alone: NIO's decoder, which checks the same limits only when its
    /// parser hands it a piece, never sees a head past them (found by the http-request fuzz target).
    @Test(arguments: [
        // Line 201 bytes long.
        "GET / HTTP/1.1\r\nX-Long: " + String(repeating: "v", count: 193),
        // Five lines of 199 bytes, then the 1001st byte.
        "GET / HTTP/1.1\r\n" + String(repeating: "X-F: " + String(repeating: "v", count: 194) + "\r\n", count: 5)
            + "Y-G: 1",
        // The first byte of the 11th line.
        "GET / HTTP/1.1\r\n" + String(repeating: "A: 1\r\n", count: 10) + "B",
    ])
    func headerLimitsAreRefusedAtTheBytePastThem(_ text: String) {
        let stream = Array(text.utf8)
        for reads in [[stream], stream.map { [$0] }] {
            let events = Self.events(of: reads)
            #expect(events.last == .refused(.headersTooLarge), "\(events)")
        }
        // One byte less, and nothing is refused.
        #expect(!Self.events(of: [Array(stream.dropLast())]).contains(.refused(.headersTooLarge)))
    }

    /// Framing the decoder refuses, and an upgrade (WebSocket frames follow it), are not followed: what comes after
    /// them is not taken for requests.
    @Test(arguments: [
        "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: -3\r\n\r\n",
        "POST / HTTP/1.1\r\nX: a\r\n b\r\n\r\n",
        "GET /v1/ws HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ])
    func framingThatIsRefusedOrUpgradedIsNotFollowed(_ head: String) {
        let events = Self.events(of: [Array((head + "NOT A REQUEST\r\n\r\n").utf8)])
        #expect(events.filter { $0 == .requestStarted }.count == 1, "\(events)")
        #expect(!events.contains(.requestEnded), "\(events)")
    }

    @Test func chunkSizes() {
        #expect(HTTPRequestFraming.chunkSize(Array("1aF;ext=1".utf8)) == 0x1AF)
        #expect(HTTPRequestFraming.chunkSize(Array("0".utf8)) == 0)
        #expect(HTTPRequestFraming.chunkSize(Array(";x".utf8)) == nil)
        #expect(HTTPRequestFraming.chunkSize(Array("ffffffffffffffffff".utf8)) == nil)
    }
}
