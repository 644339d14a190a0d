import Foundation

/// An entry of the outbox: a message the app sent, or a change it made to a message (an edit, a deletion, a
/// reaction), not yet confirmed by the server (or refused by it).
///
/// Its `clientMessageId` is chosen once, when the app makes it, and goes with every attempt: however many times a
/// send is retried (after a lost connection, a lost acknowledgement or an app restart), the server stores it once;
/// an edit, a deletion or a reaction made again changes nothing the second time. Entries go to the server one at a
/// time, in the order the app made them.
public struct OutgoingMessage: Sendable, Hashable, Codable, Identifiable {
    /// Where an entry stands.
    public enum State: Sendable, Hashable, Codable {
        /// Waiting to be sent, or being sent.
        case pending
        /// Done: the message as the server stored it (sent, edited or deleted).
        case sent(Message)
        /// A reaction done: the message's reactions after it.
        case reacted(ReactionList)
        /// Refused by the server (`ERR_NOT_A_PARTICIPANT`, `ERR_CONVERSATION_NOT_FOUND` ...). Retry or cancel it.
        case failed(code: ErrorCode, message: String)
        /// Cancelled by the app before it was sent.
        case cancelled
    }

    /// What an entry does.
    public enum Action: Sendable, Hashable, Codable {
        /// Sends a new message (`parts`, `metadata`, `alert`, `replyTo`, `mentions`).
        case send
        /// Replaces a message's content with `parts` (and `metadata`, `mentions` when set).
        case edit(MessageRef)
        /// Deletes a message.
        case delete(MessageRef)
        /// Adds (`add`) or removes a reaction.
        case react(MessageRef, key: String, add: Bool)
    }

    /// The entry's id; for a send, the message's client message id.
    public var clientMessageId: String
    /// Where the message goes (or the conversation of the message changed).
    public var receiver: Receiver
    /// What the entry does: send, edit, delete or react.
    public var action: Action
    /// A send's content, or an edit's new content.
    public var parts: [MessagePart]
    /// Custom data the app attaches to the message.
    public var metadata: JSONValue?
    /// Text for a send's push notification; defaults to the message's text.
    public var alert: String?
    /// The id of the message a send replies to.
    public var replyTo: String?
    /// The uids a send or an edit mentions.
    public var mentions: [String]?
    /// A silent send (``ParleyClient/sendSilentMessage(parts:to:metadata:replyTo:mentions:clientMessageId:)``): no
    /// unread count, unread mention or push for anyone.
    public var silent: Bool = false
    /// When the app made it (epoch ms, device clock).
    public var createdAt: Int64
    /// Pending, sent, reacted, failed or cancelled.
    public var state: State
    /// Attempts made so far.
    public var attempts: Int
    /// A send's file (``ParleyClient/queueFile(at:to:name:contentType:caption:preview:replyTo:mentions:clientMessageId:)``):
    /// uploaded first, then the message goes with a `file` part naming it before `parts` (the caption).
    public var file: OutgoingFile?

    /// While a file is uploaded: how far it has come (also in ``file``).
    public var uploadProgress: FileTransferProgress? { file?.progress }

    /// The entry's id: ``clientMessageId``.
    public var id: String { clientMessageId }

    /// Creates an entry (a send by default, pending).
    public init(
        clientMessageId: String, receiver: Receiver, action: Action = .send, parts: [MessagePart],
        metadata: JSONValue? = nil, alert: String? = nil, replyTo: String? = nil, mentions: [String]? = nil,
        createdAt: Int64, state: State = .pending, attempts: Int = 0, file: OutgoingFile? = nil
    ) {
        self.clientMessageId = clientMessageId
        self.receiver = receiver
        self.action = action
        self.parts = parts
        self.metadata = metadata
        self.alert = alert
        self.replyTo = replyTo
        self.mentions = mentions
        self.createdAt = createdAt
        self.state = state
        self.attempts = attempts
        self.file = file
    }

    enum CodingKeys: String, CodingKey {
        case clientMessageId, receiver, action, parts, metadata, alert, replyTo, mentions, silent, createdAt, state,
            attempts, file
    }

    /// Decodes an entry; one saved by an earlier version without action or file is a send without a file.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        clientMessageId = try container.decode(String.self, forKey: .clientMessageId)
        receiver = try container.decode(Receiver.self, forKey: .receiver)
        // Outboxes saved before edits, deletions and reactions hold sends only.
        action = try container.decodeIfPresent(Action.self, forKey: .action) ?? .send
        parts = try container.decode([MessagePart].self, forKey: .parts)
        metadata = try container.decodeIfPresent(JSONValue.self, forKey: .metadata)
        alert = try container.decodeIfPresent(String.self, forKey: .alert)
        replyTo = try container.decodeIfPresent(String.self, forKey: .replyTo)
        mentions = try container.decodeIfPresent([String].self, forKey: .mentions)
        // Outboxes saved before silent messages hold none.
        silent = try container.decodeIfPresent(Bool.self, forKey: .silent) ?? false
        createdAt = try container.decode(Int64.self, forKey: .createdAt)
        state = try container.decode(State.self, forKey: .state)
        attempts = try container.decode(Int.self, forKey: .attempts)
        // Outboxes saved before files hold no file.
        file = try container.decodeIfPresent(OutgoingFile.self, forKey: .file)
    }

    /// The parts a send goes with: the uploaded file's part first (when there is a file), then ``parts``.
    func partsToSend() -> [MessagePart] {
        guard let file, let attachmentId = file.attachmentId else { return parts }
        let info = FileInfo(
            id: attachmentId, name: file.name, contentType: file.contentType, size: file.size, sha256: "",
            preview: file.preview
        )
        return [MessagePart(type: .file, file: info)] + parts
    }
}

/// A message an edit, a deletion or a reaction applies to: by its server id, or, for a message still in the outbox
/// (sent while offline, say), by its client message id; the SDK uses the server id once the send is done.
public enum MessageRef: Sendable, Hashable, Codable, CustomStringConvertible {
    /// A message the server stored, by its id.
    case id(String)
    /// A message still in the outbox, by its client message id.
    case queued(clientMessageId: String)

    /// The id, or `queued:` and the client message id.
    public var description: String {
        switch self {
        case .id(let id): id
        case .queued(let clientMessageId): "queued:\(clientMessageId)"
        }
    }
}

/// What an outbox entry came to.
enum OutboxOutcome: Sendable {
    case message(Message)
    case reactions(ReactionList)

    var message: Message? {
        if case .message(let message) = self { return message }
        return nil
    }

    var reactions: ReactionList? {
        if case .reactions(let reactions) = self { return reactions }
        return nil
    }
}

/// Receives the state changes of outgoing messages (pending, sent, failed, cancelled), in order.
public protocol OutboxListener: AnyObject, Sendable {
    /// Called on the callback queue with the entry in its new state.
    func onMessageStateChanged(_ message: OutgoingMessage)
}

/// The outbox's codes.
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
