import Logging
import ParleyProtocol

/// What a connection may cost the server before its request is refused or it is closed: deadlines for each phase of an
/// HTTP request, sizes of heads and bodies, and the rate limits. Every limit and its answer is in docs/PROTOCOL.md.
public struct EdgeLimits: Sendable {
    /// How long the head of a request may take to arrive, from its first byte (from the accept for a connection's
    /// first request). Past it: 408, and the connection closes.
    public var requestHeadTimeout: Duration = .seconds(10)
    /// How long a keep-alive HTTP connection may stay idle between requests before the server closes it.
    public var idleTimeout: Duration = .seconds(75)
    /// How long the body of a request may take to arrive, from the end of its head. Past it: 408, and the connection
    /// closes.
    public var requestBodyTimeout: Duration = .seconds(30)
    /// Largest REST request body. A larger `Content-Length` is refused with 413 before the body is read; a chunked body
    /// is refused with 413 as soon as it passes the limit.
    public var maxRequestBodyBytes: Int = 1024 * 1024
    /// Longest request line (method, target, version). Longer: 414.
    public var maxRequestLineBytes: Int = 8 * 1024
    /// Longest header field (name and value). Longer: 431.
    public var maxHeaderFieldBytes: Int = 8 * 1024
    /// Most bytes of all header fields of a request. More: 431.
    public var maxHeaderBytes: Int = 32 * 1024
    /// Most header fields in a request. More: 431.
    public var maxHeaderCount: Int = 100
    /// A connection that has sent nothing this long after its accept (while the setup gate is full), and a WebSocket
    /// that has not sent `connect` this long after its upgrade, stop counting against
    /// ``ServerConfiguration/maxConnectionsInSetup`` (they cost the server nothing while they wait on their clients);
    /// a WebSocket's `connect` takes a slot again when it comes.
    public var silentConnectionGrace: Duration = .milliseconds(10)
    /// New connections per client address; past it the connection is answered 429 `ERR_RATE_LIMITED` and closed.
    /// Behind a proxy that connects from one address, raise it or turn it off (nil).
    public var connectionAttemptsPerAddress: RateLimit? = RateLimit(perSecond: 100, burst: 500)
    /// Logins (`POST /v1/login`) per client address; past it 429 `ERR_RATE_LIMITED`.
    public var loginsPerAddress: RateLimit? = RateLimit(perSecond: 5, burst: 20)
    /// Addresses of reverse proxies in front of the server (exact IP addresses, as the socket reports them). A request
    /// from one of them is taken to come from the client that `X-Forwarded-For` names (its last address that is not a
    /// trusted proxy): the login limit and the request log use that address. Connections from a trusted proxy are not
    /// counted against ``connectionAttemptsPerAddress`` (they all share the proxy's address).
    public var trustedProxies: Set<String> = []
    /// Messages one user may send (over every connection and REST, on this node); past it `ERR_RATE_LIMITED`.
    public var messagesPerUser: RateLimit? = RateLimit(perSecond: 20, burst: 100)

    public init() {}
}
