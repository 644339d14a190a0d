import Crypto
import Foundation
import NIOConcurrencyHelpers
import ParleyProtocol

#if canImport(Glibc)
    import Glibc
#endif

/// Random identifiers and secrets, and the hashes under which secrets are stored.
enum Secrets {
    private static let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789".utf8)
    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// `prefix` followed by `length` random lowercase letters and digits (~5.2 bits each).
    static func randomID(prefix: String, length: Int = 20) -> String {
        var characters = [UInt8]()
        characters.reserveCapacity(length)
        while characters.count < length {
            // 252 = 7 × 36: bytes past it are dropped, so that every character is equally likely.
            for byte in randomBytes(length) where byte < 252 && characters.count < length {
                characters.append(alphabet[Int(byte % 36)])
            }
        }
        return prefix + String(decoding: characters, as: UTF8.self)
    }

    /// `prefix` followed by `byteCount` random bytes in hex.
    static func randomHex(prefix: String = "", byteCount: Int) -> String {
        prefix + hex(randomBytes(byteCount))
    }

    /// Bytes as lowercase hex (digests, signatures, ids).
    static func hex<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        var characters = [UInt8]()
        characters.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            characters.append(hexDigits[Int(byte >> 4)])
            characters.append(hexDigits[Int(byte & 0x0f)])
        }
        return String(decoding: characters, as: UTF8.self)
    }

    /// `count` bytes from the kernel's CSPRNG, taken from a buffer refilled 4 KiB at a time: an id costs no system
    /// call most of the time, where `SystemRandomNumberGenerator` (and swift-crypto on Linux) makes one per 8 bytes.
    static func randomBytes(_ count: Int) -> [UInt8] {
        randomPool.withLockedValue { $0.take(count) }
    }

    private static let randomPool = NIOLockedValueBox(RandomPool())

    /// A new auth token: 32 random bytes.
    static func newAuthToken() -> String { randomHex(prefix: "pt_", byteCount: 32) }

    /// SHA-256 of a secret; what the store keeps.
    static func hash(_ secret: String) -> [UInt8] {
        Array(SHA256.hash(data: Data(secret.utf8)))
    }
}

/// Bytes of the kernel's CSPRNG, read in blocks; every byte is handed out once.
struct RandomPool {
    private var buffer = [UInt8](repeating: 0, count: 4096)
    private var next = 4096

    mutating func take(_ count: Int) -> [UInt8] {
        guard count <= buffer.count else { return Self.fill(count) }
        if next + count > buffer.count {
            buffer = Self.fill(buffer.count)
            next = 0
        }
        defer { next += count }
        return Array(buffer[next..<next + count])
    }

    private static func fill(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { raw in
            #if canImport(Glibc)
                var filled = 0
                while filled < raw.count {
                    let got = read(urandom, raw.baseAddress! + filled, raw.count - filled)
                    if got > 0 { filled += got } else if errno != EINTR { fatalError("/dev/urandom: errno \(errno)") }
                }
            #else
                arc4random_buf(raw.baseAddress!, raw.count)
            #endif
        }
        return bytes
    }

    #if canImport(Glibc)
        /// The kernel's CSPRNG, opened once (reads from it never block once the system has booted).
        private static let urandom: Int32 = {
            let descriptor = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
            precondition(descriptor >= 0, "/dev/urandom cannot be opened: errno \(errno)")
            return descriptor
        }()
    #endif
}

/// Current wall-clock time as Unix epoch milliseconds (only for what happens outside a running server).
func wallClockMilliseconds() -> Int64 {
    Int64((Date().timeIntervalSince1970 * 1000).rounded())
}

/// The server's time: a ``Timeline`` on the injected clock for its timers, and epoch timestamps derived from it
/// (the wall clock at start plus the time elapsed on the timeline), so that a test's virtual clock moves both.
struct ServerClock: Sendable {
    let timeline: Timeline
    let epochAtStart: Int64

    init(timeline: Timeline, epochAtStart: Int64 = wallClockMilliseconds()) {
        self.timeline = timeline
        self.epochAtStart = epochAtStart
    }

    /// Now, as Unix epoch milliseconds.
    func epochMilliseconds() -> Int64 {
        epochAtStart + timeline.now().wholeMilliseconds
    }
}
