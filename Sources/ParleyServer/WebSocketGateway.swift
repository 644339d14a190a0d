import Foundation
import HTTPTypes
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOWebSocket
import ParleyProtocol
import ParleyStore

/// The WebSocket endpoint `/v1/ws`: authenticates the upgrade, registers the connection with the hub, writes
/// its queued frames and answers its client frames. docs/PROTOCOL.md describes what goes over it.
struct WebSocketGateway: Sendable {
    static let path = "/v1/ws"

    let authenticator: Authenticator
    let store: any ParleyStore
    let hub: Hub
    let writer: CommandWriter
    let typing: TypingTracker
    let presence: PresenceTracker
    let time: ServerClock
    let configuration: ServerConfiguration
    let logger: Logger

    typealias Handler = WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>

    /// Decides an upgrade request. Requests for other paths are refused (HTTP 400); a bad or missing token is
    /// accepted and, after the client's `connect`, closed with 4001 and its error code, so that a client can tell
    /// it from a server that is down.
    func shouldUpgrade(_ head: HTTPRequest) async throws -> ShouldUpgradeResult<Handler> {
        guard let path = head.path, path.split(separator: "?", maxSplits: 1).first == Self.path[...] else {
            return .dontUpgrade
        }
        let token = RequestCredentials.bearer(fromAuthorization: head.headerFields[.authorization])
        let authentication: Result<(UserPrincipal, User), DomainError>
        do {
            let principal = try await authenticator.user(token: token)
            guard let user = try await store.user(appId: principal.appId, uid: principal.uid) else {
                throw DomainError(.authTokenInvalid, "The token's user no longer exists.")
            }
            authentication = .success((principal, user))
        } catch let refusal as DomainError {
            authentication = .failure(refusal)
        }
        return .upgrade([:]) { inbound, outbound, _ in
            var frames = inbound.messages(maxSize: configuration.maxInboundFrameSize).makeAsyncIterator()
            let connect: ConnectFrame
            switch try await handshake(&frames, outbound: outbound) {
            case .failure(let refusal):
                return await refuse(refusal, closeCode: WebSocketCloseCode.protocolViolation, outbound: outbound)
            case .success(let frame):
                connect = frame
            }
            switch authentication {
            case .failure(let refusal):
                await refuse(refusal, closeCode: WebSocketCloseCode.authenticationFailed, outbound: outbound)
            case .success(let (principal, user)):
                try await serve(principal: principal, user: user, connect: connect, frames: &frames, outbound: outbound)
            }
        }
    }

