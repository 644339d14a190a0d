import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import OpenAPIRuntime
import ParleyProtocol
import ParleyStore

/// Makes the request's credentials available to the API handlers (``RequestCredentials/current``).
struct CredentialsMiddleware<Context: RequestContext & RemoteAddressRequestContext>: RouterMiddleware {
    /// ``EdgeLimits/trustedProxies``.
    var trustedProxies: Set<String> = []

    static var forwardedFor: HTTPField.Name { HTTPField.Name("X-Forwarded-For")! }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var context = context
        let address = Self.clientAddress(
            peer: context.remoteAddress?.ipAddress, forwardedFor: request.headers[values: Self.forwardedFor],
            trustedProxies: trustedProxies
        )
        if let address { context.logger[metadataKey: "client"] = "\(address)" }
        let credentials = RequestCredentials(
            bearerToken: RequestCredentials.bearer(fromAuthorization: request.headers[.authorization]),
            apiKey: request.headers[HTTPField.Name("X-Parley-Api-Key")!],
            clientAddress: address
        )
        return try await RequestCredentials.$current.withValue(credentials) {
            try await next(request, context)
        }
    }

    /// The client's address: the socket's peer, or, when the peer is a trusted proxy, the last address of
    /// `X-Forwarded-For` (over every such header, in order) that is not a trusted proxy itself. A client cannot forge
    /// its way past the proxy: what it writes in the header comes before what the proxy appends.
    static func clientAddress(peer: String?, forwardedFor: [String], trustedProxies: Set<String>) -> String? {
        guard let peer, trustedProxies.contains(peer) else { return peer }
        let hops = forwardedFor.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }
        return hops.last { !$0.isEmpty && !trustedProxies.contains($0) } ?? peer
    }
}
