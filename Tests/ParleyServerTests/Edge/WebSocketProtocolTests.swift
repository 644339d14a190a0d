import Foundation
import ParleyProtocol
import ParleyServer
import ParleyTesting
import Testing

/// docs/PROTOCOL.md, close codes, and RFC 6455 sections 5 and 7.4: frames a client may not send close the connection
/// with 1002 (1007 for text that is not UTF-8), and the server keeps serving other clients. Raw frames over a real
/// socket to the real server.
@Suite(.timeLimit(.minutes(3))) struct WebSocketProtocolTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var frame: [UInt8]
        var code: UInt16
        var reason: ErrorCode?
        var testDescription: String { name }
    }

    static func close(_ payload: [UInt8]) -> [UInt8] { RawSocket.clientFrame(payload, opcode: 0x8) }
    static func closeCode(_ code: UInt16, _ reason: [UInt8] = []) -> [UInt8] {
        close([UInt8(code >> 8), UInt8(code & 0xFF)] + reason)
    }

    static let cases: [Case] = [
        Case(
            name: "an unmasked frame", frame: RawSocket.clientFrame(Array(#"{"type":"ping"}"#.utf8), masked: false),
            code: 1002, reason: .webSocketProtocolError),
        Case(
            name: "RSV1 without an extension",
            frame: RawSocket.clientFrame(Array(#"{"type":"ping"}"#.utf8), reservedBits: 0b100), code: 1002,
            reason: .webSocketProtocolError),
        Case(
            name: "RSV3", frame: RawSocket.clientFrame(Array(#"{"type":"ping"}"#.utf8), reservedBits: 0b001),
            code: 1002, reason: .webSocketProtocolError),
        Case(
            name: "reserved data opcode 3", frame: RawSocket.clientFrame([1], opcode: 0x3), code: 1002,
            reason: .webSocketProtocolError),
        Case(
            name: "reserved control opcode 11", frame: RawSocket.clientFrame([1], opcode: 0xB), code: 1002,
            reason: .webSocketProtocolError),
        Case(name: "a close code of 1005", frame: closeCode(1005), code: 1002, reason: .webSocketProtocolError),
        Case(name: "a close code of 1006", frame: closeCode(1006), code: 1002, reason: .webSocketProtocolError),
        Case(name: "a close code of 999", frame: closeCode(999), code: 1002, reason: .webSocketProtocolError),
        Case(name: "a close code of 2000", frame: closeCode(2000), code: 1002, reason: .webSocketProtocolError),
        Case(name: "a close code of 5000", frame: closeCode(5000), code: 1002, reason: .webSocketProtocolError),
        Case(name: "a one-byte close payload", frame: close([3]), code: 1002, reason: .webSocketProtocolError),
        Case(
            name: "a close reason that is not UTF-8", frame: closeCode(1000, [0xFF, 0xFE]), code: 1007,
            reason: .invalidUTF8),
        Case(
            name: "text that is not UTF-8",
            frame: RawSocket.clientFrame(Array(#"{"type":"ping","id":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8)),
            code: 1007, reason: .invalidUTF8),
        Case(
            name: "a UTF-16 surrogate in text", frame: RawSocket.clientFrame([0x22, 0xED, 0xA0, 0x80, 0x22]),
            code: 1007, reason: .invalidUTF8),
        Case(
            name: "an overlong encoding in text", frame: RawSocket.clientFrame([0x22, 0xC0, 0xAF, 0x22]), code: 1007,
            reason: .invalidUTF8),
        Case(name: "a close with 4000 is echoed", frame: closeCode(4000, Array("bye".utf8)), code: 4000, reason: nil),
        Case(name: "a close without a code is answered with 1000", frame: close([]), code: 1000, reason: nil),
        Case(name: "a close with 1014 is echoed", frame: closeCode(1014), code: 1014, reason: nil),
    ]

    @Test(arguments: cases) func anInvalidFrameClosesTheConnectionWithItsCode(_ test: Case) async throws {
        let server = try await TestServer.startForEdgeTests()
        let token = try await server.login("alice")
        let socket = try await RawSocket.openWebSocket(port: server.port, token: token, readTimeout: .seconds(10))
        _ = try await socket.readText(containing: #""type":"caughtUp""#)
        try await socket.send(test.frame)
        let (_, close) = try await socket.readUntilClose()
        #expect(close?.code == test.code, "\(test.name)")
        if let reason = test.reason { #expect(close?.reason == reason.rawValue, "\(test.name)") }
        #expect(try await socket.readToEnd().ending == .closed, "\(test.name)")
        socket.close()
        // Another client is served as before.
        let other = try await RawSocket.openWebSocket(port: server.port, token: token)
        _ = try await other.readText(containing: #""type":"caughtUp""#)
        try await other.send(RawSocket.clientFrame(#"{"type":"ping","id":"p"}"#))
        _ = try await other.readText(containing: #""type":"pong""#)
        other.close()
        try await server.stop()
    }

    /// 60 malformed frames in one write: the answers to the first 50 arrive, then the close (4400).
    @Test func theAnswersToMalformedFramesArriveBeforeTheClose() async throws {
        let server = try await TestServer.startForEdgeTests()
        let token = try await server.login("alice")
        let socket = try await RawSocket.openWebSocket(port: server.port, token: token, readTimeout: .seconds(10))
        _ = try await socket.readText(containing: #""type":"caughtUp""#)
        try await socket.send(Array(repeating: RawSocket.clientFrame("not json"), count: 60).flatMap { $0 })
        let (texts, close) = try await socket.readUntilClose()
        #expect(texts.filter { $0.contains("ERR_MALFORMED_FRAME") }.count == 50)
        #expect(
            close?.code == WebSocketCloseCode.protocolViolation && close?.reason == ErrorCode.malformedFrame.rawValue)
        try await server.stop()
    }

    /// Pings from a client that never reads: the pongs wait in the connection's bounded queue like everything else,
    /// and the client is closed with 4008 instead of growing the server's memory.
    @Test func aClientThatPingsAndNeverReadsIsClosedAsASlowConsumer() async throws {
        // A long close timeout: the server waits for the client's close frame while the client is still sending.
        let server = try await TestServer.startForEdgeTests {
            $0.outboundQueueLimitBytes = 256 * 1024
            $0.heartbeatInterval = .seconds(3600)
            $0.closeTimeout = .seconds(60)
        }
        let token = try await server.login("alice")
        let socket = try await RawSocket.openWebSocket(
            port: server.port, token: token, receiveBuffer: 8 * 1024, readTimeout: .seconds(20)
        )
        _ = try await socket.readText(containing: #""type":"caughtUp""#)
        let ping = RawSocket.clientFrame([UInt8](repeating: 7, count: 125), opcode: 0x9)
        let batch = Array(repeating: ping, count: 1000).flatMap { $0 }
        // Twice as many pongs as the queue, NIO and the kernel's buffers hold together.
        let sent = (256 * 1024 + RawSocket.kernelSendBufferMaximum + 128 * 1024) / 127 * 2 / 1000 * 1000
        for _ in 0..<(sent / 1000) { try await socket.send(batch) }
        var pongs = 0
        var close: (code: UInt16, reason: String)?
        while close == nil {
            guard let frame = try? await socket.readFrame() else { break }
            if frame.opcode == 0xA { pongs += 1 }
            if frame.opcode == 0x8 {
                close = (
                    UInt16(frame.payload[0]) << 8 | UInt16(frame.payload[1]),
                    String(decoding: frame.payload.dropFirst(2), as: UTF8.self)
                )
            }
        }
        #expect(close?.code == WebSocketCloseCode.slowConsumer, "after \(sent) pings and \(pongs) pongs")
        #expect(pongs < sent)
        socket.close()
        let after = await server.snapshot { $0.webSockets == 0 }
        #expect(after.webSockets == 0 && after.liveConnections == 0, "\(after)")
        try await server.stop()
    }
}

/// The fragments of a message (RFC 6455 section 5.4), over a real socket: joined into one message, with control frames
/// between them; out of order, too many or too large, the connection closes.
@Suite(.timeLimit(.minutes(2))) struct WebSocketFragmentTests {
    static func fragment(_ text: String, opcode: UInt8, fin: Bool) -> [UInt8] {
        RawSocket.clientFrame(Array(text.utf8), opcode: opcode, fin: fin)
    }

    @Test func fragmentsAreJoinedWithControlFramesBetweenThem() async throws {
        let server = try await TestServer.startForEdgeTests()
        let token = try await server.login("alice")
        let socket = try await RawSocket.openWebSocket(port: server.port, token: token, readTimeout: .seconds(10))
        _ = try await socket.readText(containing: #""type":"caughtUp""#)
        try await socket.send(
            Self.fragment(#"{"type":"pi"#, opcode: 0x1, fin: false)
                + RawSocket.clientFrame(Array("mid".utf8), opcode: 0x9)
                + Self.fragment(#"ng","id":"fr"#, opcode: 0x0, fin: false)
                + Self.fragment(#"agments"}"#, opcode: 0x0, fin: true)
        )
        let pong = try await socket.readFrame()
        #expect(pong.opcode == 0xA && pong.text == "mid")
        #expect(try await socket.readText(containing: #""type":"pong""#).text.contains(#""id":"fragments""#))
        socket.close()
        try await server.stop()
    }

    @Test(arguments: [
        ("a continuation without a message", [fragment("x", opcode: 0x0, fin: true)], UInt16(1002)),
        (
            "a new message before the last ended",
            [fragment("{", opcode: 0x1, fin: false), fragment("{}", opcode: 0x1, fin: true)], UInt16(1002)
        ),
        (
            "more than 1,024 fragments",
            [fragment("", opcode: 0x1, fin: false)]
                + Array(repeating: fragment("", opcode: 0x0, fin: false), count: 1100),
            UInt16(1002)
        ),
        (
            "a message larger than the limit",
            [fragment(String(repeating: "a", count: 60_000), opcode: 0x1, fin: false)]
                + Array(repeating: fragment(String(repeating: "a", count: 60_000), opcode: 0x0, fin: false), count: 5),
            UInt16(1009)
        ),
    ])
    func fragmentsOutOfOrderOrTooManyOrTooLargeCloseTheConnection(name: String, frames: [[UInt8]], code: UInt16)
        async throws
    {
        let server = try await TestServer.startForEdgeTests()
        let token = try await server.login("alice")
        let socket = try await RawSocket.openWebSocket(port: server.port, token: token, readTimeout: .seconds(10))
        _ = try await socket.readText(containing: #""type":"caughtUp""#)
        try? await socket.send(frames.flatMap { $0 })
        let (_, close) = try await socket.readUntilClose()
        #expect(close?.code == code, "\(name)")
        socket.close()
        try await server.stop()
    }
}
