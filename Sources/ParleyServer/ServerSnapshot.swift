/// What a running server holds at one moment: its connections in every stage and the per-connection state of its
/// parts. Every count returns to zero (or to its resting value) once the connections are gone, which is what the
/// hostile-input and leak tests check after thousands of connections.
public struct ServerSnapshot: Sendable, Hashable, CustomStringConvertible {
    /// TCP connections accepted and not closed (REST, WebSocket, or not decided yet): the WebSockets, and the others.
    public var openConnections: Int
    /// Of those, connections counted as being set up (``ServerConfiguration/maxConnectionsInSetup``).
    public var connectionsInSetup: Int
    /// Upgraded WebSockets, registered or still in their handshake.
    public var webSockets: Int
    /// Authenticated WebSocket connections the hub delivers to.
    public var liveConnections: Int
    /// WebSocket handshakes holding a slot, and waiting for one.
    public var handshakesInProgress: Int
    public var handshakesWaiting: Int
    /// Users with a connection on this node, and users online (the latter include those in their presence grace).
    public var connectedUsers: Int
    public var onlineUsers: Int
    /// Typing indicators on, and typing changes not handled yet.
    public var typingIndicators: Int
    public var pendingTypingChanges: Int
    /// Connections whose token expiry is watched.
    public var expiringConnections: Int

    public var description: String {
        "open \(openConnections) (in setup \(connectionsInSetup)), WebSockets \(webSockets), live \(liveConnections), "
            + "handshakes \(handshakesInProgress)+\(handshakesWaiting) waiting, users \(connectedUsers) connected / "
            + "\(onlineUsers) online, typing \(typingIndicators)+\(pendingTypingChanges), expiring \(expiringConnections)"
    }
}

extension ParleyApplication {
    /// What the server holds now.
    public func snapshot() async -> ServerSnapshot {
        let open = admission.openConnections + sockets.count
        let gate = admission.counts
        let presence = presence.counts
        let typing = typing.counts
        return ServerSnapshot(
            openConnections: open, connectionsInSetup: gate.accepting, webSockets: sockets.count,
            liveConnections: hub.connectionCount, handshakesInProgress: gate.handshakes,
            handshakesWaiting: gate.waiting, connectedUsers: presence.connected, onlineUsers: presence.online,
            typingIndicators: typing.active, pendingTypingChanges: typing.pending, expiringConnections: expiry.count
        )
    }
}
