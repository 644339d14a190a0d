import Foundation

/// A message in the outbox: written by the app, not yet confirmed by the server (or refused by it).
///
/// Its `clientMessageId` is chosen once, when the app sends it, and goes with every attempt: however many times
/// it is retried (after a lost connection, a lost acknowledgement or an app restart), the server stores it once.
public struct OutgoingMessage: Sendable, Hashable, Codable, Identifiable {
    /// Where a message stands.
    public enum State: Sendable, Hashable, Codable {
        /// Waiting to be sent, or being sent.
        case pending
        /// Stored by the server: the message with its sequence number.
        case sent(Message)
        /// Refused by the server (`ERR_NOT_A_PARTICIPANT`, `ERR_CONVERSATION_NOT_FOUND` ...). Retry or cancel it.
        case failed(code: ErrorCode, message: String)
        /// Cancelled by the app before it was sent.
        case cancelled
    }

    public var clientMessageId: String
    public var receiver: Receiver
    public var parts: [MessagePart]
    public var metadata: JSONValue?
    public var alert: String?
    /// When the app sent it (epoch ms, device clock).
    public var createdAt: Int64
    public var state: State
    /// Attempts made so far.
    public var attempts: Int

    public var id: String { clientMessageId }
}

/// Receives the state changes of outgoing messages (pending, sent, failed, cancelled), in order.
public protocol OutboxListener: AnyObject, Sendable {
    func onMessageStateChanged(_ message: OutgoingMessage)
}

extension ErrorCode {
    /// The outbox has no message with this client message id (it was sent, cancelled, or never queued).
    public static let outboxMessageNotFound: ErrorCode = "ERR_OUTBOX_MESSAGE_NOT_FOUND"
    /// The message is being sent right now: it cannot be cancelled (the server may already have it).
    public static let outboxMessageSending: ErrorCode = "ERR_OUTBOX_MESSAGE_SENDING"
    /// The message is not failed, so there is nothing to retry.
    public static let outboxMessageNotFailed: ErrorCode = "ERR_OUTBOX_MESSAGE_NOT_FAILED"
    /// The app cancelled the message before it was sent.
    public static let messageCancelled: ErrorCode = "ERR_MESSAGE_CANCELLED"
}

extension ParleyError {
    /// Whether a send that failed with this error should be tried again later (the network, the server's
    /// availability or the session may come back); otherwise the server refused the message for good.
    var isTransient: Bool {
        switch code {
        case .notConnected, .timeout, .serverUnreachable, .webSocketError, .noInternet, .rateLimited,
            .serverShuttingDown, .internalError, .notLoggedIn, .authTokenInvalid, .authRequired, .storageError,
            .unexpectedResponse:
            return true
        default:
            return (status ?? 0) >= 500
        }
    }
}
