import ParleyProtocol
import ParleyStore

/// The life of one server WebSocket, from the upgrade to the closed socket: the admission slot it holds, the handshake
/// (`connect`, then authentication, then catching up), the frames that wait meanwhile, the live phase, the heartbeat
/// and the close handshake.
///
/// Pure: no I/O, no clock. ``WebSocketConnectionHandler`` tells it what happened on the channel and on its timers, and
/// carries out the one ``Action`` each event returns, on the channel's event loop (`perform`). Generic over what it
/// holds but never looks into (the frames, what authentication found), so that tests can drive it with plain values.
struct WebSocketConnectionStateMachine<Frame, Opening> {
    enum State: Equatable {
        /// Upgraded; waiting for the client's `connect` frame.
        case awaitingConnect
        /// `connect` received; the token and the user are being read.
        case authenticating
        /// Registered with the hub; what the client missed is being sent. Live frames wait in the queue.
        case catchingUp
        /// `caughtUp` sent; frames flow both ways.
        case live
        /// The server sent its close frame and waits for the client's.
        case closing
        /// The channel is closed.
        case closed
    }

    /// The admission gate's slot the connection holds (``AdmissionGate``): the one taken at its accept, until it is
    /// live or its client is slow to send `connect`; or one asked for again for the handshake.
    enum Slot: Equatable {
        case accept
        case handshake(AdmissionGate.Ticket)
        case none
    }

    /// A close frame from the client, as read.
    enum PeerClose: Equatable {
        /// No payload: 1005 for the metrics, answered with 1000.
        case empty
        case code(UInt16)
        /// A code a peer may not send, or a one-byte payload: answered with 1002.
        case invalidCode
        /// A reason that is not UTF-8: answered with 1007.
        case invalidReason
    }

    /// What the handler does next. Each event returns one.
    enum Action {
        case none
        /// Pass the channel's read request on.
        case passRead
        /// The first data frame: read it as `connect`.
        case handshake(Frame)
        /// Hand the frame to the connection's frame session.
        case serve(Frame)
        /// The client was slow to send `connect`: give `releasing` back to the gate, and start the handshake's timeout.
        case awaitConnect(releasing: Slot)
        /// Ask the admission gate for a handshake slot (the accept slot was given up).
        case requestHandshakeSlot
        /// Read the token and its user.
        case authenticate(ConnectFrame)
        /// Give this slot back to the gate.
        case releaseSlot(Slot)
        /// Register with the hub, send `hello`, then what the client missed.
        case register(Opening, ConnectFrame)
        /// `caughtUp` was written: give `releasing` back, let the live queue flow, hand over the frames that waited
        /// (each through ``dataFrameReceived(_:)`` again) and pass a read that was withheld.
        case goLive(releasing: Slot, held: [Frame], passRead: Bool)
        /// Answer a ping with its payload: through the connection's bounded queue once registered, else straight to the
        /// socket.
        case answerPing(Frame, throughQueue: Bool)
        /// Send a ping carrying this payload and schedule the next heartbeat.
        case sendPing(UInt64)
        /// Send an error frame (when there is one) and a close frame, then wait for the client's close (at most the
        /// close timeout) or, without `awaitAnswer`, close the channel once it is written.
        case sendClose(code: UInt16, reason: ErrorCode, error: DomainError?, awaitAnswer: Bool)
        /// Answer the client's close frame with its code, then close the channel.
        case answerClose(code: UInt16)
        case closeChannel
        /// The channel closed: count the close code, unregister the connection when it was registered, give the slot
        /// back, stop the timers.
        case cleanUp(unregister: Bool, releasing: Slot, closeCode: UInt16)
    }

    private(set) var state: State = .awaitingConnect
    private var slot: Slot = .accept
    /// The client's `connect`, from when it arrived until authentication answered.
    private var connect: ConnectFrame?
    /// Whether the connection is registered with the hub (from authentication until the channel closes).
    private var registered = false
    /// Data frames that arrived before the connection was live.
    private var held: [Frame] = []
    /// A read asked for while the connection was not live; passed on when it is.
    private var readWithheld = false
    /// The payload of the last ping sent and not answered yet.
    private var unansweredPing: UInt64?
    private var pingsSent: UInt64 = 0
    /// The close code sent or received first, for the metrics.
    private var closeCode: UInt16?

