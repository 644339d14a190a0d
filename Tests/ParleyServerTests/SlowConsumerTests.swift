import Foundation
import ParleyProtocol
import ParleyServer
import ParleyTesting
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// docs/PROTOCOL.md, Limits: "events waiting for one connection: 4 MiB, close 4008 ERR_SLOW_CONSUMER". A client
/// that stops reading must not make the server hold its events without bound.
@Suite(.timeLimit(.minutes(3))) struct SlowConsumerTests {
    @Test func aClientThatDoesNotReadIsClosedWith4008AndWhatTheServerHeldForItStayedBounded() async throws {
        let limit = 512 * 1024
        // Bob's raw client stops reading, so it stops answering pings too: with the default heartbeat, a slow
        // machine (the sends below take long under CPU load) can reach the ping timeout (1001) before the queue
        // fills. An hour-long heartbeat leaves the slow-consumer rule as the only thing that can close him.
        let server = try await TestServer.start {
            $0.outboundQueueLimitBytes = limit
            $0.heartbeatInterval = .seconds(3600)
        }
        let alice = try await server.login("alice")
        let bob = try await server.login("bob")
        let conversation = try await server.createConversation(token: alice, type: .direct, with: ["bob"])

        // Bob connects with a small receive buffer, reads his hello, then reads nothing more.
        let slow = try await RawWebSocket.open(port: server.port, token: bob, receiveBuffer: 16 * 1024)
        let hello = try await slow.readFrame()
        #expect(hello.opcode == 0x1 && String(decoding: hello.payload, as: UTF8.self).contains(#""type":"hello""#))

        // Alice sends far more than the queue limit plus everything the kernel and NIO can buffer on the way.
        // Each send waits for its ack: the server keeps serving Alice while Bob is stuck.
        let messageBytes = 60 * 1024
        let inFlightCeiling = RawWebSocket.kernelSendBufferMaximum + 2 * 16 * 1024 + 256 * 1024 + messageBytes
        let messages = (limit + inFlightCeiling) * 2 / messageBytes + 1
        let (sender, _) = try await connect(server, token: alice)
        let text = String(repeating: "x", count: messageBytes - 16)
        for number in 0..<messages {
            try await sender.send(
                .send(SendFrame(ref: "\(number)", conversationId: conversation.id, parts: [.text("\(number):" + text)]))
            )
            let answer = try await sender.nextFrame { frame in
                switch frame {
                case .ack, .error: true
                default: false
                }
            }
            guard case .ack = answer else {
                Issue.record("send \(number) was refused: \(answer)")
                return
            }
        }

        // Now Bob reads what reached him: some of the events, then the server's close frame.
        let (received, close) = try await slow.readUntilClose()
        // A client that got its close leaves (the server waits for that before it lets the connection go).
        slow.close()
        #expect(close?.code == WebSocketCloseCode.slowConsumer)
        #expect(close?.reason == ErrorCode.slowConsumer.rawValue)
        let sentBytes = messages * messageBytes
        // What the server held for Bob: at most its queue limit, plus what was already handed to NIO and the kernel.
        #expect(received <= limit + inFlightCeiling, "Bob received \(received) of \(sentBytes) bytes")
        #expect(received < sentBytes)
        await sender.close()
        try await server.stop()
    }

    func connect(_ server: TestServer, token: String) async throws -> (WebSocketProbe, HelloFrame) {
        let probe = WebSocketProbe(url: server.webSocketURL, token: token)
        guard case .hello(let hello) = try await probe.nextFrame() else { throw ProbeError.connectionEnded(code: nil) }
        return (probe, hello)
    }
}

/// A WebSocket client on a blocking POSIX socket, so that a test decides exactly when (and whether) it reads.
/// Blocking calls run on a thread of their own; every read has a timeout.
final class RawWebSocket: Sendable {
    struct Frame {
        var opcode: UInt8
        var payload: [UInt8]
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    let descriptor: Int32
    private let closed = ClosedFlag()

    private init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Closes the socket (once).
    func close() {
        if closed.set() { _ = systemClose(descriptor) }
    }

    private final class ClosedFlag: @unchecked Sendable {
        // Guarded by `lock`.
        private var closed = false
        private let lock = NSLock()

        /// Marks it closed; true the first time.
        func set() -> Bool {
            lock.withLock {
                defer { closed = true }
                return !closed
            }
        }
    }

    /// The kernel's largest send buffer (`net.ipv4.tcp_wmem`), what the server's socket may hold for a client.
    static var kernelSendBufferMaximum: Int {
        guard let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/tcp_wmem", encoding: .utf8),
            let last = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).last, let value = Int(last)
        else { return 4 * 1024 * 1024 }
        return value
    }

