import Foundation
import Logging
import NATSNIO
import NIOConcurrencyHelpers
import NIOCore
import ParleyTesting

/// A configuration for tests: the URLs, a name, and timings that suit a busy CI machine.
func testConfiguration(_ urls: String, configure: (inout NATSConfiguration) -> Void = { _ in }) throws
    -> NATSConfiguration
{
    var configuration = NATSConfiguration(servers: try NATSConfiguration.parseServers(urls))
    configuration.name = "natsnio-tests"
    // The suite runs beside every other suite on a loaded 2-core machine: a handshake with a server (or a hostile
    // one) can take more than the default 2 s to be served there, and the tests are about what the server says.
    configuration.connectTimeout = .seconds(10)
    configure(&configuration)
    return configuration
}

/// A quiet logger; `NATS_TEST_LOG=debug` shows the client's logs.
func testLogger() -> Logger {
    var logger = Logger(label: "nats-test")
    let level = ProcessInfo.processInfo.environment["NATS_TEST_LOG"].flatMap { Logger.Level(rawValue: $0) }
    logger.logLevel = level ?? .critical
    return logger
}

extension ByteBuffer {
    /// A buffer of `count` bytes with a recognisable pattern.
    static func pattern(_ count: Int, seed: UInt8 = 0) -> ByteBuffer {
        ByteBuffer(bytes: (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) })
    }
}

extension NATSConnectionEvent {
    var isConnected: Bool {
        if case .connected = self { return true }
        return false
    }

    var isReconnected: Bool {
        if case .reconnected = self { return true }
        return false
    }

    var isDisconnected: Bool {
        if case .disconnected = self { return true }
        return false
    }

    var isSlowConsumer: Bool {
        if case .slowConsumer = self { return true }
        return false
    }

    var connectedServer: NATSServerAddress? {
        switch self {
        case .connected(let server), .reconnected(let server): server
        default: nil
        }
    }

    var disconnectReason: String? {
        if case .disconnected(let reason) = self { return reason }
        return nil
    }

    var attemptFailure: String? {
        if case .connectionAttemptFailed(_, let reason) = self { return reason }
        return nil
    }
}

/// Whether live tests can run (a nats-server binary was found); prints a loud message when not.
let liveServerAvailable = NATSServerProcess.isAvailable

/// A failure of a test helper, with its reason.
struct TestFailure: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}
