import NIOCore
import ParleyProtocol

/// One authenticated WebSocket connection, as the hub sees it.
final class ServerConnection: Sendable {
    let id: String
    let principal: UserPrincipal
    let outbound: OutboundQueue

    init(id: String, principal: UserPrincipal, outboundLimitBytes: Int) {
        self.id = id
        self.principal = principal
        self.outbound = OutboundQueue(limitBytes: outboundLimitBytes)
    }
}
