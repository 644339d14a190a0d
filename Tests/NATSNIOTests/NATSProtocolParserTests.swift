import NIOCore
import NIOEmbedded
import ParleyTesting
import Testing

@testable import NATSNIO

@Suite("NATSProtocolParser")
struct NATSProtocolParserTests {
    static let info = #"INFO {"server_id":"S1","version":"2.10.0","proto":1,"headers":true,"max_payload":1048576}"#
    static let corpus: String =
        info + "\r\n"
        + "MSG foo.bar 1 5\r\nhello\r\n"
        + "msg  foo\t2   reply.to 0\r\n\r\n"
        + "HMSG a.b 3 26 31\r\nNATS/1.0\r\nK: v1\r\nK: v2\r\n\r\nworld\r\n"
        + "HMSG _INBOX.x.1 4 16 16\r\nNATS/1.0 503\r\n\r\n\r\n"
        + "PING\r\npong\r\n+OK\r\n-ERR 'Authorization Violation'\r\n"
        + "MSG bin 5 4\r\n\r\n\r\n\r\n"

    static let expected: [NATSServerOperation] = {
        var info = NATSServerInfo(serverID: "S1", version: "2.10.0", maxPayload: 1_048_576)
        info.proto = 1
        var status = NATSHeaders()
        status.status = 503
        return [
            .info(info),
            .message(NATSMessage(subject: "foo.bar", sid: 1, payload: ByteBuffer(string: "hello"))),
            .message(NATSMessage(subject: "foo", sid: 2, replyTo: "reply.to", payload: ByteBuffer())),
            .message(
                NATSMessage(
                    subject: "a.b", sid: 3, headers: ["K": "v1", "K": "v2"], payload: ByteBuffer(string: "world"))),
            .message(NATSMessage(subject: "_INBOX.x.1", sid: 4, headers: status, payload: ByteBuffer())),
            .ping, .pong, .ok, .error("Authorization Violation"),
            .message(NATSMessage(subject: "bin", sid: 5, payload: ByteBuffer(string: "\r\n\r\n"))),
        ]
    }()

    /// Feeds chunks as a cumulation buffer would, parsing everything possible after each chunk.
    static func parse(chunks: [ArraySlice<UInt8>]) throws -> [NATSServerOperation] {
        var parser = NATSProtocolParser()
        var buffer = ByteBuffer()
        var operations: [NATSServerOperation] = []
        for chunk in chunks {
            buffer.writeBytes(chunk)
            while let operation = try parser.next(from: &buffer) {
                operations.append(operation)
            }
            buffer.discardReadBytes()
        }
        #expect(buffer.readableBytes == 0)
        return operations
    }

    @Test func parsesEveryOperationInOneChunk() throws {
        let bytes = Array(Self.corpus.utf8)
        #expect(try Self.parse(chunks: [bytes[...]]) == Self.expected)
    }

    @Test func parsesAtEverySplitPoint() throws {
        let bytes = Array(Self.corpus.utf8)
        for split in 0...bytes.count {
            let operations = try Self.parse(chunks: [bytes[..<split], bytes[split...]])
            #expect(operations == Self.expected, "split at \(split)")
        }
    }

    @Test func parsesByteByByte() throws {
        let bytes = Array(Self.corpus.utf8)
        let chunks = bytes.indices.map { bytes[$0...$0] }
        #expect(try Self.parse(chunks: chunks) == Self.expected)
    }

    @Test func parsesAtEveryPairOfSplitPointsOfAMessage() throws {
        let bytes = Array("HMSG s 9 r 12 17\r\nNATS/1.0\r\n\r\nhello\r\nPING\r\n".utf8)
        let expected: [NATSServerOperation] = [
            .message(
                NATSMessage(subject: "s", sid: 9, replyTo: "r", headers: NATSHeaders(), payload: .init(string: "hello"))
            ),
            .ping,
        ]
        for first in 0...bytes.count {
            for second in first...bytes.count {
                let chunks = [bytes[..<first], bytes[first..<second], bytes[second...]]
                #expect(try Self.parse(chunks: chunks) == expected)
            }
        }
    }

    @Test func aLongControlLineIsRefusedBeforeItIsBuffered() throws {
        var parser = NATSProtocolParser()
        var buffer = ByteBuffer(string: "INFO ")
        #expect(try parser.next(from: &buffer) == nil)
        let chunk = String(repeating: "x", count: 16 * 1024)
        var refused = false
        for _ in 0..<10 {
            buffer.writeString(chunk)
            do {
                _ = try parser.next(from: &buffer)
            } catch {
                refused = true
                #expect(error.description.contains("control line longer"))
                break
            }
        }
        #expect(refused)
        #expect(buffer.readableBytes <= NATSProtocolParser.maxControlLineLength + 16 * 1024 + 5)
        // Every later call throws again.
        #expect(throws: NATSProtocolError.self) { try parser.next(from: &buffer) }
    }

