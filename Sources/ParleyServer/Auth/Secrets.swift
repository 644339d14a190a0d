import Crypto
import Foundation
import NIOConcurrencyHelpers
import ParleyProtocol

#if canImport(Glibc)
    import Glibc
#endif

/// Random identifiers and secrets, and the hashes under which secrets are stored.
enum Secrets {
    /// Compares two digests in time that does not depend on where they differ.
    static func constantTimeEquals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        guard lhs.count == rhs.count else { return false }
        var difference: UInt8 = 0
        for (left, right) in zip(lhs, rhs) { difference |= left ^ right }
        return difference == 0
    }

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

    /// A new message's id at `milliseconds` since 1970: `m_`, the time in 9 base-36 digits (until the year 5138), then
    /// 11 random letters and digits (~57 bits). Ids made later sort after earlier ones (the time's digits are in ASCII
    /// order), so the store's message-id index takes each new one at its end, not on a page of its own.
    static func messageID(at milliseconds: Int64) -> String {
        "m_" + orderedBase36(UInt64(clamping: max(0, milliseconds)), width: 9) + randomID(prefix: "", length: 11)
    }

    /// `value` in `width` base-36 digits (`0-9a-z`, most significant first, leading zeros kept; higher digits dropped):
    /// strings of one width sort in ASCII order as their values do.
    static func orderedBase36(_ value: UInt64, width: Int) -> String {
        var value = value
        var digits = [UInt8](repeating: orderedDigits[0], count: width)
        for index in digits.indices.reversed() {
            digits[index] = orderedDigits[Int(value % 36)]
            value /= 36
        }
        return String(decoding: digits, as: UTF8.self)
    }

    private static let orderedDigits = Array("0123456789abcdefghijklmnopqrstuvwxyz".utf8)

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

/// Current wall-clock time as Unix epoch milliseconds (only for what happens outside a running server).
func wallClockMilliseconds() -> Int64 {
    Int64((Date().timeIntervalSince1970 * 1000).rounded())
}
