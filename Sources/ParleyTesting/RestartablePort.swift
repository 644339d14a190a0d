import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A port for a listener that a test stops and then starts again on the same port: a server restarted under clients
/// that keep its URL, a webhook endpoint that goes away and comes back.
///
/// Port 0 does not do for those. The kernel picks it from the ephemeral range, the range it also takes every outgoing
/// connection's local port from, so once the first listener stops, a connection any other test opens meanwhile can
/// take the port and the second bind fails with "Address already in use" (CI, `WebhookTests`, 2026-11-27). These
/// ports come from just below that range, where the kernel never picks one by itself. A counter shared by the process
/// keeps two tests apart, and a trial bind skips a port something else listens on.
///
/// ```swift
/// let server = try await TestServer.start(port: try RestartablePort.take())
/// try await server.stop()
/// let restarted = try await TestServer.start(dataDirectory: server.dataDirectory, port: server.port)
/// ```
public enum RestartablePort {
    /// The ports handed out: the 8,192 below the ephemeral range.
    public static let range: Range<Int> = {
        let lowestEphemeral = ephemeralRangeStart()
        return max(1024, lowestEphemeral - 8192)..<lowestEphemeral
    }()

    /// The next port to try; starts at a random place so that two test processes rarely try the same ports.
    private static let next = NIOLockedValueBox<Int?>(nil)

    /// A port on 127.0.0.1 that nothing listens on and that no other caller in this process was given.
    public static func take() throws -> Int {
        try next.withLockedValue { next in
            guard let port = firstFree(in: range, from: next ?? Int.random(in: range)) else {
                throw RestartablePortError(range: range)
            }
            next = port + 1 < range.upperBound ? port + 1 : range.lowerBound
            return port
        }
    }

    /// The first port of `range` from `start` on (coming round to the start once) that nothing holds.
    static func firstFree(in range: Range<Int>, from start: Int) -> Int? {
        for offset in 0..<range.count {
            let port = range.lowerBound + (start - range.lowerBound + offset) % range.count
            if isFree(port) { return port }
        }
        return nil
    }

    /// Whether a socket can bind 127.0.0.1:`port` now (without `SO_REUSEADDR`, so connections still waiting out
    /// `TIME_WAIT` on it count as taking it).
    private static func isFree(_ port: Int) -> Bool {
        #if canImport(Glibc)
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return bound == 0
    }

    /// The lowest port of the kernel's ephemeral range: Linux's setting, or the IANA range's 49152 elsewhere.
    private static func ephemeralRangeStart() -> Int {
        let setting = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)
        let lowest = setting?.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) }
        return lowest ?? 49152
    }
}

/// Every port of ``RestartablePort``'s range was in use.
public struct RestartablePortError: Error, CustomStringConvertible {
    /// The ports tried.
    public let range: Range<Int>
    public var description: String { "no free port in \(range.lowerBound)..<\(range.upperBound) on 127.0.0.1" }
}