    @Test func aLongINFOWithinTheBoundIsAccepted() throws {
        let urls = (0..<2500).map { "\"10.0.\($0 / 250).\($0 % 250):4222\"" }.joined(separator: ",")
        let line = #"INFO {"server_id":"S","connect_urls":["# + urls + "]}\r\n"
        #expect(line.utf8.count > 32 * 1024 && line.utf8.count < 64 * 1024)
        var parser = NATSProtocolParser()
        var buffer = ByteBuffer(string: line)
        guard case .info(let info) = try parser.next(from: &buffer) else {
            Issue.record("expected INFO")
            return
        }
        #expect(info.connectURLs.count == 2500)
    }

    @Test func aHugeDeclaredPayloadIsRefusedAtOnce() {
        for line in [
            "MSG foo 1 2147483648\r\n", "HMSG foo 1 10 2147483648\r\n", "MSG foo 1 99999999999999999999999\r\n",
        ] {
            var parser = NATSProtocolParser()
            var buffer = ByteBuffer(string: line)
            #expect(throws: NATSProtocolError.self, "\(line)") { try parser.next(from: &buffer) }
        }
    }

    @Test func thePayloadLimitFollowsMaxPayloadAboveTheFloor() throws {
        var parser = NATSProtocolParser()
        #expect(parser.payloadLimit == 64 << 20)
        var buffer = ByteBuffer(string: #"INFO {"server_id":"S","max_payload":134217728}"# + "\r\n")
        _ = try parser.next(from: &buffer)
        #expect(parser.payloadLimit == 128 << 20)
        buffer = ByteBuffer(string: #"INFO {"server_id":"S","max_payload":4096}"# + "\r\n")
        _ = try parser.next(from: &buffer)
        #expect(parser.payloadLimit == 64 << 20)
    }

    @Test(arguments: [
        "MSG foo\r\n", "MSG a b c d e\r\n", "MSG foo 1 -5\r\n", "MSG foo x 5\r\nhello\r\n", "HMSG a 1 10 5\r\n",
        "MSG foo 1 5\r\nhelloXX", "FOO bar\r\n", "\r\n", "INFO {not json\r\n", "HMSG a 1 5 5\r\nHTTP/\r\n",
        "HMSG a 1 12 12\r\nNATS/1.0\r\nbad\r\n\r\n",
    ])
    func malformedInputIsAProtocolError(_ input: String) {
        var parser = NATSProtocolParser()
        var buffer = ByteBuffer(string: input)
        #expect(throws: NATSProtocolError.self) {
            while try parser.next(from: &buffer) != nil {}
        }
    }

    @Test func randomBytesNeverCrashTheParser() {
        var generator = SplitMix(seed: 42)
        let fragments = ["MSG ", "HMSG ", "PING\r\n", "INFO {}\r\n", " 1 ", "\r\n", "NATS/1.0", "-ERR ", "5", "a.b"]
        for _ in 0..<2000 {
            var parser = NATSProtocolParser()
            var buffer = ByteBuffer()
            for _ in 0..<Int(generator.next() % 12) {
                if generator.next() % 2 == 0 {
                    buffer.writeString(fragments[Int(generator.next() % UInt64(fragments.count))])
                } else {
                    for _ in 0..<Int(generator.next() % 8) {
                        buffer.writeInteger(UInt8(truncatingIfNeeded: generator.next()))
                    }
                }
            }
            do {
                while try parser.next(from: &buffer) != nil {}
            } catch {}
        }
    }

    @Test func theDecoderHandlerParsesByteByByteOnAChannel() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(NATSProtocolDecoder()))
        for byte in Self.corpus.utf8 {
            try channel.writeInbound(ByteBuffer(bytes: [byte]))
        }
        var operations: [NATSServerOperation] = []
        while let operation = try channel.readInbound(as: NATSServerOperation.self) {
            operations.append(operation)
        }
        #expect(operations == Self.expected)
        _ = try channel.finish()
    }

    @Test func theDecoderHandlerReportsProtocolErrors() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(NATSProtocolDecoder()))
        #expect(throws: NATSProtocolError.self) {
            try channel.writeInbound(ByteBuffer(string: "MSG a 1 99999999999\r\n"))
        }
        _ = try? channel.finish()
    }
}

/// A small deterministic generator for fuzzing.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64

    init(seed: UInt64) {
        self.state = seed
    }

    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
