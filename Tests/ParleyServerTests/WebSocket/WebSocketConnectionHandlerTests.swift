import Logging
import NIOCore
import NIOEmbedded
import NIOWebSocket
import ParleyProtocol
import ParleyStore
import ParleyStoreSQLite
import ParleyTesting
import Testing

@testable import ParleyServer

/// The timing rules of a server WebSocket, on a test event loop whose time moves only when the test says so
/// (docs/PROTOCOL.md: the heartbeat, the handshake timeout, the close handshake).
@Suite struct WebSocketConnectionHandlerTests {
    /// A handler on a test channel, with a gateway over a real SQLite store in a temporary directory.
    struct Rig {
        let loop: NIOAsyncTestingEventLoop
        let channel: NIOAsyncTestingChannel
        let gateway: WebSocketGateway
        let directory: TemporaryDirectory

        /// With `token`, the store has an app with alice and that token of hers.
        init(token: String? = nil, _ configure: (inout ServerConfiguration) -> Void = { _ in }) async throws {
            var configuration = ServerConfiguration()
            configure(&configuration)
            directory = try TemporaryDirectory(prefix: "parley-ws-handler")
            let store = try openSQLiteStore(in: directory.path)
            if let token {
                try await store.insertApp(
                    AppRecord(id: "app1", name: "A", authKeyHash: [1], restAPIKeyHash: [2], createdAt: 1))
                try await store.insertUser(appId: "app1", User(uid: "alice", name: "Alice", createdAt: 1, updatedAt: 1))
                try await store.insertToken(
                    TokenRecord(
                        id: "t1", hash: try Authenticator.hash(of: token), appId: "app1", uid: "alice", createdAt: 1)
                )
            }
            let logger = Logger(label: "test")
            let time = ServerClock(timeline: Timeline(ContinuousClock()))
            let hub = Hub()
            let relay = Relay(hub: hub, cluster: nil)
            let typing = TypingTracker(store: store, relay: relay, timeout: .seconds(5), time: time, logger: logger)
            let presence = PresenceTracker(
                store: store, relay: relay, cluster: nil, grace: .seconds(5), time: time, logger: logger)
            let unread = UnreadNotifier(store: store, hub: hub, interval: .seconds(1), time: time, logger: logger)
            let publisher = EventPublisher(
                hub: hub, typing: typing, unread: unread, relay: relay, cluster: nil, store: nil,
                positions: ConversationPositions(), logger: logger)
            gateway = WebSocketGateway(
                authenticator: Authenticator(store: store, time: time), store: store, hub: hub,
                writer: CommandWriter(store: store, publisher: publisher, maxBatch: 16, logger: logger), typing: typing,
                presence: presence, sockets: SocketRegistry(), expiry: TokenExpiry(time: time),
                admission: AdmissionGate(limit: 16), time: time,
                configuration: configuration, logger: logger
            )
            loop = NIOAsyncTestingEventLoop()
            channel = NIOAsyncTestingChannel(loop: loop)
            try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).get()
            let raw = RawFrameWriter()
            try await channel.pipeline.addHandler(raw).get()
            try await channel.pipeline.addHandler(
                WebSocketConnectionHandler(gateway: gateway, token: token, raw: raw, logger: logger)
            ).get()
        }

        /// The next frame the server wrote, if any (the server writes complete frames, header included).
        func written() async throws -> WebSocketFrame? {
            guard var bytes = try await channel.readOutbound(as: ByteBuffer.self) else { return nil }
            guard let first = bytes.readInteger(as: UInt8.self), let second = bytes.readInteger(as: UInt8.self),
                let opcode = WebSocketOpcode(encodedWebSocketOpcode: first & 0x0F), first & 0x80 != 0,
                second & 0x80 == 0
            else { throw FrameError.notAFinalServerFrame }
            var length = Int(second)
            if length == 126 { length = Int(bytes.readInteger(as: UInt16.self) ?? 0) }
            if length == 127 { length = Int(bytes.readInteger(as: UInt64.self) ?? 0) }
            guard bytes.readableBytes == length else { throw FrameError.wrongLength }
            return WebSocketFrame(fin: true, opcode: opcode, data: bytes)
        }

        enum FrameError: Error {
            case notAFinalServerFrame
            case wrongLength
        }

        func send(_ opcode: WebSocketOpcode, _ data: ByteBuffer = ByteBuffer()) async throws {
            try await channel.writeInbound(WebSocketFrame(fin: true, opcode: opcode, data: data))
        }

