/// Something that happened to a ``NATSConnection``, delivered on ``NATSConnection/events``.
public enum NATSConnectionEvent: Sendable, Hashable {
    /// The first connection was established (after the CONNECT's PONG).
    case connected(NATSServerAddress)
    /// An established connection was lost; the client reconnects unless it is closing.
    case disconnected(reason: String)
    /// A connection was established again, to this server; subscriptions have been sent again.
    case reconnected(NATSServerAddress)
    /// A connection attempt failed (refused, timed out, bad handshake, authorization refused).
    case connectionAttemptFailed(NATSServerAddress, reason: String)
    /// An inbox went over its limits and dropped messages; reported once per overflow episode (until the consumer
    /// has emptied it). `dropped` is the inbox's total so far.
    case slowConsumer(inbox: UInt64, dropped: Int)
    /// The server sent `-ERR` with this text.
    case serverError(String)
    /// The server announced lame duck mode (it is shutting down); the client moves to another server.
    case lameDuckMode
    /// Servers learned from INFO `connect_urls`, added to the server list.
    case serversDiscovered([NATSServerAddress])
    /// `run()` ended; no more events follow.
    case closed
}
