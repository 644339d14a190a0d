import NIOCore
import ParleyProtocol

/// One authenticated WebSocket connection, as the hub sees it.
final class ServerConnection: Sendable {
    let id: String
    let principal: UserPrincipal
    let outbound: OutboundQueue
    /// Receives `presence.update` for every user of the app (the client's `subscribePresenceForAllUsers`).
    let subscribesToAllPresence: Bool

    init(id: String, principal: UserPrincipal, outboundLimitBytes: Int, subscribesToAllPresence: Bool = false) {
        self.id = id
        self.principal = principal
        self.outbound = OutboundQueue(limitBytes: outboundLimitBytes)
        self.subscribesToAllPresence = subscribesToAllPresence
    }
}