        func finish() async throws {
            _ = try? await channel.finish(acceptAlreadyClosed: true)
            directory.remove()
        }
    }

    static func close(_ frame: WebSocketFrame?) -> (code: UInt16, reason: String)? {
        guard var data = frame?.unmaskedData, frame?.opcode == .connectionClose,
            let code = data.readInteger(as: UInt16.self)
        else { return nil }
        return (code, data.readString(length: data.readableBytes) ?? "")
    }

    @Test func theServerPingsEveryHeartbeatAndClosesWith1001WhenAPingIsNotAnsweredByTheNext() async throws {
        let rig = try await Rig {
            $0.heartbeatInterval = .seconds(30)
            $0.handshakeTimeout = .seconds(3600)
        }
        await rig.loop.advanceTime(by: .seconds(29))
        #expect(try await rig.written() == nil)
        await rig.loop.advanceTime(by: .seconds(1))
        let first = try #require(try await rig.written())
        #expect(first.opcode == .ping)
        try await rig.send(.pong, first.unmaskedData)

        await rig.loop.advanceTime(by: .seconds(30))
        let second = try #require(try await rig.written())
        #expect(second.opcode == .ping && second.unmaskedData != first.unmaskedData)
        // No answer: at the next beat the server gives up on the client.
        await rig.loop.advanceTime(by: .seconds(30))
        let close = Self.close(try await rig.written())
        #expect(close?.code == WebSocketCloseCode.goingAway && close?.reason == ErrorCode.heartbeatTimeout.rawValue)
        #expect(rig.channel.isActive)
        // It waits for the client's close frame at most the close timeout, then drops the socket.
        await rig.loop.advanceTime(by: .seconds(5))
        #expect(!rig.channel.isActive)
        try await rig.finish()
    }

    @Test func aClientThatSaysNothingIsClosedWith4400AfterTheHandshakeTimeout() async throws {
        let rig = try await Rig { $0.handshakeTimeout = .seconds(10) }
        await rig.loop.advanceTime(by: .milliseconds(9999))
        #expect(try await rig.written() == nil)
        await rig.loop.advanceTime(by: .milliseconds(1))
        let close = Self.close(try await rig.written())
        #expect(
            close?.code == WebSocketCloseCode.protocolViolation && close?.reason == ErrorCode.handshakeFailed.rawValue)
        // The client answers the close: the socket closes at once.
        var answer = ByteBuffer()
        answer.writeInteger(WebSocketCloseCode.protocolViolation)
        try await rig.send(.connectionClose, answer)
        #expect(!rig.channel.isActive)
        try await rig.finish()
    }

    /// The handshake's timeout and the heartbeat are never cancelled (a cancel searches the loop's whole timer heap):
    /// the timeout fires on a live connection and changes nothing, and a heartbeat that fires after the socket closed
    /// writes nothing.
    @Test func timersThatFireAfterTheirMomentChangeNothing() async throws {
        let rig = try await Rig(token: "tok_alice") {
            $0.handshakeTimeout = .seconds(10)
            $0.heartbeatInterval = .seconds(30)
        }
        try await rig.send(.text, ByteBuffer(string: #"{"type":"connect","protocolVersion":1}"#))
        var frames: [String] = []
        while let frame = try await rig.written() { frames.append(String(buffer: frame.unmaskedData)) }
        #expect(frames.count == 2 && frames.first?.contains(#""type":"hello""#) == true)
        #expect(frames.last?.contains(#""type":"caughtUp""#) == true)
        await rig.loop.advanceTime(by: .seconds(11))
        #expect(try await rig.written() == nil)
        #expect(rig.channel.isActive)
        await rig.loop.advanceTime(by: .seconds(19))
        #expect(try await rig.written()?.opcode == .ping)
        var close = ByteBuffer()
        close.writeInteger(UInt16(1000))
        try await rig.send(.connectionClose, close)
        #expect(Self.close(try await rig.written())?.code == 1000)
        #expect(!rig.channel.isActive)
        await rig.loop.advanceTime(by: .seconds(60))
        #expect(try await rig.written() == nil)
        try await rig.finish()
    }

    @Test func aClientsCloseIsAnsweredWithItsCodeAndTheSocketCloses() async throws {
        let rig = try await Rig()
        var close = ByteBuffer()
        close.writeInteger(UInt16(1000))
        try await rig.send(.connectionClose, close)
        let answer = Self.close(try await rig.written())
        #expect(answer?.code == 1000)
        #expect(!rig.channel.isActive)
        try await rig.finish()
    }

    @Test func aWebSocketProtocolErrorClosesWith1002AndAnOversizedMessageWith1009WithoutWaiting() async throws {
        for (error, code, reason) in [
            (
                NIOWebSocketError.invalidFrameLength as any Error, WebSocketCloseCode.messageTooBig,
                ErrorCode.messageTooLarge
            ),
            (
                WebSocketProtocolViolation(code: WebSocketCloseCode.messageTooBig, detail: "too large"),
                WebSocketCloseCode.messageTooBig, .messageTooLarge
            ),
            (
                WebSocketProtocolViolation(code: WebSocketCloseCode.protocolError, detail: "reserved opcode"),
                WebSocketCloseCode.protocolError, .webSocketProtocolError
            ),
            (NIOWebSocketError.fragmentedControlFrame, WebSocketCloseCode.protocolError, .webSocketProtocolError),
        ] {
            let rig = try await Rig()
            rig.channel.pipeline.fireErrorCaught(error)
            let close = Self.close(try await rig.written())
            #expect(close?.code == code && close?.reason == reason.rawValue)
            await rig.loop.run()
            #expect(!rig.channel.isActive)
            try await rig.finish()
        }
    }

    @Test func aClientsPingIsAnsweredWithItsPayload() async throws {
        let rig = try await Rig()
        try await rig.send(.ping, ByteBuffer(string: "are you there"))
        let pong = try #require(try await rig.written())
        #expect(pong.opcode == .pong && pong.unmaskedData == ByteBuffer(string: "are you there"))
        try await rig.finish()
    }
}
