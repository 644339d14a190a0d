/// How a ``NATSConnection`` connects and keeps its connection.
///
/// ```swift
/// var configuration = NATSConfiguration(servers: try NATSConfiguration.parseServers("nats://h1:4222,nats://h2"))
/// configuration.name = "parley-node-1"
/// configuration.echo = false
/// ```
public struct NATSConfiguration: Sendable {
    /// The servers to connect to, tried in turn. Servers learned from INFO `connect_urls` are added to them
    /// when ``discoverServers`` is set.
    public var servers: [NATSServerAddress]
    /// The connection name sent in CONNECT (`name`), shown by the server's monitoring.
    public var name: String?
    /// Whether this connection receives the messages it publishes itself (CONNECT `echo`). Default `true`.
    public var echo: Bool = true
    /// How often the client sends a PING to check that the server is alive. Default 2 s.
    public var pingInterval: Duration = .seconds(2)
    /// How many PINGs may go unanswered: when a PING is due and this many are outstanding, the connection is stale,
    /// closed, and the client reconnects. Default 2.
    public var maxPingsOutstanding: Int = 2
    /// The time allowed for the TCP connect, the server's INFO, and CONNECT/PING up to its PONG. Default 2 s.
    public var connectTimeout: Duration = .seconds(2)
    /// The first back-off between failed rounds over the servers; doubles per failed round, with full jitter.
    /// Default 50 ms.
    public var reconnectWaitMinimum: Duration = .milliseconds(50)
    /// The largest back-off between failed rounds over the servers. Default 2 s.
    public var reconnectWaitMaximum: Duration = .seconds(2)
    /// How many connection attempts may fail in a row (after a lost connection, or after the first failed
    /// attempt) before `run()` throws `maxReconnectsExceeded`; `nil` retries forever. Default `nil`.
    public var maxReconnectAttempts: Int?
    /// The bound of the outbound buffer in bytes: publishes made while disconnected or while the socket is not
    /// writable accumulate up to it, then ``NATSConnection/publish(_:to:replyTo:headers:)`` throws
    /// `outboundBufferFull`. Default 8 MiB.
    public var maxPendingBytes: Int = 8 << 20
    /// Whether servers announced in INFO `connect_urls` (the rest of a cluster) are added to ``servers``.
    /// Default `true`.
    public var discoverServers: Bool = true
    /// How long `run()` waits, once cancelled, for the server to confirm the publishes still buffered
    /// (a final PING/PONG) before it closes the connection. Default 1 s.
    public var drainTimeout: Duration = .seconds(1)
    /// The bound of the ``NATSConnection/events`` stream: older events are dropped when nobody reads it.
    /// Default 1,024.
    public var maxBufferedEvents: Int = 1024

    /// Creates a configuration with defaults for everything but the servers.
    /// - Parameter servers: The servers to connect to; see ``parseServers(_:)``.
    public init(servers: [NATSServerAddress]) {
        self.servers = servers
    }

    /// Parses a comma-separated list of server URLs, e.g. `"nats://h1:4222,nats://user:pass@h2:4223,nats://tok@h3"`.
    ///
    /// The port defaults to 4222, the scheme must be `nats://` (or be left out).
    /// - Parameter urls: The list; spaces around the commas are ignored.
    /// - Returns: The addresses, in the order given.
    /// - Throws: ``NATSError`` `invalidURL` when the list is empty or a URL is malformed (the message names it),
    ///   `tlsNotSupported` for `tls://`.
    public static func parseServers(_ urls: String) throws(NATSError) -> [NATSServerAddress] {
        let parts = urls.split(separator: ",", omittingEmptySubsequences: false)
        var servers: [NATSServerAddress] = []
        for (index, part) in parts.enumerated() {
            let trimmed = String(part).trimmingASCIIWhitespace()
            if trimmed.isEmpty {
                if parts.count == 1 {
                    throw NATSError(.invalidURL, "empty server list")
                }
                throw NATSError(.invalidURL, "empty server URL at position \(index + 1) of the list")
            }
            servers.append(try NATSServerAddress(url: String(trimmed)))
        }
        return servers
    }
}
