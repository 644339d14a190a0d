import NIOCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The text of a bench message carries its number and its send time: `pb:<run>:<number>:<monotonic ns>:<padding>`.
/// Receivers find it in the raw frame bytes (no JSON decoding on the hot path of the client).
struct Marker: Sendable {
    let prefix: [UInt8]

    init(runID: String) {
        prefix = Array("pb:\(runID):".utf8)
    }

    func text(number: Int, sentAt: UInt64, padding: Int) -> String {
        let head = "pb:" + String(decoding: prefix.dropFirst(3), as: UTF8.self) + "\(number):\(sentAt):"
        return padding > 0 ? head + String(repeating: "x", count: padding) : head
    }

    /// The number and send time in a frame, if it carries a bench message.
    func find(in frame: ByteBuffer) -> (number: Int, sentAt: UInt64)? {
        frame.withUnsafeReadableBytes { bytes -> (Int, UInt64)? in
            guard let found = ByteSearch.first(prefix, in: bytes) else { return nil }
            var offset = found + prefix.count
            func number() -> UInt64? {
                var value: UInt64 = 0
                var digits = 0
                while offset < bytes.count, bytes[offset] >= 48, bytes[offset] <= 57 {
                    value = value &* 10 &+ UInt64(bytes[offset] - 48)
                    offset += 1
                    digits += 1
                }
                guard digits > 0, offset < bytes.count, bytes[offset] == 58 else { return nil }
                offset += 1
                return value
            }
            guard let index = number(), let sentAt = number() else { return nil }
            return (Int(index), sentAt)
        }
    }
}

enum FrameKind {
    private static let eventPrefix = Array(#"{"type":"event""#.utf8)
    private static let ackTag = Array(#""type":"ack""#.utf8)
    private static let errorTag = Array(#""type":"error""#.utf8)

    /// Event frames start with `{"type":"event"` (the server wraps the stored event JSON without re-encoding).
    static func isEvent(_ frame: ByteBuffer) -> Bool {
        frame.readableBytesView.starts(with: eventPrefix)
    }

    static func isAck(_ frame: ByteBuffer) -> Bool {
        !isEvent(frame) && contains(frame, ackTag)
    }

    /// An `error` frame (a refused command). Other frames that are neither events nor acks (`caughtUp` after
    /// `hello`, `pong`, `resync`) are not answers to a send.
    static func isError(_ frame: ByteBuffer) -> Bool {
        !isEvent(frame) && contains(frame, errorTag)
    }

    static func contains(_ frame: ByteBuffer, _ needle: [UInt8]) -> Bool {
        frame.withUnsafeReadableBytes { ByteSearch.first(needle, in: $0) != nil }
    }
}

enum ByteSearch {
    /// The offset of the first occurrence of `needle` in `haystack` (memchr for its first byte, then memcmp).
    static func first(_ needle: [UInt8], in haystack: UnsafeRawBufferPointer) -> Int? {
        guard let base = haystack.baseAddress, !needle.isEmpty, haystack.count >= needle.count else { return nil }
        return needle.withUnsafeBytes { pattern -> Int? in
            let first = Int32(needle[0])
            var offset = 0
            let last = haystack.count - needle.count
            while offset <= last {
                guard let hit = memchr(base + offset, first, last - offset + 1) else { return nil }
                let position = base.distance(to: UnsafeRawPointer(hit))
                if memcmp(base + position, pattern.baseAddress!, needle.count) == 0 { return position }
                offset = position + 1
            }
            return nil
        }
    }
}
