/// A stable, documented error code such as `ERR_NOT_LOGGED_IN`.
///
/// Codes are strings so that new ones never break existing clients: compare against the constants,
/// and treat an unknown code by its HTTP status or close code. Every code is listed with its cause and
/// the caller's remedy in docs/PROTOCOL.md (server codes) and docs/SDK.md (SDK codes).
public struct ErrorCode: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    /// The code, for example `ERR_NOT_LOGGED_IN`.
    public let rawValue: String
    /// Creates a code from its string.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Creates a code from its string.
    public init(_ rawValue: String) { self.rawValue = rawValue }
    /// Creates a code from a string literal.
    public init(stringLiteral value: String) { self.rawValue = value }
    /// The code itself.
    public var description: String { rawValue }

    /// Decodes a code from a JSON string.
    public init(from decoder: any Decoder) throws {
        self.rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    /// Encodes the code as a JSON string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

// MARK: Server codes: sent in REST error bodies, WebSocket error frames and close reasons.
extension ErrorCode {
    /// The App ID is not known to this server.
    public static let invalidAppID: ErrorCode = "ERR_INVALID_APP_ID"
    /// The request needs credentials and carries none.
    public static let authRequired: ErrorCode = "ERR_AUTH_REQUIRED"
    /// The auth token is unknown, revoked or expired. Log in again.
    public static let authTokenInvalid: ErrorCode = "ERR_AUTH_TOKEN_INVALID"
    /// The Auth Key does not belong to the app.
    public static let authKeyInvalid: ErrorCode = "ERR_AUTH_KEY_INVALID"
    /// The REST API key is unknown.
    public static let apiKeyInvalid: ErrorCode = "ERR_API_KEY_INVALID"
    /// The caller is authenticated but may not do this.
    public static let forbidden: ErrorCode = "ERR_FORBIDDEN"
    /// A browser's page on this origin may not call the REST API: the origin is in no app's allowed origins (a CORS
    /// preflight's answer).
    public static let originNotAllowed: ErrorCode = "ERR_ORIGIN_NOT_ALLOWED"
    /// The request body, parameters or a field are invalid.
    public static let badRequest: ErrorCode = "ERR_BAD_REQUEST"
    /// The uid is not valid (1-100 characters of letters, digits, `_`, `-`, `.`, `@`).
    public static let invalidUID: ErrorCode = "ERR_INVALID_UID"
    /// No such user in this app.
    public static let uidNotFound: ErrorCode = "ERR_UID_NOT_FOUND"
    /// The app's operator deactivated this user: they cannot log in, get a token or keep a connection until the
    /// operator reactivates them.
    public static let userDeactivated: ErrorCode = "ERR_USER_DEACTIVATED"
    /// A user with this uid already exists in this app.
    public static let uidAlreadyExists: ErrorCode = "ERR_UID_ALREADY_EXISTS"
    /// No such auth token for this user.
    public static let tokenNotFound: ErrorCode = "ERR_TOKEN_NOT_FOUND"
    /// No such conversation, or not one the caller may see.
    public static let conversationNotFound: ErrorCode = "ERR_CONVERSATION_NOT_FOUND"
    /// The caller can see the conversation but is not a participant.
    public static let notAParticipant: ErrorCode = "ERR_NOT_A_PARTICIPANT"
    /// No message with this id in the conversation (to edit, delete, react to, reply to or read).
    public static let messageNotFound: ErrorCode = "ERR_MESSAGE_NOT_FOUND"
    /// The message was deleted: it cannot be edited, reacted to or replied to (HTTP 410).
    public static let messageDeleted: ErrorCode = "ERR_MESSAGE_DELETED"
    /// A message holds as many reaction keys as it may (50), or the caller gave it as many as one participant may
    /// (20) (HTTP 409).
    public static let reactionLimit: ErrorCode = "ERR_REACTION_LIMIT"
    /// A message search took longer than the server allows (3 s) and was stopped: narrow it (HTTP 503).
    public static let searchTimeout: ErrorCode = "ERR_SEARCH_TIMEOUT"
    /// A conversation holds as many pinned messages as it may (50) (HTTP 409).
    public static let pinLimit: ErrorCode = "ERR_PIN_LIMIT"
    /// One of the two participants of a direct conversation blocked the other: no new conversation, message, edit or
    /// reaction between them until the block is lifted (HTTP 403).
    public static let blocked: ErrorCode = "ERR_BLOCKED"
    /// The caller is muted in this conversation: they read, but cannot send, edit, react or type (HTTP 403).
    public static let muted: ErrorCode = "ERR_MUTED"
    /// The user is banned from this group: they cannot join it, be added to it or read it until the ban is lifted or
    /// its `until` passes (HTTP 403).
    public static let banned: ErrorCode = "ERR_BANNED"
    /// The user is not banned from this conversation (a ban that ended counts as none): nothing to lift (HTTP 404).
    public static let banNotFound: ErrorCode = "ERR_BAN_NOT_FOUND"
    /// A user blocks as many users as one may (1,000) (HTTP 409).
    public static let blockLimit: ErrorCode = "ERR_BLOCK_LIMIT"
    /// No report with this id in the app.
    public static let reportNotFound: ErrorCode = "ERR_REPORT_NOT_FOUND"
    /// No webhook endpoint (or delivery of it) with this id in the app (HTTP 404).
    public static let webhookNotFound: ErrorCode = "ERR_WEBHOOK_NOT_FOUND"
    /// The app has as many webhook endpoints as it may (20) (HTTP 409).
    public static let webhookLimit: ErrorCode = "ERR_WEBHOOK_LIMIT"
    /// A message has no parts, or only empty ones.
    public static let messageEmpty: ErrorCode = "ERR_MESSAGE_EMPTY"
    /// A message is larger than the server's limit.
    public static let messageTooLarge: ErrorCode = "ERR_MESSAGE_TOO_LARGE"
    /// A WebSocket frame is not valid JSON or not a valid frame.
    public static let malformedFrame: ErrorCode = "ERR_MALFORMED_FRAME"
    /// A WebSocket frame has a `type` this server does not know.
    public static let unknownFrameType: ErrorCode = "ERR_UNKNOWN_FRAME_TYPE"
    /// The first frame of a connection was not `connect`, or did not come in time.
    public static let handshakeFailed: ErrorCode = "ERR_HANDSHAKE_FAILED"
    /// The client speaks a protocol version this server does not.
    public static let unsupportedProtocolVersion: ErrorCode = "ERR_UNSUPPORTED_PROTOCOL_VERSION"
    /// The client sends faster than the server allows.
    public static let rateLimited: ErrorCode = "ERR_RATE_LIMITED"
    /// The connection could not keep up with its events and was closed.
    public static let slowConsumer: ErrorCode = "ERR_SLOW_CONSUMER"
    /// The server is shutting down; reconnect later.
    public static let serverShuttingDown: ErrorCode = "ERR_SERVER_SHUTTING_DOWN"
    /// The server is starting and takes no clients yet (`GET /health/ready`, HTTP 503).
    public static let notReady: ErrorCode = "ERR_NOT_READY"
    /// The server's database does not answer (`GET /health/ready`, HTTP 503).
    public static let databaseUnavailable: ErrorCode = "ERR_DATABASE_UNAVAILABLE"
    /// The server's storage is full (507): nothing of the request was stored. Try again once the operator freed space.
    public static let storageFull: ErrorCode = "ERR_STORAGE_FULL"
    /// The node lost its notification channel to the other nodes for a moment; it closes its sockets (1012) so that
    /// clients resume and miss nothing. Reconnect.
    public static let nodeResync: ErrorCode = "ERR_NODE_RESYNC"
    /// The client did not answer the server's WebSocket ping before the next one was due (close 1001). Reconnect.
    public static let heartbeatTimeout: ErrorCode = "ERR_HEARTBEAT_TIMEOUT"
    /// The client broke the WebSocket protocol itself (an invalid frame: bad opcode, reserved bits, a control
    /// frame too long, fragments out of order; close 1002). Fix the client.
    public static let webSocketProtocolError: ErrorCode = "ERR_WEBSOCKET_PROTOCOL"
    /// A text frame or a close reason is not valid UTF-8 (close 1007). Fix the client.
    public static let invalidUTF8: ErrorCode = "ERR_INVALID_UTF8"
    /// The device id of `PUT /v1/me/devices/{deviceId}` is not 1-100 letters, digits, `_`, `-`, `.` or `:`.
    public static let invalidDeviceId: ErrorCode = "ERR_INVALID_DEVICE_ID"
    /// A push token is not an even number of 16 to 400 hexadecimal digits.
    public static let invalidDeviceToken: ErrorCode = "ERR_INVALID_DEVICE_TOKEN"
    /// The caller has no device registered with this id.
    public static let deviceNotFound: ErrorCode = "ERR_DEVICE_NOT_FOUND"
    /// No such route.
    public static let notFound: ErrorCode = "ERR_NOT_FOUND"
    /// An unexpected server failure. Retry later.
    public static let internalError: ErrorCode = "ERR_INTERNAL"
    /// A name, description, avatar URL or metadata is longer than the server keeps (see PROTOCOL.md, "Limits").
    public static let fieldTooLarge: ErrorCode = "ERR_FIELD_TOO_LARGE"
    /// The request body is larger than the server accepts (HTTP 413); it was refused before it was read.
    public static let requestTooLarge: ErrorCode = "ERR_REQUEST_TOO_LARGE"
    /// The request's head or body did not arrive in time (HTTP 408); the connection is closed.
    public static let requestTimeout: ErrorCode = "ERR_REQUEST_TIMEOUT"
    /// The request line is longer than the server reads (HTTP 414).
    public static let uriTooLong: ErrorCode = "ERR_URI_TOO_LONG"
    /// The request's header fields are too large or too many (HTTP 431).
    public static let headersTooLarge: ErrorCode = "ERR_HEADERS_TOO_LARGE"
    /// The request method is not one the server implements (HTTP 501).
    public static let notImplemented: ErrorCode = "ERR_NOT_IMPLEMENTED"
    /// The request's HTTP version is not 1.0 or 1.1 (HTTP 505).
    public static let httpVersionNotSupported: ErrorCode = "ERR_HTTP_VERSION_NOT_SUPPORTED"
    /// An upload larger than the server takes (HTTP 413); refused before its body is read.
    public static let fileTooLarge: ErrorCode = "ERR_FILE_TOO_LARGE"
    /// An upload without `Content-Length` (HTTP 411): uploads say their size up front.
    public static let lengthRequired: ErrorCode = "ERR_LENGTH_REQUIRED"
    /// An upload whose bytes are not what it says: an image type whose bytes are not that image, a body shorter or
    /// longer than its `Content-Length` (HTTP 400).
    public static let fileInvalid: ErrorCode = "ERR_FILE_INVALID"
    /// No attachment with this id in this conversation (HTTP 404).
    public static let attachmentNotFound: ErrorCode = "ERR_ATTACHMENT_NOT_FOUND"
    /// The upload is already carried by a message (HTTP 409): upload the file again to send it again.
    public static let attachmentInUse: ErrorCode = "ERR_ATTACHMENT_IN_USE"
    /// A download link that is malformed, forged, or past its expiry (HTTP 403): ask for a new one.
    public static let linkInvalid: ErrorCode = "ERR_LINK_INVALID"
}
