import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A TCP client on a blocking POSIX socket, for tests that speak raw bytes to the server (malformed HTTP, invalid
/// WebSocket frames, clients that never read or leave half-way): the test decides exactly what is sent, when it reads,
/// and how the connection ends. Blocking calls run on a thread of their own; every read has a timeout, so a server
/// that never answers fails the test instead of hanging it.
public final class RawSocket: Sendable {
    public struct Frame: Sendable {
        public var opcode: UInt8
        public var payload: [UInt8]

        public var text: String { String(decoding: payload, as: UTF8.self) }
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// How a read of everything ended.
    public enum Ending: Sendable, Equatable {
        /// The server closed the connection (FIN).
        case closed
        /// The server reset it.
        case reset
        /// Nothing more arrived before the read timeout: the connection is still open.
        case stillOpen
    }

    /// An HTTP response.
    public struct Response: Sendable {
        public var status: Int
        public var head: String
        public var body: [UInt8]

        /// The value of a header (the first of that name, any case).
        public func header(_ name: String) -> String? {
            for line in head.split(separator: "\r\n").dropFirst() {
                let parts = line.split(separator: ":", maxSplits: 1)
                if parts.count == 2, parts[0].lowercased() == name.lowercased() {
                    return parts[1].trimmingCharacters(in: .whitespaces)
                }
            }
            return nil
        }

        /// The error code of a JSON error body.
        public var errorCode: String? {
            guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
                let error = object["error"] as? [String: Any]
            else { return nil }
            return error["code"] as? String
        }
    }

    public let descriptor: Int32
    private let closed = ClosedFlag()

    private init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Closes the socket (once).
    public func close() {
        if closed.set() { _ = systemClose(descriptor) }
    }

    /// Closes it with a reset (SO_LINGER 0): no FIN, what a crashed client or a dropped network looks like.
    public func reset() {
        var linger = linger(l_onoff: 1, l_linger: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
        close()
    }

    /// Sends FIN and keeps reading (a half-close).
    public func halfClose() {
        shutdown(descriptor, Int32(SHUT_WR))
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
    public static var kernelSendBufferMaximum: Int {
        guard let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/tcp_wmem", encoding: .utf8),
            let last = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).last, let value = Int(last)
        else { return 4 * 1024 * 1024 }
        return value
    }

    /// Connects to 127.0.0.1:`port`, upgrades to a WebSocket with the token, and sends `connect`.
    public static func openWebSocket(
        port: Int, token: String, receiveBuffer: Int32? = nil, readTimeout: Duration = .seconds(30)
    ) async throws -> RawSocket {
        let socket = try await connected(port: port, receiveBuffer: receiveBuffer, readTimeout: readTimeout)
        try await socket.send(Array(upgradeRequest(port: port, token: token).utf8))
        let head = try await socket.readHead()
        guard head.hasPrefix("HTTP/1.1 101") else { throw Failure(description: "upgrade refused: \(head)") }
        try await socket.send(clientFrame(Array(#"{"type":"connect","protocolVersion":1}"#.utf8)))
        return socket
    }

    /// The upgrade request of a client, with its token.
    public static func upgradeRequest(port: Int, token: String, path: String = "/v1/ws") -> String {
        "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: cmF3LXNvY2tldC1rZXktMQ==\r\nSec-WebSocket-Version: 13\r\n"
            + "Authorization: Bearer \(token)\r\n\r\n"
    }

    /// A TCP connection to 127.0.0.1:`port`, nothing sent yet. Reads give up after `readTimeout`.
    public static func connected(
        port: Int, receiveBuffer: Int32? = nil, readTimeout: Duration = .seconds(30)
    ) async throws -> RawSocket {
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
            let (seconds, attoseconds) = readTimeout.components
            var timeout = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
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
            return RawSocket(descriptor: descriptor)
        }
    }

    /// Sends bytes as they are.
    public func send(_ bytes: [UInt8]) async throws {
        try await Self.onThread { try self.write(bytes) }
    }

    public func send(_ text: String) async throws {
        try await send(Array(text.utf8))
    }

    /// Reads an HTTP response head, through its empty line (byte by byte: nothing after it is consumed).
    public func readHead() async throws -> String {
        try await Self.onThread { try self.head() }
    }

    private func head() throws -> String {
        var head: [UInt8] = []
        while !head.ends(with: [13, 10, 13, 10]) {
            var byte: UInt8 = 0
            guard recv(descriptor, &byte, 1, 0) == 1 else {
                throw Failure(description: "no response head (got \(String(decoding: head, as: UTF8.self)))")
            }
            head.append(byte)
        }
        return String(decoding: head, as: UTF8.self)
    }

    /// Reads an HTTP response: its head and the body its `Content-Length` announces.
    public func readResponse() async throws -> Response {
        try await Self.onThread {
            let head = try self.head()
            guard head.hasPrefix("HTTP/1."), let status = Int(head.dropFirst(9).prefix(3)) else {
                throw Failure(description: "not an HTTP response: \(head)")
            }
            var response = Response(status: status, head: head, body: [])
            let length = response.header("content-length").flatMap { Int($0) } ?? 0
            response.body = try self.read(length)
            return response
        }
    }

    /// Reads whatever arrives until the server closes the connection or nothing arrives for the read timeout.
    public func readToEnd() async throws -> (bytes: [UInt8], ending: Ending) {
        try await Self.onThread {
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let got = buffer.withUnsafeMutableBytes { recv(self.descriptor, $0.baseAddress, $0.count, 0) }
                if got > 0 {
                    bytes += buffer[..<got]
                } else if got == 0 {
                    return (bytes, .closed)
                } else if errno == ECONNRESET {
                    return (bytes, .reset)
                } else {
                    return (bytes, .stillOpen)
                }
            }
        }
    }

    /// A final client frame (RFC 6455 requires clients to mask; `masked: false` breaks that rule on purpose).
    public static func clientFrame(
        _ payload: [UInt8], opcode: UInt8 = 0x1, fin: Bool = true, reservedBits: UInt8 = 0, masked: Bool = true
    ) -> [UInt8] {
        var frame: [UInt8] = [(fin ? 0x80 : 0) | (reservedBits << 4) | opcode]
        let maskBit: UInt8 = masked ? 0x80 : 0
        switch payload.count {
        case ..<126:
            frame.append(maskBit | UInt8(payload.count))
        case ..<65536:
            frame += [maskBit | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        default:
            frame.append(maskBit | 127)
            frame += (0..<8).reversed().map { UInt8((payload.count >> ($0 * 8)) & 0xFF) }
        }
        guard masked else { return frame + payload }
        let mask: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]
        return frame + mask + payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
    }

    /// A text frame of a JSON client frame.
    public static func clientFrame(_ text: String) -> [UInt8] {
        clientFrame(Array(text.utf8))
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

    public func readFrame() async throws -> Frame {
        try await Self.onThread { try self.nextFrame() }
    }

    /// Reads frames until a text frame that contains `text`; returns it.
    public func readText(containing text: String) async throws -> Frame {
        while true {
            let frame = try await readFrame()
            if frame.opcode == 0x1, frame.text.contains(text) { return frame }
            if frame.opcode == 0x8 { throw Failure(description: "closed while waiting for \(text): \(frame.text)") }
        }
    }

    /// Reads every frame until the server's close frame; returns the text frames before it and the close (nil when
    /// the connection ended without one).
    public func readUntilClose() async throws -> (texts: [String], close: (code: UInt16, reason: String)?) {
        try await Self.onThread {
            var texts: [String] = []
            while true {
                let frame: Frame
                do {
                    frame = try self.nextFrame()
                } catch {
                    return (texts, nil)
                }
                switch frame.opcode {
                case 0x8:
                    let code = frame.payload.count >= 2 ? UInt16(frame.payload[0]) << 8 | UInt16(frame.payload[1]) : 0
                    return (texts, (code, String(decoding: frame.payload.dropFirst(2), as: UTF8.self)))
                case 0x1, 0x0:
                    texts.append(frame.text)
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
