import Hummingbird
import NIOCore

/// The request context of the REST API: Hummingbird's core context, the client's address (for the per-address
/// login limit), and the connection (a download that its client stops taking is cut off on it).
struct ParleyRequestContext: RequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let remoteAddress: SocketAddress?
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
        self.channel = source.channel
    }
}
