import Foundation

/// UUIDs that sort by when they were made: version 7 of RFC 9562, 48 bits of Unix milliseconds then 74 random bits.
///
/// The SDK makes each message's `clientMessageId` with it. The server keeps an index of client message ids; ids made
/// close in time sit side by side in it, so a new one lands where the last ones did instead of on a page of its own
/// (docs/PROTOCOL.md, "send"). Any other unique string is accepted as well, at that page's cost.
public enum TimeOrderedUUID {
    /// A new version-7 UUID for `milliseconds` since 1970 (now by default).
    public static func make(milliseconds: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) -> UUID {
        var random = SystemRandomNumberGenerator()
        return make(milliseconds: milliseconds, using: &random)
    }

    /// A new version-7 UUID for `milliseconds` since 1970, its random bits from `generator`.
    public static func make(milliseconds: Int64, using generator: inout some RandomNumberGenerator) -> UUID {
        let time = UInt64(clamping: max(0, milliseconds)) & 0xFFFF_FFFF_FFFF
        let high = generator.next() as UInt64
        let low = generator.next() as UInt64
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in 0..<6 { bytes[index] = UInt8(truncatingIfNeeded: time >> (40 - 8 * UInt64(index))) }
        for index in 6..<8 { bytes[index] = UInt8(truncatingIfNeeded: high >> (8 * UInt64(index))) }
        for index in 8..<16 { bytes[index] = UInt8(truncatingIfNeeded: low >> (8 * UInt64(index - 8))) }
        bytes[6] = 0x70 | (bytes[6] & 0x0F)  // version 7
        bytes[8] = 0x80 | (bytes[8] & 0x3F)  // variant 0b10
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9],
                bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            )
        )
    }

    /// The milliseconds since 1970 a version-7 UUID was made at; nil for another version.
    public static func milliseconds(of uuid: UUID) -> Int64? {
        let bytes = uuid.uuid
        guard bytes.6 >> 4 == 7 else { return nil }
        let time = [bytes.0, bytes.1, bytes.2, bytes.3, bytes.4, bytes.5].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Int64(time)
    }
}
