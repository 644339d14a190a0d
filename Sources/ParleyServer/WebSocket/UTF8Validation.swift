/// Strict UTF-8 validation (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF), for the text frames
/// and close reasons RFC 6455 requires to be valid UTF-8 (section 8.1). ASCII, most of the protocol, goes 8 bytes at
/// a time.
package enum UTF8Validation {
    package static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let count = bytes.count
        var index = 0
        while index < count {
            while index + 8 <= count,
                bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self) & 0x8080_8080_8080_8080 == 0
            {
                index += 8
            }
            guard index < count else { return true }
            let lead = bytes[index]
            if lead < 0x80 {
                index += 1
                continue
            }
            func continuation(_ offset: Int) -> UInt8? {
                guard index + offset < count else { return nil }
                let byte = bytes[index + offset]
                return byte & 0xC0 == 0x80 ? byte : nil
            }
            switch lead {
            case 0xC2...0xDF:
                guard continuation(1) != nil else { return false }
                index += 2
            case 0xE0...0xEF:
                guard let second = continuation(1), continuation(2) != nil else { return false }
                if lead == 0xE0, second < 0xA0 { return false }  // overlong
                if lead == 0xED, second > 0x9F { return false }  // UTF-16 surrogates
                index += 3
            case 0xF0...0xF4:
                guard let second = continuation(1), continuation(2) != nil, continuation(3) != nil else { return false }
                if lead == 0xF0, second < 0x90 { return false }  // overlong
                if lead == 0xF4, second > 0x8F { return false }  // above U+10FFFF
                index += 4
            default:
                return false
            }
        }
        return true
    }

    package static func isValid(_ bytes: some Collection<UInt8>) -> Bool {
        if let result = bytes.withContiguousStorageIfAvailable({ isValid(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        return Array(bytes).withUnsafeBytes { isValid($0) }
    }
}
