/// Counters of a ``NATSConnection``, since it was created.
public struct NATSStatistics: Sendable, Hashable {
    /// Messages received (MSG and HMSG), dropped ones included.
    public var messagesIn: Int = 0
    /// Payload bytes received.
    public var bytesIn: Int = 0
    /// Messages published (accepted into the outbound buffer).
    public var messagesOut: Int = 0
    /// Payload bytes published.
    public var bytesOut: Int = 0
    /// Connections established after the first one.
    public var reconnects: Int = 0
    /// Messages dropped because an inbox was over its limits (slow consumer).
    public var droppedMessages: Int = 0

    /// Creates zeroed counters.
    public init() {}
}