    /// Waits for the client's `connect` frame; returns it, or why the connection must be refused.
    ///
    /// The server sends nothing before it: data that follows the upgrade response too closely can be lost while
    /// a client switches its pipeline from HTTP to WebSocket.
    private func handshake(
        _ frames: inout WebSocketInboundMessageStream.AsyncIterator, outbound: WebSocketOutboundWriter
    ) async throws -> Result<ConnectFrame, DomainError> {
        let timeout = configuration.handshakeTimeout
        let first: WebSocketMessage? = try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await Task.sleep(for: timeout)
                try await outbound.close(
                    .init(codeNumber: Int(WebSocketCloseCode.protocolViolation)),
                    reason: ErrorCode.handshakeFailed.rawValue
                )
            }
            defer { group.cancelAll() }
            return try await frames.next()
        }
        guard case .text(let text) = first,
            case .connect(let connect) = try? JSONDecoder().decode(ClientFrame.self, from: Data(text.utf8))
        else {
            return .failure(
                DomainError(.handshakeFailed, "The first frame must be {\"type\":\"connect\",\"protocolVersion\":1}.")
            )
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

    /// Sends an error frame, then closes with `closeCode` and the error's code as reason. The client may already
    /// be gone (or the handshake timer may have closed the socket): then there is nobody left to tell.
    private func refuse(_ refusal: DomainError, closeCode: UInt16, outbound: WebSocketOutboundWriter) async {
        let frame = FrameEncoding.frame(.error(ErrorFrame(code: refusal.code, message: refusal.message)))
        try? await outbound.write(.custom(Self.textFrame(frame)))
        try? await outbound.close(.init(codeNumber: Int(closeCode)), reason: refusal.code.rawValue)
    }

    private func serve(
        principal: UserPrincipal, user: User, connect: ConnectFrame,
        frames: inout WebSocketInboundMessageStream.AsyncIterator, outbound: WebSocketOutboundWriter
    ) async throws {
        let connection = ServerConnection(
            id: Secrets.randomID(prefix: "k_", length: 12), principal: principal,
            outboundLimitBytes: configuration.outboundQueueLimitBytes,
            subscribesToAllPresence: connect.subscribePresenceForAllUsers ?? false
        )
        var logger = self.logger
        logger[metadataKey: "connection"] = "\(connection.id)"
        logger[metadataKey: "uid"] = "\(principal.uid)"
        let baseline = try await store.streamPositions(appId: principal.appId, uid: principal.uid)
        hub.register(connection)
        presence.connected(connection)
        defer {
            hub.unregister(connection)
            presence.disconnected(connection)
            typing.connectionClosed(connection)
        }
        logger.debug("WebSocket connected")
        let connectionLogger = logger

        let hello = HelloFrame(
            protocolVersion: ParleyProtocolVersion.current, connectionId: connection.id, appId: principal.appId,
            user: user, heartbeatIntervalMs: Int64(configuration.heartbeatInterval.components.seconds * 1000),
            serverTime: time.epochMilliseconds()
        )
        try await outbound.write(.custom(Self.textFrame(FrameEncoding.frame(.hello(hello)))))
        // Live events queue up meanwhile; they are written after `caughtUp`.
        try await replay(to: principal, resume: connect.resume, baseline: baseline, outbound: outbound)

        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    try await Self.writeQueuedFrames(of: connection, to: outbound)
                } catch {
                    connectionLogger.debug("WebSocket write ended", metadata: ["error": "\(error)"])
                }
            }
            if let expiresAt = principal.expiresAt {
                let time = self.time
                group.addTask {
                    // Cancelled when the connection ends first.
                    let remaining = Duration.milliseconds(max(0, expiresAt - time.epochMilliseconds()))
                    guard (try? await time.timeline.sleep(for: remaining)) != nil else { return }
                    connection.outbound.requestClose(
                        code: WebSocketCloseCode.authenticationFailed, reason: .authTokenInvalid
                    )
                }
            }
            var session = FrameSession(
                connection: connection, writer: writer, typing: typing, time: time, configuration: configuration
            )
            do {
                while let message = try await frames.next() {
                    session.receive(message)
                }
            } catch {
                logger.debug("WebSocket read ended", metadata: ["error": "\(error)"])
            }
            connection.outbound.finish()
            group.cancelAll()
        }
        logger.debug("WebSocket disconnected")
    }

    /// Writes what the hub and the session queue, until the connection ends or must be closed.
    private static func writeQueuedFrames(of connection: ServerConnection, to outbound: WebSocketOutboundWriter)
        async throws
    {
        while true {
            switch await connection.outbound.next() {
            case .frames(let frames):
                for frame in frames { try await outbound.write(.custom(textFrame(frame))) }
            case .close(let code, let reason):
                try await outbound.close(.init(codeNumber: Int(code)), reason: reason.rawValue)
                return
            case .finished:
                return
            }
        }
    }

    static func textFrame(_ buffer: ByteBuffer) -> WebSocketFrame {
        WebSocketFrame(fin: true, opcode: .text, data: buffer)
    }
}

/// The client frames of one connection: decodes them and answers on the connection's queue.
struct FrameSession {
    let connection: ServerConnection
    let writer: CommandWriter
    let typing: TypingTracker
    let time: ServerClock
    let limits: MessageLimits
    let malformedFrameLimit: Int
    private var malformedFrames = 0
    private var typingBudget: TokenBucket
    private let decoder = JSONDecoder()

    init(
        connection: ServerConnection, writer: CommandWriter, typing: TypingTracker, time: ServerClock,
        configuration: ServerConfiguration
    ) {
        self.connection = connection
        self.writer = writer
        self.typing = typing
        self.time = time
        self.limits = configuration.messageLimits
        self.malformedFrameLimit = configuration.malformedFrameLimit
        self.typingBudget = TokenBucket(perSecond: configuration.typingFramesPerSecond, now: time.timeline.now())
    }

