import ParleyProtocol

/// The life of one server WebSocket, from the upgrade to the closed socket: the handshake (`connect`, then
/// authentication, then catching up), the live phase, the heartbeat and the close handshake.
///
/// Pure: no I/O, no clock. ``WebSocketConnectionHandler`` feeds it what happened on the channel and on its timers and
/// performs the actions it returns, on the channel's event loop.
struct WebSocketConnectionStateMachine {
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

    /// What to do with a data frame that arrived.
    enum FrameDisposition: Equatable {
        /// The first frame: it must be `connect`.
        case handshake
        /// Keep it (and read no more) until the connection is live.
        case hold
        /// Hand it to the connection's frame session.
        case serve
        /// The connection is closing: drop it.
        case drop
    }

    /// What to do when authentication answered.
    enum AuthenticationAction: Equatable {
        /// Register the connection with the hub, send `hello`, then what the client missed.
        case register
        /// Tell the client why, then close with 4001.
        case refuse(ErrorCode)
        /// The socket closed (or began closing) meanwhile: forget the answer.
        case discard
    }

    enum PingAction: Equatable {
        /// Send a ping frame carrying this payload.
        case sendPing(UInt64)
        /// The previous ping was never answered: close with 1001 `ERR_HEARTBEAT_TIMEOUT`.
        case close(code: UInt16, reason: ErrorCode)
        case none
    }

    enum CloseAction: Equatable {
        /// Send a close frame (after an error frame, if any), then wait for the client's close.
        case sendClose(code: UInt16, reason: ErrorCode, errorFrame: Bool)
        case none
    }

    enum PeerCloseAction: Equatable {
        /// Answer the client's close frame with the same code, then close the channel.
        case answerAndClose
        /// The client answered the server's close: close the channel.
        case closeChannel
        case none
    }

    enum ChannelClosedAction: Equatable {
        /// Unregister the connection from the hub, presence and typing.
        case unregister
        case none
    }

    private(set) var state: State = .awaitingConnect
    /// Whether the connection is registered with the hub (from ``authenticated()`` until the channel closes).
    private var registered = false
    /// The payload of the last ping sent and not answered yet.
    private var unansweredPing: UInt64?
    private var pingsSent: UInt64 = 0

    /// A text or binary frame arrived.
    func dataFrameReceived() -> FrameDisposition {
        switch state {
        case .awaitingConnect: return .handshake
        case .authenticating, .catchingUp: return .hold
        case .live: return .serve
        case .closing, .closed: return .drop
        }
    }

    /// The first frame was a valid `connect`: authentication starts.
    mutating func connectAccepted() {
        guard case .awaitingConnect = state else { return }
        state = .authenticating
    }

    /// The token and its user were found.
    mutating func authenticated() -> AuthenticationAction {
        switch state {
        case .authenticating:
            state = .catchingUp
            registered = true
            return .register
        case .awaitingConnect, .catchingUp, .live:
            preconditionFailure("authenticated() in state \(state)")
        case .closing, .closed:
            return .discard
        }
    }

    /// The token or its user was refused.
    mutating func authenticationFailed(_ code: ErrorCode) -> AuthenticationAction {
        switch state {
        case .authenticating:
            return .refuse(code)
        case .awaitingConnect, .catchingUp, .live:
            preconditionFailure("authenticationFailed() in state \(state)")
        case .closing, .closed:
            return .discard
        }
    }

    /// Everything the client missed was written, then `caughtUp`. Returns whether the connection went live (false
    /// when it is closing meanwhile).
    mutating func caughtUp() -> Bool {
        guard case .catchingUp = state else { return false }
        state = .live
        return true
    }

    /// The handshake timer ran out: a client that has not sent `connect` yet is closed with 4400.
    mutating func handshakeTimedOut() -> CloseAction {
        guard case .awaitingConnect = state else { return .none }
        return closeRequested(code: WebSocketCloseCode.protocolViolation, reason: .handshakeFailed, errorFrame: false)
    }

    /// The heartbeat timer fired.
    mutating func pingDue() -> PingAction {
        switch state {
        case .awaitingConnect, .authenticating, .catchingUp, .live:
            if unansweredPing != nil {
                return .close(code: WebSocketCloseCode.goingAway, reason: .heartbeatTimeout)
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

    /// The server closes the connection (a refusal, a slow consumer, a revoked token, shutdown...). The first
    /// request wins; later ones are ignored.
    mutating func closeRequested(code: UInt16, reason: ErrorCode, errorFrame: Bool) -> CloseAction {
        switch state {
        case .awaitingConnect, .authenticating, .catchingUp, .live:
            state = .closing
            return .sendClose(code: code, reason: reason, errorFrame: errorFrame)
        case .closing, .closed:
            return .none
        }
    }

    /// The client sent a close frame.
    mutating func closeFrameReceived() -> PeerCloseAction {
        switch state {
        case .awaitingConnect, .authenticating, .catchingUp, .live:
            state = .closing
            return .answerAndClose
        case .closing:
            return .closeChannel
        case .closed:
            return .none
        }
    }

    /// The client did not answer the server's close frame in time.
    func closeTimedOut() -> Bool {
        state == .closing
    }

    /// The channel closed, whatever the reason.
    mutating func channelClosed() -> ChannelClosedAction {
        state = .closed
        defer { registered = false }
        return registered ? .unregister : .none
    }
}
