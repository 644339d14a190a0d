import Foundation
import Logging
import NIOCore
import NIOWebSocket
import ParleyProtocol
import ParleyStore

/// Drives one upgraded WebSocket on its event loop: the handshake, the client's frames, the writer of the
/// connection's ``OutboundQueue``, the heartbeat and the close handshake. Decisions are made by
/// ``WebSocketConnectionStateMachine``; this class performs them.
///
/// Nothing here is a task per connection: frames are read and answered in NIO callbacks, the writer runs when the
/// queue wakes it (everything queued goes out in one flush), timers are the event loop's scheduled tasks, and the
/// loop is their clock (tests drive it with `EmbeddedEventLoop.advanceTime`). Only the handshake, which reads the
/// store, runs in a short-lived task.
///
/// Backpressure both ways: frames are taken from the queue only while the channel is writable (the queue's own limit
/// then closes a client that does not read); while the connection is being authenticated and caught up, the socket is
/// not read (frames already decoded wait here) and the live queue is held.
final class WebSocketConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    typealias Machine = WebSocketConnectionStateMachine<WebSocketFrame, WebSocketGateway.Opening>

    private let gateway: WebSocketGateway
    private let token: String?
    /// Writes complete frames straight to the socket (every write of this handler goes through it).
    private let raw: RawFrameWriter
    private let logger: Logger
    /// Every decision about this socket: what it holds, what waits, where its handshake and close stand.
    private var machine = Machine()
    private var context: ChannelHandlerContext?
    /// What exists while the channel does: the handle other threads wake the writer through, then the registered
    /// connection with its frame session and its token's expiry. Dropped when the channel closes.
    private var socket: SocketHandle?
    private var connection: ServerConnection?
    private var expiryTicket: TokenExpiry.Ticket?
    private var session: FrameSession?
    /// Only the close timer is ever cancelled. The heartbeat and the handshake's timeout are not: NIO cancels a
    /// scheduled task by searching its loop's timer heap from the start (`removeFirst(where:)`), so with thousands of
    /// sockets on a loop every handshake and every close scanned thousands of timers (a storm of 10,000 resets held
    /// the loops for over 100 ms). Those timers hold the handler weakly; one that fires late finds it gone, or its
    /// state machine past the point where the timer mattered, and does nothing.
    private var closeTimer: Scheduled<Void>?

    init(gateway: WebSocketGateway, token: String?, raw: RawFrameWriter, logger: Logger) {
        self.gateway = gateway
        self.token = token
        self.raw = raw
        self.logger = logger
    }

    /// The connection's id and user once authenticated, given to each log call. Not set on `logger`: setting metadata
    /// on a `Logger` makes swift-log's `StreamLogHandler` render its metadata string again (1.3% of the server's CPU
    /// in `parley-bench connect`), while this is only computed when a log call's level is on.
    private var logMetadata: Logger.Metadata {
        guard let connection else { return [:] }
        return ["connection": "\(connection.id)", "uid": "\(connection.principal.uid)"]
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let socket = SocketHandle(channel: context.channel, handler: NIOLoopBound(self, eventLoop: context.eventLoop))
        self.socket = socket
        guard gateway.sockets.add(socket) else {
            serverClose(code: WebSocketCloseCode.goingAway, reason: .serverShuttingDown)
            return
        }
        // One timer at first: a client that sends `connect` within the grace (nearly every one) needs no other. One that
        // does not gives its setup slot up (it costs nothing while it waits on its peer), and gets the handshake's
        // timeout.
        let loop = context.eventLoop
        let grace = gateway.configuration.edge.silentConnectionGrace.timeAmount
        let due = loop.now + grace
        loop.assumeIsolated().scheduleTask(deadline: due) { [weak self] in
            guard let self else { return }
            perform(machine.connectGraceEnded(late: WebSocketUpgradeSniffer.isLate(loop.now, due: due, grace: grace)))
        }
        scheduleHeartbeat()
    }

    func channelInactive(context: ChannelHandlerContext) {
        perform(machine.channelClosed())
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        perform(machine.channelClosed())
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text, .binary:
            gateway.metrics.framesIn.increment()
            if frame.opcode == .text, !frame.unmaskedData.withUnsafeReadableBytes({ UTF8Validation.isValid($0) }) {
                serverClose(code: WebSocketCloseCode.invalidPayload, reason: .invalidUTF8, awaitAnswer: false)
                return
            }
            perform(machine.dataFrameReceived(frame))
        case .ping:
            perform(machine.pingReceived(frame, writable: context.channel.isWritable))
        case .pong:
            var payload = frame.unmaskedData
            machine.pongReceived(payload.readInteger(as: UInt64.self))
        case .connectionClose:
            perform(machine.closeFrameReceived(Self.peerClose(frame)))
        default:
            // Continuations are joined by the aggregator in front of this handler; other opcodes fail in the decoder.
            break
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { drain() }
        context.fireChannelWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        perform(machine.readRequested())
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case ChannelEvent.inputClosed:
            // The peer sent FIN (with or without a close frame first, RFC 6455 section 7.1.5: 1006): it is gone. The
            // socket closes now; its user goes offline after the presence grace.
            context.close(promise: nil)
        case is ChannelShouldQuiesceEvent:
            serverClose(code: WebSocketCloseCode.goingAway, reason: .serverShuttingDown)
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        switch error {
        case let violation as WebSocketProtocolViolation:
            let reason: ErrorCode =
                switch violation.code {
                case WebSocketCloseCode.invalidPayload: .invalidUTF8
                case WebSocketCloseCode.messageTooBig: .messageTooLarge
                default: .webSocketProtocolError
                }
            serverClose(code: violation.code, reason: reason, awaitAnswer: false)
        case NIOWebSocketError.invalidFrameLength:
            // The decoder reads nothing more after an error: close without waiting for an answer.
            serverClose(code: WebSocketCloseCode.messageTooBig, reason: .messageTooLarge, awaitAnswer: false)
        case is NIOWebSocketError:
            serverClose(code: WebSocketCloseCode.protocolError, reason: .webSocketProtocolError, awaitAnswer: false)
        default:
            logger.debug("WebSocket error", metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
            context.close(promise: nil)
        }
    }

    /// Closes the connection: an error frame first when there is one, then a close frame with the code and the
    /// reason; then waits for the client's close frame (at most the gateway's close timeout) unless `awaitAnswer` is
    /// false. The first close wins.
    func serverClose(code: UInt16, reason: ErrorCode, error: DomainError? = nil, awaitAnswer: Bool = true) {
        perform(machine.closeRequested(code: code, reason: reason, error: error, awaitAnswer: awaitAnswer))
    }

    // MARK: Actions

    /// Carries out what the state machine decided: the one place this handler acts.
    private func perform(_ action: Machine.Action) {
        switch action {
        case .none:
            break
        case .passRead:
            context?.read()
        case .handshake(let frame):
            handshake(frame)
        case .serve(let frame):
            session?.receive(frame)
        case .awaitConnect(let releasing):
            release(releasing)
            guard let context else { return }
            // The handshake's timeout counts from the accept: the grace has passed already.
            let configuration = gateway.configuration
            let rest = configuration.handshakeTimeout - configuration.edge.silentConnectionGrace
            context.eventLoop.assumeIsolated().scheduleTask(in: rest.timeAmount) { [weak self] in
                guard let self else { return }
                perform(machine.handshakeTimedOut())
            }
        case .requestHandshakeSlot:
            guard let context else { return }
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            let loop = context.eventLoop
            let (ticket, holding) = gateway.admission.requestHandshake(at: loop.now) {
                loop.execute { handler.value.perform(handler.value.machine.handshakeSlotGranted()) }
            }
            perform(machine.handshakeTicketIssued(ticket, holding: holding))
        case .authenticate(let connect):
            authenticate(connect)
        case .releaseSlot(let slot):
            release(slot)
        case .register(let opened, let connect):
            register(opened, connect: connect)
        case .goLive(let releasing, let held, let passRead):
            release(releasing)
            if connection?.outbound.release() == true { drain() }
            // Each frame again through the machine: one of them may close the connection.
            for frame in held { perform(machine.dataFrameReceived(frame)) }
            if passRead { context?.read() }
        case .answerPing(let ping, let throughQueue):
            let pong = FrameEncoding.control(.pong, ping.unmaskedData.readableBytesView)
            if throughQueue {
                // A client that pings and never reads is closed with 4008 like any slow consumer.
                connection?.push(pong)
            } else {
                raw.write(pong)
                raw.flush()
            }
        case .sendPing(let payload):
            var data = ByteBuffer()
            data.writeInteger(payload)
            raw.write(FrameEncoding.control(.ping, data.readableBytesView))
            raw.flush()
            scheduleHeartbeat()
        case .sendClose(let code, let reason, let error, let awaitAnswer):
            sendClose(code: code, reason: reason, error: error, awaitAnswer: awaitAnswer)
        case .answerClose(let code):
            guard let context else { return }
            let channel = context.channel
            connection?.outbound.finish()
            raw.writeAndFlush(FrameEncoding.close(code: code, reason: ""), on: context.eventLoop)
                .whenComplete { _ in channel.close(promise: nil) }
        case .closeChannel:
            context?.channel.close(promise: nil)
        case .cleanUp(let unregister, let releasing, let closeCode):
            cleanUp(unregister: unregister, releasing: releasing, closeCode: closeCode)
        }
    }

    /// Gives the admission gate's slot back.
    private func release(_ slot: Machine.Slot) {
        switch slot {
        case .accept:
            if let context { gateway.admission.admitted(context.channel) }
        case .handshake(let ticket):
            gateway.admission.release(ticket)
        case .none:
            break
        }
    }

    // MARK: Handshake

    /// The first data frame: it must be `connect`, in the protocol version this server speaks.
    private func handshake(_ frame: WebSocketFrame) {
        switch WebSocketGateway.connectFrame(frame) {
        case .failure(let refusal):
            serverClose(code: WebSocketCloseCode.protocolViolation, reason: refusal.code, error: refusal)
        case .success(let connect) where connect.token != nil && token != nil:
            let refusal = DomainError(
                .handshakeFailed, "Give the token in the Authorization header or in the connect frame, not both."
            )
            serverClose(code: WebSocketCloseCode.protocolViolation, reason: refusal.code, error: refusal)
        case .success(let connect):
            perform(machine.connectAccepted(connect))
        }
    }

    /// Reads the token and its user: on the event loop when the store answers inline, else in a short task.
    private func authenticate(_ connect: ConnectFrame) {
        guard let context else { return }
        // A browser cannot set the upgrade's Authorization header: its token comes in the connect frame.
        let token = connect.token ?? self.token
        if let inline = gateway.inlineReads {
            authenticated(gateway.authenticate(token: token, inline: inline))
            return
        }
        let gateway = self.gateway
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let loop = context.eventLoop
        Task {
            let opening = await gateway.authenticate(token: token)
            loop.execute { handler.value.authenticated(opening) }
        }
    }

    private func authenticated(_ opening: Result<WebSocketGateway.Opening, DomainError>) {
        switch opening {
        case .failure(let refusal): perform(machine.authenticationFailed(refusal))
        case .success(let opened): perform(machine.authenticated(opened))
        }
    }

    /// Registers the connection, sends `hello`, then what the client missed.
    private func register(_ opened: WebSocketGateway.Opening, connect: ConnectFrame) {
        guard let context, let socket else { return }
        let connection = ServerConnection(
            id: Secrets.randomID(prefix: "k_", length: 12), principal: opened.principal, socket: socket,
            outboundLimitBytes: gateway.configuration.outboundQueueLimitBytes,
            subscribesToAllPresence: connect.subscribePresenceForAllUsers ?? false, held: true
        )
        self.connection = connection
        session = FrameSession(connection: connection, gateway: gateway)
        gateway.register(connection, baseline: opened.baseline)
        expiryTicket = gateway.expiry.add(connection)
        logger.debug("WebSocket connected", metadata: logMetadata)

        raw.write(gateway.hello(opened, connection))
        if let inline = gateway.inlineReads {
            do {
                let plan = try gateway.replayPlan(
                    principal: opened.principal, resume: connect.resume, baseline: opened.baseline,
                    quietMark: opened.quietMark, inline: inline
                )
                if plan.ranges.isEmpty {
                    // Nothing to replay: the connection is live at once, without leaving the event loop.
                    for frame in WebSocketGateway.framesWithoutReplay(plan) { raw.write(frame) }
                    raw.flush()
                    perform(machine.caughtUp())
                    return
                }
                raw.flush()
                replay(plan, principal: opened.principal)
            } catch {
                catchUpFailed(error)
            }
            return
        }
        raw.flush()
        let gateway = self.gateway
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let loop = context.eventLoop
        Task {
            do {
                let plan = try await gateway.replayPlan(
                    principal: opened.principal, resume: connect.resume, baseline: opened.baseline
                )
                loop.execute { handler.value.replay(plan, principal: opened.principal) }
            } catch {
                loop.execute { handler.value.catchUpFailed(error) }
            }
        }
    }

    /// Sends what the client missed (reading it page by page), then `caughtUp`; then the connection is live.
    private func replay(_ plan: ReplayPlan, principal: UserPrincipal) {
        guard let context else { return }
        let gateway = self.gateway
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let loop = context.eventLoop
        Task {
            do {
                try await gateway.replay(plan, principal: principal) { frames in
                    try await loop.flatSubmit { handler.value.writeReplayed(frames, on: loop) }.get()
                }
                loop.execute { handler.value.perform(handler.value.machine.caughtUp()) }
            } catch {
                loop.execute { handler.value.catchUpFailed(error) }
            }
        }
    }

    /// Writes a page of replayed frames; the future completes when the last is written to the socket.
    private func writeReplayed(_ frames: [ByteBuffer], on loop: any EventLoop) -> EventLoopFuture<Void> {
        guard context != nil, machine.acceptsReplay, let last = frames.last else {
            return loop.makeFailedFuture(ChannelError.ioOnClosedChannel)
        }
        for frame in frames.dropLast() { raw.write(frame) }
        gateway.metrics.framesOut.increment(by: frames.count)
        return raw.writeAndFlush(last, on: loop)
    }

    private func catchUpFailed(_ error: any Error) {
        logger.debug("Catching up failed", metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
        serverClose(code: WebSocketCloseCode.internalError, reason: .internalError)
    }

    // MARK: Writing

    /// Writes what the connection's queue holds, as long as the socket takes it; one flush for all of it.
    func drain() {
        guard let context, let connection else { return }
        var wrote = false
        var count = 0
        defer {
            if wrote { raw.flush() }
            if count > 0 { gateway.metrics.framesOut.increment(by: count) }
        }
        while true {
            switch connection.outbound.take(blocked: !context.channel.isWritable) {
            case .idle:
                return
            case .close(let code, let reason):
                if wrote { raw.flush() }
                wrote = false
                serverClose(code: code, reason: reason)
                return
            case .frames(let frames):
                for (index, frame) in frames.enumerated() {
                    guard context.channel.isWritable else {
                        connection.outbound.putBack(frames[index...])
                        break
                    }
                    raw.write(frame)
                    wrote = true
                    count += 1
                }
            }
        }
    }

    // MARK: Closing

    private func sendClose(code: UInt16, reason: ErrorCode, error: DomainError?, awaitAnswer: Bool) {
        guard let context else { return }
        connection?.outbound.finish()
        if let error {
            raw.write(FrameEncoding.frame(.error(ErrorFrame(code: error.code, message: error.message))))
        }
        let written = raw.writeAndFlush(FrameEncoding.close(code: code, reason: reason.rawValue), on: context.eventLoop)
        let channel = context.channel
        if awaitAnswer {
            closeTimer = context.eventLoop.assumeIsolated().scheduleTask(
                in: gateway.configuration.closeTimeout.timeAmount
            ) { [self] in
                if case .closeChannel = machine.closeTimedOut() { channel.close(promise: nil) }
            }
        } else {
            written.whenComplete { _ in channel.close(promise: nil) }
        }
    }

    /// A close frame as RFC 6455 reads it: a one-byte payload, a code a peer may not send and a reason that is not
    /// UTF-8 are refused.
    static func peerClose(_ frame: WebSocketFrame) -> Machine.PeerClose {
        var data = frame.unmaskedData
        guard data.readableBytes > 0 else { return .empty }
        guard let code = data.readInteger(as: UInt16.self), isValidCloseCode(code) else { return .invalidCode }
        guard data.withUnsafeReadableBytes({ UTF8Validation.isValid($0) }) else { return .invalidReason }
        return .code(code)
    }

    /// Whether a peer may send this close code (RFC 6455 section 7.4 and the IANA registry): 1000-1003, 1007-1014,
    /// 3000-4999. 1004-1006 and 1015 are reserved; 1005 and 1006 are never sent.
    static func isValidCloseCode(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1014, 3000...4999: true
        default: false
        }
    }

    /// The channel is gone: unregister, stop the timers, drop what the connection held.
    private func cleanUp(unregister: Bool, releasing: Machine.Slot, closeCode: UInt16) {
        gateway.metrics.closed(code: closeCode)
        if unregister, let connection {
            connection.outbound.finish()
            gateway.unregister(connection)
            if let expiryTicket { gateway.expiry.remove(expiryTicket) }
            logger.debug("WebSocket disconnected", metadata: logMetadata)
        }
        closeTimer?.cancel()
        release(releasing)
        if let socket { gateway.sockets.remove(socket) }
        // The socket handle holds this handler (to run it from other threads): dropping it breaks the cycle, so the
        // handler, its socket handle and everything they hold are freed with the channel. Kept, every connection
        // leaked about 5 KiB.
        socket = nil
        connection = nil
        session = nil
    }

    // MARK: Heartbeat

    private func scheduleHeartbeat() {
        guard let context else { return }
        context.eventLoop.assumeIsolated().scheduleTask(in: gateway.configuration.heartbeatInterval.timeAmount) {
            [weak self] in
            guard let self else { return }
            perform(machine.pingDue())
        }
    }
}

extension UInt16 {
    init(webSocketErrorCode code: WebSocketErrorCode) {
        var buffer = ByteBuffer()
        buffer.write(webSocketErrorCode: code)
        self = buffer.readInteger(as: UInt16.self) ?? WebSocketCloseCode.normal
    }
}
