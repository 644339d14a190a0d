@_exported import ParleyProtocol

/// An error from the SDK or the server, with a stable documented ``code``.
///
/// Compare `error.code` with the constants (`.notLoggedIn`, `.authTokenInvalid` ...); docs/SDK.md lists every code
/// with its cause and what the app should do.
///
/// ```swift
/// do { try await client.connect() }
/// catch let error as ParleyError where error.code == .notLoggedIn { showLogin() }
/// ```
public struct ParleyError: Error, Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The documented code.
    public var code: ErrorCode
    /// What happened, for people (never contains tokens or keys).
    public var message: String
    /// The HTTP status or WebSocket close code that carried the error, when there was one.
    public var status: Int?
    /// Details of an underlying failure (for logs).
    public var underlying: String?
    /// With `ERR_RATE_LIMITED`: how long the server asks the client to wait before trying again.
    public var retryAfter: Duration?

    /// Creates an error.
    public init(
        _ code: ErrorCode, _ message: String, status: Int? = nil, underlying: String? = nil, retryAfter: Duration? = nil
    ) {
        self.code = code
        self.message = message
        self.status = status
        self.underlying = underlying
        self.retryAfter = retryAfter
    }

    /// CometChat-style accessor for ``code``.
    public var errorCode: String { code.rawValue }
    /// CometChat-style accessor for ``message``.
    public var errorDescription: String { message }

    /// The code and the message: never a token or a key.
    public var description: String { "\(code.rawValue): \(message)" }
    /// The description with the status and the underlying failure, for logs.
    public var debugDescription: String {
        var text = description
        if let status { text += " [status \(status)]" }
        if let underlying { text += " (\(underlying))" }
        return text
    }
}

// MARK: SDK codes (in addition to the server codes of `ErrorCode`).
/// The SDK's codes.
extension ErrorCode {
    /// No user is logged in. Call `login` first.
    public static let notLoggedIn: ErrorCode = "ERR_NOT_LOGGED_IN"
    /// `connect()` while the socket is already connected. Nothing to do.
    public static let alreadyConnected: ErrorCode = "ERROR_WEBSOCKETS_ALLREADY_IN_CONNECTED_STATE"
    /// `ping()` in auto mode. Enable manual mode with `autoEstablishSocketConnection(false)`.
    public static let pingNotAvailable: ErrorCode = "ERROR_PING_NOT_AVAILABLE"
    /// The WebSocket failed or closed unexpectedly. The SDK reconnects where the mode allows.
    public static let webSocketError: ErrorCode = "ERR_WEBSOCKET_ERROR"
    /// The device has no network. The SDK reconnects when it returns.
    public static let noInternet: ErrorCode = "ERR_NO_INTERNET"
    /// The app's token provider failed (threw, did not answer within `tokenRefreshTimeout`, gave a token the server
    /// refused or another user's) as many times in a row as `maximumTokenRefreshFailures` allows: the connection
    /// stops, as for a rejected token. Fix the provider's cause, then `connect()` or log in again.
    public static let tokenRefreshFailed: ErrorCode = "ERR_TOKEN_REFRESH_FAILED"
    /// The socket is not connected (for example `ping()` while disconnected).
    public static let notConnected: ErrorCode = "ERR_NOT_CONNECTED"
    /// The server did not answer in time.
    public static let timeout: ErrorCode = "ERR_TIMEOUT"
    /// The server could not be reached over HTTP.
    public static let serverUnreachable: ErrorCode = "ERR_SERVER_UNREACHABLE"
    /// The server answered something this SDK does not understand.
    public static let unexpectedResponse: ErrorCode = "ERR_UNEXPECTED_RESPONSE"
    /// The saved session could not be read or written.
    public static let storageError: ErrorCode = "ERR_STORAGE"
    /// A setting or argument is invalid (for example the server URL).
    public static let invalidArgument: ErrorCode = "ERR_INVALID_ARGUMENT"
    /// `handleNotification` while no chat is open, or a call on a closed ``ChatSession``. Open the chat with
    /// `openChat(conversationId:)`, or show the notification yourself.
    public static let chatNotOpened: ErrorCode = "ERR_CHAT_NOT_OPENED"
    /// The notification is not one of Parley's (no `parley` dictionary with a `conversationId`).
    public static let notAParleyNotification: ErrorCode = "ERR_NOT_A_PARLEY_NOTIFICATION"
}