    // MARK: Handshake

    /// The grace for `connect` ended. When the timer fired late (a busy loop may not have read what arrived), a
    /// connection keeps its slot.
    mutating func connectGraceEnded(late: Bool) -> Action {
        guard state == .awaitingConnect else { return .none }
        guard slot == .accept, !late else { return .awaitConnect(releasing: .none) }
        slot = .none
        return .awaitConnect(releasing: .accept)
    }

    /// The handshake's timeout: a client that has not sent `connect` yet is closed with 4400.
    mutating func handshakeTimedOut() -> Action {
        guard state == .awaitingConnect else { return .none }
        return closeRequested(code: WebSocketCloseCode.protocolViolation, reason: .handshakeFailed)
    }

    /// The first frame was a valid `connect`: authentication starts, at once when the accept slot is still held.
    mutating func connectAccepted(_ connect: ConnectFrame) -> Action {
        guard state == .awaitingConnect else { return .none }
        state = .authenticating
        self.connect = connect
        return slot == .accept ? .authenticate(connect) : .requestHandshakeSlot
    }

    /// The gate gave a ticket for the handshake, `holding` a slot already or to be granted later
    /// (``handshakeSlotGranted()``).
    mutating func handshakeTicketIssued(_ ticket: AdmissionGate.Ticket, holding: Bool) -> Action {
        slot = .handshake(ticket)
        return holding ? handshakeSlotGranted() : .none
    }

    /// The gate granted the handshake's slot.
    mutating func handshakeSlotGranted() -> Action {
        guard state == .authenticating, let connect else { return releaseSlot() }
        return .authenticate(connect)
    }

    /// The token and its user were found.
    mutating func authenticated(_ opening: Opening) -> Action {
        switch state {
        case .authenticating:
            guard let connect else { preconditionFailure("authenticated() without connect") }
            state = .catchingUp
            registered = true
            self.connect = nil
            return .register(opening, connect)
        case .awaitingConnect, .catchingUp, .live:
            preconditionFailure("authenticated() in state \(state)")
        case .closing, .closed:
            // The socket closed (or began closing) meanwhile: the answer is forgotten.
            return .none
        }
    }

    /// The token or its user was refused: the client is told why, and closed with 4001 (1001 when the server is
    /// shutting down, 1011 when the store failed).
    mutating func authenticationFailed(_ refusal: DomainError) -> Action {
        switch state {
        case .authenticating:
            let code =
                switch refusal.code {
                case .serverShuttingDown: WebSocketCloseCode.goingAway
                case .internalError: WebSocketCloseCode.internalError
                default: WebSocketCloseCode.authenticationFailed
                }
            return closeRequested(code: code, reason: refusal.code, error: refusal)
        case .awaitingConnect, .catchingUp, .live:
            preconditionFailure("authenticationFailed() in state \(state)")
        case .closing, .closed:
            return .none
        }
    }

    /// Whether a page of replayed frames may still be written (the connection is catching up).
    var acceptsReplay: Bool { state == .catchingUp }

    /// Everything the client missed was written, then `caughtUp`: the connection goes live (unless it is closing).
    mutating func caughtUp() -> Action {
        guard state == .catchingUp else { return .none }
        state = .live
        let frames = held
        held = []
        let passRead = readWithheld
        readWithheld = false
        let releasing = slot
        slot = .none
        return .goLive(releasing: releasing, held: frames, passRead: passRead)
    }

    // MARK: Frames

    /// A text or binary frame arrived.
    mutating func dataFrameReceived(_ frame: Frame) -> Action {
        switch state {
        case .awaitingConnect: return .handshake(frame)
        case .authenticating, .catchingUp:
            held.append(frame)
            return .none
        case .live: return .serve(frame)
        case .closing, .closed: return .none
        }
    }