    /// Connects to 127.0.0.1:`port`, upgrades to a WebSocket with the token, and sends `connect`.
    static func open(port: Int, token: String, receiveBuffer: Int32) async throws -> RawWebSocket {
        let socket = try await connected(port: port, receiveBuffer: receiveBuffer)
        try await socket.send(Array(upgradeRequest(port: port, token: token).utf8))
        let head = try await socket.readHead()
        guard head.hasPrefix("HTTP/1.1 101") else { throw Failure(description: "upgrade refused: \(head)") }
        try await socket.send(clientFrame(Array(#"{"type":"connect","protocolVersion":1}"#.utf8)))
        return socket
    }

    /// The upgrade request of a client, with its token.
    static func upgradeRequest(port: Int, token: String, path: String = "/v1/ws") -> String {
        "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: c2xvdy1jb25zdW1lci10ZXN0\r\nSec-WebSocket-Version: 13\r\n"
            + "Authorization: Bearer \(token)\r\n\r\n"
    }

    /// A TCP connection to 127.0.0.1:`port`, nothing sent yet.
    static func connected(port: Int, receiveBuffer: Int32? = nil) async throws -> RawWebSocket {
        try await onThread {
            #if canImport(Glibc)
                let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            #else
                let descriptor = socket(AF_INET, SOCK_STREAM, 0)
            #endif
            guard descriptor >= 0 else { throw Failure(description: "socket() failed") }
            if var size = receiveBuffer {
                setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            }
            var timeout = timeval(tv_sec: 30, tv_usec: 0)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    systemConnect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard connected == 0 else {
                _ = systemClose(descriptor)
                throw Failure(description: "connect() failed")
            }
            return RawWebSocket(descriptor: descriptor)
        }
    }

    /// Sends bytes as they are.
    func send(_ bytes: [UInt8]) async throws {
        try await Self.onThread { try self.write(bytes) }
    }

    /// Reads an HTTP response head, through its empty line (byte by byte: nothing after it is consumed).
    func readHead() async throws -> String {
        try await Self.onThread {
            var head: [UInt8] = []
            while !head.ends(with: [13, 10, 13, 10]) {
                var byte: UInt8 = 0
                guard recv(self.descriptor, &byte, 1, 0) == 1 else {
                    throw Failure(description: "no response head (got \(String(decoding: head, as: UTF8.self)))")
                }
                head.append(byte)
            }
            return String(decoding: head, as: UTF8.self)
        }
    }

    /// A final, masked text frame (RFC 6455 requires clients to mask).
    static func clientFrame(_ payload: [UInt8]) -> [UInt8] {
        precondition(payload.count < 126)
        let mask: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]
        return [0x81, 0x80 | UInt8(payload.count)] + mask
            + payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
    }

    private func write(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let written = bytes[sent...].withUnsafeBytes { systemSend(descriptor, $0.baseAddress, $0.count, 0) }
            guard written > 0 else { throw Failure(description: "send() failed") }
            sent += written
        }
    }

    private func read(_ count: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = bytes[filled...].withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            guard got > 0 else {
                throw Failure(description: got == 0 ? "connection closed" : "recv() timed out or failed")
            }
            filled += got
        }
        return bytes
    }

    /// The next server frame (servers never mask).
    private func nextFrame() throws -> Frame {
        let header = try read(2)
        var length = Int(header[1] & 0x7F)
        if length == 126 {
            length = try read(2).reduce(0) { $0 << 8 | Int($1) }
        } else if length == 127 {
            length = try read(8).reduce(0) { $0 << 8 | Int($1) }
        }
        return Frame(opcode: header[0] & 0x0F, payload: try read(length))
    }

    func readFrame() async throws -> Frame {
        try await Self.onThread { try self.nextFrame() }
    }

    /// Reads every frame until the server's close frame; returns the text bytes before it and the close.
    func readUntilClose() async throws -> (textBytes: Int, close: (code: UInt16, reason: String)?) {
        try await Self.onThread {
            var textBytes = 0
            while true {
                let frame: Frame
                do {
                    frame = try self.nextFrame()
                } catch {
                    return (textBytes, nil)
                }
                switch frame.opcode {
                case 0x8:
                    let code = frame.payload.count >= 2 ? UInt16(frame.payload[0]) << 8 | UInt16(frame.payload[1]) : 0
                    return (textBytes, (code, String(decoding: frame.payload.dropFirst(2), as: UTF8.self)))
                case 0x1, 0x0:
                    textBytes += frame.payload.count
                default:
                    continue
                }
            }
        }
    }

    deinit {
        close()
    }

    private static func onThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try work() }) }.start()
        }
    }
}

#if canImport(Glibc)
    private let systemConnect = Glibc.connect
    private let systemClose = Glibc.close
    private let systemSend = Glibc.send
#else
    private let systemConnect = Darwin.connect
    private let systemClose = Darwin.close
    private let systemSend = Darwin.send
#endif

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: [UInt8]) -> Bool {
        count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
    }
}
