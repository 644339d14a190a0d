import NIOCore

/// A message delivered to a subscription (MSG or HMSG).
public struct NATSMessage: Sendable {
    /// The subject it was published to.
    public var subject: String
    /// The subscription it was delivered for (``NATSSubscription/sid``).
    public var sid: UInt64
    /// The subject to reply to, if the publisher gave one.
    public var replyTo: String?
    /// The headers (HMSG), or `nil` for a plain MSG.
    public var headers: NATSHeaders?
    /// The payload.
    public var payload: ByteBuffer

    /// Creates a message.
    /// - Parameters:
    ///   - subject: The subject.
    ///   - sid: The subscription id.
    ///   - replyTo: The reply subject.
    ///   - headers: The headers.
    ///   - payload: The payload.
    public init(
        subject: String, sid: UInt64, replyTo: String? = nil, headers: NATSHeaders? = nil,
        payload: ByteBuffer
    ) {
        self.subject = subject
        self.sid = sid
        self.replyTo = replyTo
        self.headers = headers
        self.payload = payload
    }

    /// The bytes this message counts for against an inbox's `maxBytes`: payload, subject and reply subject.
    var accountedBytes: Int {
        self.payload.readableBytes + self.subject.utf8.count + (self.replyTo?.utf8.count ?? 0)
    }
}

extension NATSMessage: Equatable {
    /// Messages are equal when all their fields are.
    public static func == (lhs: NATSMessage, rhs: NATSMessage) -> Bool {
        lhs.subject == rhs.subject && lhs.sid == rhs.sid && lhs.replyTo == rhs.replyTo
            && lhs.headers == rhs.headers && lhs.payload == rhs.payload
    }
}
