import Crypto
import Foundation
import NIOConcurrencyHelpers
import ParleyProtocol

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
