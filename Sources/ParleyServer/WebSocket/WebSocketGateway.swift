import Foundation
import Logging
import NIOCore
import NIOWebSocket
import ParleyProtocol
import ParleyStore

/// The WebSocket endpoint `/v1/ws`: accepts the upgrade, authenticates the `connect` frame, registers connections
/// with the hub, catches them up and answers their frames. docs/PROTOCOL.md describes what goes over it; each socket
/// is driven by a ``WebSocketConnectionHandler`` on its event loop.
struct WebSocketGateway: Sendable {
    static let path = "/v1/ws"

    let authenticator: Authenticator
    let store: any ParleyStore
    let hub: Hub
    let writer: CommandWriter
    let typing: TypingTracker
    let presence: PresenceTracker
    /// The link to the other nodes (several nodes): it follows the conversations of the users connected here.
    var cluster: NATSCluster? = nil
    let sockets: SocketRegistry
    let expiry: TokenExpiry
    let admission: AdmissionGate
    /// Messages per user, when limited.
    var sends: SendRateLimiter? = nil
    let time: ServerClock
    let configuration: ServerConfiguration
    var metrics: ServerMetrics = .discarding
    /// Spans of the commands clients send (off unless traces are exported).
    var tracing: ServerTracing = .off
    let logger: Logger

    /// What authentication found for a `connect`: the principal, its user, and the stream positions read before the
    /// connection is registered (the baseline of ``ReplayPlan``).
    struct Opening: Sendable {
        var principal: UserPrincipal
        var user: User
        var baseline: StreamPositions
        /// Taken just before the baseline was read, when the writer had no batch under way (inline reads only).
        var quietMark: WriteEpoch.Mark? = nil
    }

    /// Whether an upgrade request is for this endpoint; other paths are refused (HTTP 400). The token is not checked
    /// here: a bad or missing token is accepted and, after the client's `connect`, closed with 4001 and its error
    /// code, so that a client can tell it from a server that is down.
    static func accepts(uri: String) -> Bool {
        uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first == path[...]
    }

    /// Adds the frame aggregator and the connection's handler to an upgraded channel, and the writer of complete
    /// frames next to the socket.
    func addHandlers(to channel: any Channel, authorization: String?) throws {
        let token = RequestCredentials.bearer(fromAuthorization: authorization)
        let raw = RawFrameWriter()
        try channel.pipeline.syncOperations.addHandler(raw, position: .first)
        try channel.pipeline.syncOperations.addHandlers(
            WebSocketFrameAssembler(maxMessageSize: configuration.maxInboundFrameSize, maxFragments: Self.maxFragments),
            WebSocketConnectionHandler(gateway: self, token: token, raw: raw, logger: logger)
        )
    }

    /// Most fragments one message may come in.
    static let maxFragments = 1024

    /// The client's first frame, if it is a `connect` this server can serve; else why not.
    ///
    /// The server sends nothing before it: data that follows the upgrade response too closely can be lost while a
    /// client switches its pipeline from HTTP to WebSocket.
    static func connectFrame(_ frame: WebSocketFrame) -> Result<ConnectFrame, DomainError> {
        guard frame.opcode == .text,
            case .connect(let connect) = try? ClientFrame.decode(bytes: frame.unmaskedData.readableBytesView)
        else {
            return .failure(
                DomainError(.handshakeFailed, "The first frame must be {\"type\":\"connect\",\"protocolVersion\":1}.")
            )
        }
        if let resume = connect.resume {
            do {
                try InputRules.position(resume.userSeq, "resume.userSeq")
                for (id, seq) in resume.conversations {
                    try InputRules.identifier(id, "A conversation id of resume")
                    try InputRules.position(seq, "A position of resume")
                }
            } catch let refusal as DomainError {
                return .failure(DomainError(.handshakeFailed, refusal.message))
            } catch {
                return .failure(DomainError(.handshakeFailed, "Invalid resume positions."))
            }
        }
        guard connect.protocolVersion == ParleyProtocolVersion.current else {
            return .failure(
                DomainError(
                    .unsupportedProtocolVersion,
                    "This server speaks protocol version \(ParleyProtocolVersion.current), not \(connect.protocolVersion)."
                )
            )
        }
        return .success(connect)
    }

    /// The store's inline reads, when it has them (SQLite): the handshake then runs on the socket's event loop.
    var inlineReads: (any InlineReads)? { store.capabilities.inlineReads }

    /// Checks the token and reads what the connection starts from.
    func authenticate(token: String?) async -> Result<Opening, DomainError> {
        do {
            try refuseWhileShuttingDown()
            let principal = try await authenticator.user(token: token)
            let user = try await store.user(appId: principal.appId, uid: principal.uid)
            let baseline = try await store.streamPositions(appId: principal.appId, uid: principal.uid)
            return .success(try Self.opening(principal, user, baseline))
        } catch {
            return .failure(refusal(error))
        }
    }

    /// ``authenticate(token:)`` with the store's inline reads (one read transaction), on the caller's thread.
    func authenticate(token: String?, inline: any InlineReads) -> Result<Opening, DomainError> {
        do {
            try refuseWhileShuttingDown()
            let hash = try Authenticator.hash(of: token)
            let mark = writer.epoch.quietMark()
            let opening = try inline.connectionOpening(tokenHash: hash)
            let principal = try authenticator.principal(of: opening?.token)
            var opened = try Self.opening(principal, opening?.user, opening!.positions)
            opened.quietMark = mark
            return .success(opened)
        } catch {
            return .failure(refusal(error))
        }
    }

    private func refuseWhileShuttingDown() throws {
        guard !sockets.isShuttingDown else { throw DomainError(.serverShuttingDown, "The server is shutting down.") }
    }

    private static func opening(_ principal: UserPrincipal, _ user: User?, _ baseline: StreamPositions) throws
        -> Opening
    {
        guard let user else { throw DomainError(.authTokenInvalid, "The token's user no longer exists.") }
        return Opening(principal: principal, user: user, baseline: baseline)
    }

    /// Why a connection is refused: a ``DomainError`` as it is; anything else (the database) as `ERR_INTERNAL`.
    private func refusal(_ error: any Error) -> DomainError {
        if let refusal = error as? DomainError { return refusal }
        logger.warning("WebSocket authentication failed", metadata: ["error": "\(error)"])
        return DomainError(.internalError, "The server could not open the connection.")
    }

    /// A connection starts: the hub delivers to it, its user is online, and (several nodes) this node follows the
    /// conversations of its `baseline`.
    func register(_ connection: ServerConnection, baseline: StreamPositions) {
        hub.register(connection)
        presence.connected(connection)
        cluster?.connectionOpened(
            UserKey(appId: connection.principal.appId, uid: connection.principal.uid),
            conversations: baseline.conversations)
    }

    /// A connection ended.
    func unregister(_ connection: ServerConnection) {
        cluster?.connectionClosed(UserKey(appId: connection.principal.appId, uid: connection.principal.uid))
        hub.unregister(connection)
        presence.disconnected(connection)
        typing.connectionClosed(connection)
    }

    /// The `hello` frame of a registered connection.
    func hello(_ opening: Opening, _ connection: ServerConnection) -> ByteBuffer {
        let hello = HelloFrame(
            protocolVersion: ParleyProtocolVersion.current, connectionId: connection.id, appId: opening.principal.appId,
            user: opening.user, heartbeatIntervalMs: Int64(configuration.heartbeatInterval.components.seconds * 1000),
            serverTime: time.epochMilliseconds(), tokenExpiresAt: opening.principal.expiresAt
        )
        return FrameEncoding.frame(.hello(hello))
    }
}
