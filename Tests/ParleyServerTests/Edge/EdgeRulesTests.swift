import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import ParleyProtocol
import ParleyTesting
import Testing

@testable import ParleyServer

/// The pure rules of the connection edge, one by one: request lines, request targets, UTF-8, close codes and reasons,
/// the handshake gate, the token buckets, and the sniffer's deadlines on a test event loop (virtual time).
@Suite struct EdgeRulesTests {
    @Test(
        arguments: [
            ("GET /health HTTP/1.1", nil),
            ("DELETE /v1/me/session HTTP/1.0", nil),
            ("GET  /health HTTP/1.1", 400),
            ("GET /health  HTTP/1.1", 400),
            ("G(T /health HTTP/1.1", 400),
            (" GET /health HTTP/1.1", 400),
            ("GET /health HTTP/1.x", 400),
            ("GET /health HTTQ/1.1", 400),
            ("GET /health", 505),
            ("GET /health HTTP/2.0", 505),
            ("GET /health HTTP/0.9", 505),
            ("BREW /pot HTTP/1.1", 501),
            ("TRACE / HTTP/1.1", 501),
            ("CONNECT host:443 HTTP/1.1", 501),
        ] as [(String, Int?)])
    func requestLines(line: String, status: Int?) {
        #expect(
            HTTPRequestHeadGuard.refusal(ofRequestLine: Array(line.utf8))?.0.code == status, "\(line.debugDescription)")
    }

    @Test(arguments: [
        ("/v1/conversations/c_1/messages?limit=5", false),
        ("/v1/users/caf%C3%A9", false),
        ("/v1/users/%25", false),
        ("/v1/users/a%00b", true),
        ("/v1/users/a%1fb", true),
        ("/v1/users/a%7Fb", true),
        ("/v1/users/a%c2%85b", true),
        ("/v1/users/a\u{85}b", true),
        ("/v1/users/a%C2%A0b", false),
        ("/v1/users/a%0", false),
    ])
    func controlCharactersInTargets(target: String, refused: Bool) {
        #expect(HTTPRequestGuard.hasControlCharacter(inTarget: target) == refused, "\(target)")
    }

    /// The validator agrees with the standard library's UTF-8 decoding on every byte sequence of a seeded sample, and
    /// on the classic edge cases.
    @Test func utf8ValidationAgreesWithTheStandardLibrary() {
        let edges: [[UInt8]] = [
            [], [0x41], [0xC2, 0x80], [0xC1, 0xBF], [0xE0, 0x9F, 0x80], [0xE0, 0xA0, 0x80], [0xED, 0x9F, 0xBF],
            [0xED, 0xA0, 0x80], [0xEF, 0xBF, 0xBF], [0xF0, 0x8F, 0xBF, 0xBF], [0xF0, 0x90, 0x80, 0x80],
            [0xF4, 0x8F, 0xBF, 0xBF], [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xFF], [0x80], [0xC2],
            Array("plain ASCII, longer than eight bytes".utf8), Array("mixed ünïcödé 👩🏽‍💻 text".utf8),
        ]
        var random = SeededRandom(seed: 8)
        var samples = edges
        for _ in 0..<20_000 {
            let length = Int.random(in: 0...24, using: &random)
            samples.append(
                (0..<length).map { _ in
                    // Mostly bytes near the interesting ranges.
                    [
                        UInt8.random(in: 0x20...0x7E, using: &random), UInt8.random(in: 0x80...0xBF, using: &random),
                        UInt8.random(in: 0xC0...0xF7, using: &random), UInt8.random(in: 0...255, using: &random),
                    ]
                    .randomElement(using: &random)!
                })
        }
        for bytes in samples {
            let expected = String(validating: bytes, as: UTF8.self) != nil
            #expect(UTF8Validation.isValid(bytes) == expected, "\(bytes)")
        }
    }

    @Test func closeCodesAPeerMaySend() {
        for code: UInt16 in [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 4000, 4999] {
            #expect(WebSocketConnectionHandler.isValidCloseCode(code), "\(code)")
        }
        for code: UInt16 in [0, 999, 1004, 1005, 1006, 1015, 1016, 2000, 2999, 5000, 65535] {
            #expect(!WebSocketConnectionHandler.isValidCloseCode(code), "\(code)")
        }
    }

    /// A close reason is cut to 123 bytes without splitting a character.
    @Test func closeReasonsAreCutAtACharacterBoundary() {
        let reason = String(repeating: "a", count: 122) + "é" + "tail"
        let cut = FrameEncoding.utf8Prefix(reason, maxBytes: 123)
        #expect(cut.count == 122 && String(validating: cut, as: UTF8.self) != nil)
        let emoji = String(repeating: "👍", count: 40)
        let cutEmoji = FrameEncoding.utf8Prefix(emoji, maxBytes: 123)
        #expect(
            cutEmoji.count == 120 && String(validating: cutEmoji, as: UTF8.self) == String(repeating: "👍", count: 30))
        #expect(FrameEncoding.utf8Prefix("short", maxBytes: 123) == Array("short".utf8))
    }

    @Test func tokenBucketsRefillWithTimeAndSayWhenToRetry() {
        var bucket = TokenBucket(RateLimit(perSecond: 4, burst: 2), now: .zero)
        #expect(bucket.retryAfter(takingAt: .zero) == nil)
        #expect(bucket.retryAfter(takingAt: .zero) == nil)
        #expect(bucket.retryAfter(takingAt: .zero) == .milliseconds(250))
        #expect(bucket.retryAfter(takingAt: .milliseconds(100)) == .milliseconds(150))
        #expect(bucket.retryAfter(takingAt: .milliseconds(250)) == nil)
        let fullSoon = bucket.isFull(now: .milliseconds(250))
        let fullLater = bucket.isFull(now: .seconds(10))
        #expect(!fullSoon && fullLater)
    }

    @Test func aRateLimiterForgetsFullBucketsAndStaysBounded() {
        let clock = ManualClock()
        let time = ServerClock(timeline: Timeline(clock))
        let limiter = RateLimiter<Int>(RateLimit(perSecond: 1, burst: 1), time: time, maxKeys: 100)
        for key in 0..<50 { #expect(limiter.take(key) == nil) }
        #expect(limiter.take(7) != nil)
        #expect(limiter.keyCount == 50)
        clock.advance(by: .seconds(11))
        // The sweep drops the full buckets.
        #expect(limiter.take(1000) == nil)
        #expect(limiter.keyCount == 1)
        // Past maxKeys it starts over rather than grow.
        for key in 0..<250 { _ = limiter.take(key) }
        #expect(limiter.keyCount <= 100)
    }

    @Test func aCloseAfterTheQueuedAnswersWaitsForThem() {
        let queue = OutboundQueue(limitBytes: 1024)
        _ = queue.push(ByteBuffer(string: "a"))
        _ = queue.push(ByteBuffer(string: "b"))
        _ = queue.requestClose(code: 4400, reason: .malformedFrame, afterQueued: true)
        #expect(!queue.push(ByteBuffer(string: "c")).accepted)
        guard case .frames(let frames) = queue.take() else {
            Issue.record("no frames first")
            return
        }
        #expect(frames.map { String(buffer: $0) } == ["a", "b"])
        guard case .close(let code, _) = queue.take() else {
            Issue.record("no close after them")
            return
        }
        #expect(code == 4400)
    }

    // MARK: The sniffer's deadlines, in virtual time

    final class Admitted: Sendable {
        let count = NIOLockedValueBox(0)
    }

    static func sniffer(on channel: EmbeddedChannel, limits: EdgeLimits, admitted: Admitted) throws -> UpgradeOutcome {
        let outcome = UpgradeOutcome()
        let sniffer = WebSocketUpgradeSniffer(
            outcome: outcome, maxFrameSize: 1024, limits: limits,
            admitted: { _ in admitted.count.withLockedValue { $0 += 1 } }, heard: { _ in },
            upgrade: { _, _ in }, fallBack: { channel in channel.eventLoop.makeFailedFuture(ChannelError.inputClosed) }
        )
        try channel.pipeline.syncOperations.addHandler(sniffer)
        return outcome
    }

    @Test func aSilentConnectionIsClosedAtTheHeadDeadlineWithoutAnAnswer() throws {
        let channel = EmbeddedChannel()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        let admitted = Admitted()
        _ = try Self.sniffer(on: channel, limits: EdgeLimits(), admitted: admitted)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(9_999))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        // Closed without an answer: it sent nothing.
        #expect(!channel.isActive)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
    }

    /// The sniffer's timers (never cancelled) keep neither the handler nor the channel of a closed connection: its
    /// channel, pipeline and handlers are freed at its close, not at the head deadline (they were held 10 s, and a
    /// burst of 20,000 WebSocket cycles left the server 68 MiB larger for good).
    @Test func theSniffersTimersDoNotKeepAClosedConnection() throws {
        let loop = EmbeddedEventLoop()
        weak var closed: EmbeddedChannel?
        weak var silent: EmbeddedChannel?
        try {
            let admitted = Admitted()
            let channel = EmbeddedChannel(loop: loop)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
            _ = try Self.sniffer(on: channel, limits: EdgeLimits(), admitted: admitted)
            try channel.writeInbound(ByteBuffer(string: "GET /v1/ws HTTP/1.1\r\n"))
            try channel.close().wait()
            closed = channel
            // One that sent nothing.
            let other = EmbeddedChannel(loop: loop)
            try other.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
            _ = try Self.sniffer(on: other, limits: EdgeLimits(), admitted: admitted)
            try other.close().wait()
            silent = other
        }()
        loop.run()
        #expect(closed == nil)
        #expect(silent == nil)
        loop.advanceTime(by: .seconds(10))
    }

    @Test func halfAHeadIsAnswered408AtTheDeadlineAndAHalfCloseEndsItAtOnce() throws {
        let channel = EmbeddedChannel()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        let admitted = Admitted()
        _ = try Self.sniffer(on: channel, limits: EdgeLimits(), admitted: admitted)
        try channel.writeInbound(ByteBuffer(string: "GET /v1/ws HTTP/1.1\r\nUpg"))
        // Everything it sent is read and the head is incomplete: it waits on its peer and stops counting.
        #expect(admitted.count.withLockedValue { $0 } == 1)
        channel.embeddedEventLoop.advanceTime(by: .seconds(10))
        let answer = try #require(try channel.readOutbound(as: ByteBuffer.self))
        #expect(String(buffer: answer).hasPrefix("HTTP/1.1 408 Request Timeout\r\n"))
        #expect(!channel.isActive)

        let other = EmbeddedChannel()
        try other.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        let outcome = try Self.sniffer(on: other, limits: EdgeLimits(), admitted: admitted)
        try other.writeInbound(ByteBuffer(string: "GET /v1/ws HTTP/1.1\r\n"))
        other.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(!other.isActive)
        #expect(!outcome.hasWaiter)
    }
}
