/// An error of the NATS client.
///
/// Every error has a stable ``code`` to match on and a human readable ``message``. The message never contains a
/// password or a token.
///
/// | code | cause | what the caller should do |
/// | --- | --- | --- |
/// | `invalidURL` | a server URL could not be parsed | fix the configuration |
/// | `tlsNotSupported` | a `tls://` URL, or a server that requires TLS | use a plain `nats://` server |
/// | `invalidSubject` | empty token, whitespace, or a wildcard where none is allowed | fix the subject |
/// | `invalidHeaders` | a header name or value that cannot be encoded | fix the headers |
/// | `payloadTooLarge` | payload (with headers) over the server's `max_payload` | split the payload |
/// | `outboundBufferFull` | `maxPendingBytes` would be exceeded | back off and retry later, or drop |
/// | `notConnected` | an operation that needs a live connection (flush) while disconnected | retry after reconnect |
/// | `timeout` | a flush, request or wait did not complete in time | retry |
/// | `noResponders` | a request found no subscriber for its subject | retry later, or report |
/// | `closed` | the connection's `run()` has ended | stop using the connection |
/// | `authorizationViolation` | every server refused the credentials | fix the credentials |
/// | `protocolError` | the server sent something the client cannot parse | none: the client reconnects |
/// | `serverError` | the server sent `-ERR` | look at the message |
/// | `maxReconnectsExceeded` | `maxReconnectAttempts` attempts in a row failed | stop, or start a new connection |
/// | `alreadyRunning` | `run()` was called twice | call `run()` once per connection |
public struct NATSError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A stable error code. New codes may be added; match the ones you handle and treat the others generically.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        /// The code as a stable string, e.g. `"outboundBufferFull"`.
        public let rawValue: String

        private init(_ rawValue: String) {
            self.rawValue = rawValue
        }

        /// A server URL could not be parsed.
        public static let invalidURL = Code("invalidURL")
        /// TLS was asked for (a `tls://` URL or a server requiring TLS); this client does not support it yet.
        public static let tlsNotSupported = Code("tlsNotSupported")
        /// A subject, reply subject or queue group is not valid.
        public static let invalidSubject = Code("invalidSubject")
        /// A header name or value cannot be encoded.
        public static let invalidHeaders = Code("invalidHeaders")
        /// The payload (headers included) is larger than the server's `max_payload`.
        public static let payloadTooLarge = Code("payloadTooLarge")
        /// The bounded outbound buffer (`maxPendingBytes`) is full.
        public static let outboundBufferFull = Code("outboundBufferFull")
        /// The operation needs a live connection.
        public static let notConnected = Code("notConnected")
        /// The operation did not complete in time.
        public static let timeout = Code("timeout")
        /// A request found no responder (the server answered with status 503).
        public static let noResponders = Code("noResponders")
        /// The connection has been closed for good.
        public static let closed = Code("closed")
        /// The server refused the credentials.
        public static let authorizationViolation = Code("authorizationViolation")
        /// The server sent something that is not valid NATS protocol.
        public static let protocolError = Code("protocolError")
        /// The server sent `-ERR`.
        public static let serverError = Code("serverError")
        /// `maxReconnectAttempts` connection attempts in a row failed.
        public static let maxReconnectsExceeded = Code("maxReconnectsExceeded")
        /// `run()` was called more than once.
        public static let alreadyRunning = Code("alreadyRunning")
        /// The server does not support headers.
        public static let headersNotSupported = Code("headersNotSupported")

        /// The code's string.
        public var description: String { self.rawValue }
    }

    /// The stable code.
    public var code: Code
    /// What happened, for people. Never contains credentials.
    public var message: String

    /// Creates an error.
    /// - Parameters:
    ///   - code: The stable code.
    ///   - message: What happened.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// `NATSError(code): message`.
    public var description: String {
        "NATSError(\(self.code)): \(self.message)"
    }
}
