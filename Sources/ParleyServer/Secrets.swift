import Crypto
import Foundation
import ParleyProtocol

/// Random identifiers and secrets, and the hashes under which secrets are stored.
enum Secrets {
    private static let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789".utf8)
    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// `prefix` followed by `length` random lowercase letters and digits (~5.2 bits each).
    static func randomID(prefix: String, length: Int = 20) -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes = [UInt8]()
        bytes.reserveCapacity(length)
        for _ in 0..<length { bytes.append(alphabet.randomElement(using: &generator)!) }
        return prefix + String(decoding: bytes, as: UTF8.self)
    }

    /// `prefix` followed by `byteCount` random bytes in hex.
    static func randomHex(prefix: String = "", byteCount: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes = [UInt8]()
        bytes.reserveCapacity(byteCount * 2)
        for _ in 0..<byteCount {
            let byte = UInt8.random(in: .min ... .max, using: &generator)
            bytes.append(hexDigits[Int(byte >> 4)])
            bytes.append(hexDigits[Int(byte & 0x0f)])
        }
        return prefix + String(decoding: bytes, as: UTF8.self)
    }

    /// A new auth token: 32 random bytes.
    static func newAuthToken() -> String { randomHex(prefix: "pt_", byteCount: 32) }

    /// SHA-256 of a secret; what the store keeps.
    static func hash(_ secret: String) -> [UInt8] {
        Array(SHA256.hash(data: Data(secret.utf8)))
    }
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
        let elapsed = timeline.now().components
        return epochAtStart + elapsed.seconds * 1000 + elapsed.attoseconds / 1_000_000_000_000_000
    }
}
