import NIOCore

/// An operation received from the server.
package enum NATSServerOperation: Sendable, Equatable {
    /// INFO: the server's description of itself.
    case info(NATSServerInfo)
    /// MSG or HMSG: a message for a subscription.
    case message(NATSMessage)
    /// PING: answer with PONG.
    case ping
    /// PONG: the answer to our PING.
    case pong
    /// +OK (verbose mode only).
    case ok
    /// -ERR with its text, quotes removed.
    case error(String)
}
