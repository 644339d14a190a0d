/// What the first bytes of an image say: that it is the type it claims, and its size in pixels. Only the types
/// browsers and phones show inline are checked (PNG, JPEG, GIF, WebP); other files are taken as their uploader says.
enum ImageHeader {
    /// The types whose bytes are checked.
    static let checkedTypes: Set<String> = ["image/png", "image/jpeg", "image/gif", "image/webp"]

    enum Verdict: Equatable {
        /// The bytes are the claimed type; the size when the header gives it.
        case image(width: Int?, height: Int?)
        /// The bytes are not the claimed type.
        case mismatch
        /// Not a checked type.
        case unchecked
    }

    /// Judges `head` (the first bytes of the file, up to 64 KiB) for `contentType`.
    static func check(contentType: String, head: [UInt8]) -> Verdict {
        switch contentType {
        case "image/png": return png(head)
        case "image/jpeg": return jpeg(head)
        case "image/gif": return gif(head)
        case "image/webp": return webp(head)
        default: return .unchecked
        }
    }

    private static func big16(_ bytes: [UInt8], _ at: Int) -> Int { Int(bytes[at]) << 8 | Int(bytes[at + 1]) }
    private static func big32(_ bytes: [UInt8], _ at: Int) -> Int { big16(bytes, at) << 16 | big16(bytes, at + 2) }
    private static func little16(_ bytes: [UInt8], _ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
    private static func little24(_ bytes: [UInt8], _ at: Int) -> Int {
        little16(bytes, at) | Int(bytes[at + 2]) << 16
    }

    private static func starts(_ bytes: [UInt8], with prefix: [UInt8], at offset: Int = 0) -> Bool {
        bytes.count >= offset + prefix.count && Array(bytes[offset..<offset + prefix.count]) == prefix
    }

    /// Signature, then IHDR: width and height as big-endian 32-bit numbers.
    static func png(_ bytes: [UInt8]) -> Verdict {
        guard starts(bytes, with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) else { return .mismatch }
        guard bytes.count >= 24, starts(bytes, with: Array("IHDR".utf8), at: 12) else {
            return .image(width: nil, height: nil)
        }
        return .image(width: big32(bytes, 16), height: big32(bytes, 20))
    }

    /// "GIF87a" or "GIF89a", then the logical screen's width and height, little-endian.
    static func gif(_ bytes: [UInt8]) -> Verdict {
        guard starts(bytes, with: Array("GIF87a".utf8)) || starts(bytes, with: Array("GIF89a".utf8)) else {
            return .mismatch
        }
        guard bytes.count >= 10 else { return .image(width: nil, height: nil) }
        return .image(width: little16(bytes, 6), height: little16(bytes, 8))
    }

    /// SOI, then segments until a start-of-frame marker (SOF0-SOF15 but DHT, JPG and DAC), whose height and width
    /// follow the precision byte.
    static func jpeg(_ bytes: [UInt8]) -> Verdict {
        guard starts(bytes, with: [0xFF, 0xD8, 0xFF]) else { return .mismatch }
        var index = 2
        while index + 9 < bytes.count {
            guard bytes[index] == 0xFF else { break }
            let marker = bytes[index + 1]
            if marker == 0xFF {
                index += 1
                continue
            }
            if (0xC0...0xCF).contains(marker), ![0xC4, 0xC8, 0xCC].contains(marker) {
                return .image(width: big16(bytes, index + 7), height: big16(bytes, index + 5))
            }
            if marker == 0xD8 || (0xD0...0xD7).contains(marker) || marker == 0x01 {
                index += 2
                continue
            }
            index += 2 + big16(bytes, index + 2)
        }
        return .image(width: nil, height: nil)
    }

    /// "RIFF" size "WEBP", then a VP8, VP8L or VP8X chunk with the canvas size.
    static func webp(_ bytes: [UInt8]) -> Verdict {
        guard starts(bytes, with: Array("RIFF".utf8)), starts(bytes, with: Array("WEBP".utf8), at: 8) else {
            return .mismatch
        }
        guard bytes.count >= 30 else { return .image(width: nil, height: nil) }
        if starts(bytes, with: Array("VP8X".utf8), at: 12) {
            return .image(width: little24(bytes, 24) + 1, height: little24(bytes, 27) + 1)
        }
        if starts(bytes, with: Array("VP8L".utf8), at: 12), bytes[20] == 0x2F {
            let bits = Int(bytes[21]) | Int(bytes[22]) << 8 | Int(bytes[23]) << 16 | Int(bytes[24]) << 24
            return .image(width: (bits & 0x3FFF) + 1, height: (bits >> 14 & 0x3FFF) + 1)
        }
        if starts(bytes, with: Array("VP8 ".utf8), at: 12), starts(bytes, with: [0x9D, 0x01, 0x2A], at: 23) {
            return .image(width: little16(bytes, 26) & 0x3FFF, height: little16(bytes, 28) & 0x3FFF)
        }
        return .image(width: nil, height: nil)
    }
}
