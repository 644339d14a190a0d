import Foundation
import Testing

@testable import ParleyTesting

/// The ports tests restart listeners on: outside the kernel's ephemeral range, and never one something listens on.
@Suite struct RestartablePortTests {
    @Test func portsComeFromBelowTheEphemeralRangeEachOnce() throws {
        let first = try RestartablePort.take()
        let second = try RestartablePort.take()
        for port in [first, second] { #expect(RestartablePort.range.contains(port)) }
        #expect(first != second)
        #expect(RestartablePort.range.upperBound > 1024 && RestartablePort.range.count >= 1)
        // Below what the kernel hands out, read here on its own.
        if let setting = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8),
            let lowest = setting.split(whereSeparator: \.isWhitespace).first.flatMap({ Int($0) })
        {
            #expect(first < lowest && second < lowest, "\(first), \(second) against \(lowest)")
        }
    }

    /// Tried on a port of the ephemeral range that a listener holds (its own ports are other tests' to take).
    @Test func aPortSomethingListensOnIsSkipped() async throws {
        let holder = try await WebhookReceiver.start()
        let found = RestartablePort.firstFree(in: holder.port..<(holder.port + 2), from: holder.port)
        #expect(found != holder.port)
        #expect(RestartablePort.firstFree(in: holder.port..<(holder.port + 1), from: holder.port) == nil)
        try await holder.stop()
    }

    @Test func aListenerStopsAndStartsAgainOnItsPort() async throws {
        let port = try RestartablePort.take()
        let receiver = try await WebhookReceiver.start(port: port)
        try await receiver.stop()
        let back = try await WebhookReceiver.start(port: port)
        #expect(back.port == port)
        try await back.stop()
    }
}