    mutating func receive(_ message: WebSocketMessage) {
        let frame: ClientFrame
        do {
            guard case .text(let text) = message else {
                throw DomainError(.malformedFrame, "Frames are JSON text; binary frames are not accepted.")
            }
            frame = try decoder.decode(ClientFrame.self, from: Data(text.utf8))
        } catch let unknown as UnknownFrameType {
            reply(error: DomainError(.unknownFrameType, "Unknown frame type \"\(unknown.type)\"."))
            return
        } catch {
            malformedFrames += 1
            reply(error: DomainError(.malformedFrame, "The frame is not a valid protocol v1 frame."))
            if malformedFrames >= malformedFrameLimit {
                connection.outbound.requestClose(code: WebSocketCloseCode.protocolViolation, reason: .malformedFrame)
            }
            return
        }
        switch frame {
        case .connect:
            reply(error: DomainError(.badRequest, "The connection is already established."))
        case .ping(let ping):
            reply(.pong(PongFrame(id: ping.id, serverTime: time.epochMilliseconds())))
        case .send(let send):
            self.send(send)
        case .typing(let frame):
            guard typingBudget.take(now: time.timeline.now()) else {
                reply(error: DomainError(.rateLimited, "At most \(typingBudget.capacity) typing frames per second."))
                return
            }
            typing.typing(conversationId: frame.conversationId, isTyping: frame.isTyping, on: connection)
        case .receipt(let frame):
            receipt(frame)
        }
    }

    private func receipt(_ frame: ReceiptFrame) {
        let principal = connection.principal
        let command = Command.MarkReceipt(
            appId: principal.appId, conversationId: frame.conversationId, uid: principal.uid,
            deliveredSeq: frame.deliveredSeq, readSeq: frame.readSeq, now: time.epochMilliseconds()
        )
        let connection = self.connection
        writer.enqueue(.markReceipt(command)) { result in
            if case .failure(let error) = result {
                Self.reply(.error(Self.errorFrame(error, ref: frame.ref)), on: connection)
            }
        }
    }

    private func send(_ frame: SendFrame) {
        do {
            try MessageRules.validate(
                parts: frame.parts, metadata: frame.metadata, alert: frame.alert,
                clientMessageId: frame.clientMessageId, limits: limits
            )
        } catch {
            reply(.error(Self.errorFrame(error, ref: frame.ref)))
            return
        }
        let principal = connection.principal
        let command = Command.SendMessage(
            appId: principal.appId, conversationId: frame.conversationId, sender: principal.uid,
            messageId: Secrets.randomID(prefix: "m_"), clientMessageId: frame.clientMessageId, parts: frame.parts,
            metadata: frame.metadata, alert: frame.alert, now: time.epochMilliseconds()
        )
        let connection = self.connection
        writer.enqueue(.sendMessage(command)) { result in
            switch result {
            case .success(let outcome):
                guard case .message(let message, let duplicate) = outcome.outcome else { return }
                Self.reply(.ack(AckFrame(ref: frame.ref, message: message, duplicate: duplicate)), on: connection)
            case .failure(let error):
                Self.reply(.error(Self.errorFrame(error, ref: frame.ref)), on: connection)
            }
        }
    }

    private func reply(_ frame: ServerFrame) { Self.reply(frame, on: connection) }

    private func reply(error: DomainError, ref: String? = nil) {
        reply(.error(ErrorFrame(ref: ref, code: error.code, message: error.message)))
    }

    private static func reply(_ frame: ServerFrame, on connection: ServerConnection) {
        connection.outbound.push(FrameEncoding.frame(frame))
    }

    static func errorFrame(_ error: any Error, ref: String?) -> ErrorFrame {
        if let refusal = error as? DomainError {
            return ErrorFrame(ref: ref, code: refusal.code, message: refusal.message)
        }
        return ErrorFrame(ref: ref, code: .internalError, message: "The server could not complete the request.")
    }
}

/// A budget of actions per second, refilled continuously on the timeline.
struct TokenBucket {
    let capacity: Int
    private var tokens: Double
    private var last: Duration

    init(perSecond capacity: Int, now: Duration) {
        self.capacity = capacity
        self.tokens = Double(capacity)
        self.last = now
    }

    /// Takes one token; false when the budget is spent.
    mutating func take(now: Duration) -> Bool {
        let elapsed = Double((now - last).components.attoseconds) / 1e18 + Double((now - last).components.seconds)
        tokens = min(Double(capacity), tokens + elapsed * Double(capacity))
        last = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
