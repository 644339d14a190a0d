import Foundation
import ParleyTesting
import Testing

/// Upgrades on the wire, with a raw socket: the ones the server answers itself (``WebSocketUpgradeSniffer``), however
/// their bytes arrive, and the ones it leaves to NIO's pipeline, answered as before.
@Suite(.timeLimit(.minutes(2))) struct WebSocketUpgradeTests {
    static let connectFrame = RawSocket.clientFrame(Array(#"{"type":"connect","protocolVersion":1}"#.utf8))

    /// The next frame is `hello`.
    static func expectHello(_ socket: RawSocket) async throws {
        let frame = try await socket.readFrame()
        #expect(frame.opcode == 1 && String(decoding: frame.payload, as: UTF8.self).contains(#""type":"hello""#))
    }

    /// How a client's upgrade reaches the server.
    enum Arrival: String, CaseIterable, Sendable {
        /// The upgrade and the connect frame in one write: bytes follow the head before the server answered.
        case withTheConnectFrame
        /// One byte per write: the head arrives in pieces.
        case aByteAtATime
    }

    @Test(arguments: Arrival.allCases) func anUpgradeIsServedHoweverItsBytesArrive(_ arrival: Arrival) async throws {
        // Hundreds of one-byte writes may take longer than the default head deadline (10 s after the accept) on a
        // loaded machine running the whole suite; the deadline is not what this test is about.
        let server = try await TestServer.start { $0.edge.requestHeadTimeout = .seconds(100) }
        let token = try await server.login("alice")
        let socket = try await RawSocket.connected(port: server.port)
        let request = Array(RawSocket.upgradeRequest(port: server.port, token: token).utf8)
        switch arrival {
        case .withTheConnectFrame:
            try await socket.send(request + Self.connectFrame)
        case .aByteAtATime:
            for byte in request { try await socket.send([byte]) }
        }
        let head = try await socket.readHead()
        #expect(
            head.hasPrefix("HTTP/1.1 101 Switching Protocols\r\n") && head.contains("Sec-WebSocket-Accept: "),
            "\(head)")
        if arrival == .aByteAtATime { try await socket.send(Self.connectFrame) }
        try await Self.expectHello(socket)
        socket.close()
        try await server.stop()
    }

    @Test func requestsTheServerDoesNotUpgradeItselfAreAnsweredByNIOAsBefore() async throws {
        let server = try await TestServer.start()
        let token = try await server.login("alice")
        let request = RawSocket.upgradeRequest(port: server.port, token: token)

        // Another path: 400, and the connection closes.
        let other = try await RawSocket.connected(port: server.port)
        try await other.send(
            Array(RawSocket.upgradeRequest(port: server.port, token: token, path: "/v1/other").utf8))
        #expect(try await other.readHead().hasPrefix("HTTP/1.1 400 Bad Request\r\n"))
        other.close()

        // An unsupported version: 426 naming the one the server speaks (RFC 6455 section 4.4).
        let version = try await RawSocket.connected(port: server.port)
        try await version.send(Array(request.replacingOccurrences(of: "Version: 13", with: "Version: 12").utf8))
        let refusedVersion = try await version.readHead()
        #expect(refusedVersion.hasPrefix("HTTP/1.1 426 Upgrade Required\r\n"))
        #expect(refusedVersion.contains("Sec-WebSocket-Version: 13\r\n"))
        version.close()

        // No Connection header: RFC 6455 section 4.2.1 requires one, so 400.
        let noConnection = try await RawSocket.connected(port: server.port)
        try await noConnection.send(Array(request.replacingOccurrences(of: "Connection: Upgrade\r\n", with: "").utf8))
        #expect(try await noConnection.readHead().hasPrefix("HTTP/1.1 400 Bad Request\r\n"))
        noConnection.close()

        // A valid upgrade the sniffer leaves to NIO (a header value past ASCII): upgraded by NIO's upgrader.
        let upgraded = try await RawSocket.connected(port: server.port)
        try await upgraded.send(
            Array(
                request.replacingOccurrences(
                    of: "Connection: Upgrade", with: "Connection: keep-alive, UPGRADE\r\nX-Name: caf\u{E9}"
                ).utf8
            )
        )
        #expect(try await upgraded.readHead().hasPrefix("HTTP/1.1 101 Switching Protocols\r\n"))
        try await upgraded.send(Self.connectFrame)
        try await Self.expectHello(upgraded)
        upgraded.close()

        // A REST request on a connection of its own.
        let rest = try await RawSocket.connected(port: server.port)
        try await rest.send(Array("GET /health HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(try await rest.readHead().hasPrefix("HTTP/1.1 200 OK\r\n"))
        rest.close()
        try await server.stop()
    }
}