    /// The channel asks to read: not while the connection is being authenticated and caught up.
    mutating func readRequested() -> Action {
        switch state {
        case .authenticating, .catchingUp:
            readWithheld = true
            return .none
        case .awaitingConnect, .live, .closing, .closed:
            return .passRead
        }
    }

    /// A ping arrived. Before registration, a socket that does not take the pong at once (not `writable`) is closed
    /// as a slow consumer.
    mutating func pingReceived(_ ping: Frame, writable: Bool) -> Action {
        guard state != .closed else { return .none }
        if registered { return .answerPing(ping, throughQueue: true) }
        guard writable else {
            return closeRequested(code: WebSocketCloseCode.slowConsumer, reason: .slowConsumer, awaitAnswer: false)
        }
        return .answerPing(ping, throughQueue: false)
    }

    /// The heartbeat timer fired.
    mutating func pingDue() -> Action {
        switch state {
        case .awaitingConnect, .authenticating, .catchingUp, .live:
            if unansweredPing != nil {
                return closeRequested(code: WebSocketCloseCode.goingAway, reason: .heartbeatTimeout)
            }
            pingsSent += 1
            unansweredPing = pingsSent
            return .sendPing(pingsSent)
        case .closing, .closed:
            return .none
        }
    }

    /// A pong arrived; only the answer to the last ping counts.
    mutating func pongReceived(_ payload: UInt64?) {
        if let payload, payload == unansweredPing { unansweredPing = nil }
    }

    // MARK: Closing

    /// The server closes the connection (a refusal, a slow consumer, a revoked token, shutdown...). The first
    /// request wins; later ones are ignored.
    mutating func closeRequested(
        code: UInt16, reason: ErrorCode, error: DomainError? = nil, awaitAnswer: Bool = true
    ) -> Action {
        switch state {
        case .awaitingConnect, .authenticating, .catchingUp, .live:
            state = .closing
            held = []
            if closeCode == nil { closeCode = code }
            return .sendClose(code: code, reason: reason, error: error, awaitAnswer: awaitAnswer)
        case .closing, .closed:
            return .none
        }
    }

    /// The client sent a close frame: the answer to the server's ends the connection; otherwise it is answered with
    /// its own code, or refused when RFC 6455 does not allow it.
    mutating func closeFrameReceived(_ close: PeerClose) -> Action {
        switch state {
        case .closing:
            return .closeChannel
        case .closed:
            return .none
        case .awaitingConnect, .authenticating, .catchingUp, .live:
            let code: UInt16
            switch close {
            case .invalidCode:
                return closeRequested(
                    code: WebSocketCloseCode.protocolError, reason: .webSocketProtocolError, awaitAnswer: false)
            case .invalidReason:
                return closeRequested(
                    code: WebSocketCloseCode.invalidPayload, reason: .invalidUTF8, awaitAnswer: false)
            case .empty:
                code = WebSocketCloseCode.normal
                if closeCode == nil { closeCode = 1005 }
            case .code(let received):
                code = received
                if closeCode == nil { closeCode = received }
            }
            state = .closing
            held = []
            return .answerClose(code: code)
        }
    }

    /// The client did not answer the server's close frame in time.
    func closeTimedOut() -> Action {
        state == .closing ? .closeChannel : .none
    }

    /// The channel closed, whatever the reason. Once.
    mutating func channelClosed() -> Action {
        guard state != .closed else { return .none }
        state = .closed
        defer { (registered, held, slot, connect) = (false, [], .none, nil) }
        // 1006: the socket went without a close frame.
        return .cleanUp(unregister: registered, releasing: slot, closeCode: closeCode ?? 1006)
    }

    /// Gives whatever slot the connection holds back.
    private mutating func releaseSlot() -> Action {
        let releasing = slot
        slot = .none
        return releasing == .none ? .none : .releaseSlot(releasing)
    }
}

extension WebSocketConnectionStateMachine.Action: Equatable where Frame: Equatable, Opening: Equatable {}
