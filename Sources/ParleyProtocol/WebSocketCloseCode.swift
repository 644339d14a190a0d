/// WebSocket close codes the server uses, with the error code it sends as the close reason.
public enum WebSocketCloseCode {
    /// Normal closure: the client asked to close.
    public static let normal: UInt16 = 1000
    /// The server is shutting down (`ERR_SERVER_SHUTTING_DOWN`), or the client did not answer the server's ping
    /// before the next one was due (`ERR_HEARTBEAT_TIMEOUT`). Reconnect with backoff.
    public static let goingAway: UInt16 = 1001
    /// The client broke the WebSocket protocol itself (`ERR_WEBSOCKET_PROTOCOL`): an invalid frame.
    public static let protocolError: UInt16 = 1002
    /// A frame was larger than the server accepts (`ERR_MESSAGE_TOO_LARGE`).
    public static let messageTooBig: UInt16 = 1009
    /// A text frame (or a close reason) that is not valid UTF-8 (RFC 6455 section 8.1).
    public static let invalidPayload: UInt16 = 1007
    /// The server failed while setting up the connection (`ERR_INTERNAL`). Reconnect with backoff.
    public static let internalError: UInt16 = 1011
    /// The server node must resynchronise with the other nodes (`ERR_NODE_RESYNC`). Reconnect and resume.
    public static let serviceRestart: UInt16 = 1012
    /// The token is missing, unknown, revoked or expired (`ERR_AUTH_TOKEN_INVALID`, `ERR_AUTH_REQUIRED`).
    /// Do not reconnect with the same token.
    public static let authenticationFailed: UInt16 = 4001
    /// The connection did not read its events fast enough (`ERR_SLOW_CONSUMER`). Reconnect.
    public static let slowConsumer: UInt16 = 4008
    /// The client broke the protocol: no `connect` first (`ERR_HANDSHAKE_FAILED`), an unsupported version
    /// (`ERR_UNSUPPORTED_PROTOCOL_VERSION`), or too many malformed frames (`ERR_MALFORMED_FRAME`).
    public static let protocolViolation: UInt16 = 4400
}
