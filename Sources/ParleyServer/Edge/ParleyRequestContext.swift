import Hummingbird
import NIOCore

/// The request context of the REST API: Hummingbird's core context and the client's address (for the per-address
/// login limit).
struct ParleyRequestContext: RequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let remoteAddress: SocketAddress?

    init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
    }
}
