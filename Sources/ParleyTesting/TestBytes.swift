#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Bytes for file tests.
public enum TestBytes {
    /// `count` random bytes from the kernel (a loop of `UInt8.random` costs seconds in a debug build).
    public static func random(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { buffer in
            var filled = 0
            while filled < buffer.count {
                // 256 bytes at a time is all `getentropy` gives.
                let chunk = min(256, buffer.count - filled)
                if getentropy(buffer.baseAddress! + filled, chunk) == 0 { filled += chunk }
            }
        }
        return bytes
    }
}
