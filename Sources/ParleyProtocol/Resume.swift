/// What a reconnecting client already has: sent in `connect` so the server replays only what was missed.
public struct ResumeRequest: Codable, Sendable, Hashable {
    /// The position in the user's own stream (memberships) the client has seen; 0 for none.
    public var userSeq: Int64
    /// The last sequence number the client received, per conversation it knows.
    public var conversations: [String: Int64]

    /// Creates a resume request.
    public init(userSeq: Int64, conversations: [String: Int64]) {
        self.userSeq = userSeq
        self.conversations = conversations
    }
}

/// Sent after the replay of missed events (or, for a new client, right after `hello`): from here on, events are live.
///
/// `conversations` gives, for each conversation of the user, the last sequence number the client now has (a
/// client without a position for a conversation starts there; history before it is read over REST).
public struct CaughtUpFrame: Codable, Sendable, Hashable {
    /// The position in the user's own stream the client now has.
    public var userSeq: Int64
    /// For each conversation of the user, the last sequence number the client now has.
    public var conversations: [String: Int64]
    /// How many events the server replayed before this frame.
    public var replayed: Int

    /// Creates the frame.
    public init(userSeq: Int64, conversations: [String: Int64], replayed: Int = 0) {
        self.userSeq = userSeq
        self.conversations = conversations
        self.replayed = replayed
    }
}

/// The server cannot replay what the client missed in a conversation: `{"type":"resync",...}`, sent during the
/// replay in place of the missed events. The app should reload the conversation (its history over REST); the
/// client's position moves to `lastSeq`.
public struct ResyncFrame: Codable, Sendable, Hashable {
    /// The conversation to reload.
    public var conversationId: String
    /// `ERR_RESUME_TOO_FAR_BEHIND`, `ERR_HISTORY_TRIMMED` or `ERR_RESUME_POSITION_INVALID`.
    public var reason: ErrorCode
    /// The conversation's last sequence number now.
    public var lastSeq: Int64

    /// Creates the frame.
    public init(conversationId: String, reason: ErrorCode, lastSeq: Int64) {
        self.conversationId = conversationId
        self.reason = reason
        self.lastSeq = lastSeq
    }
}

/// A page of a conversation's events, in ascending sequence order: `GET /v1/conversations/{id}/events`.
public struct EventPage: Codable, Sendable, Hashable {
    /// The events of the page.
    public var events: [Event]
    /// Pass as `after` to get the next page; nil when there is nothing newer.
    public var nextCursor: String?

    /// Creates a page of events.
    public init(events: [Event], nextCursor: String? = nil) {
        self.events = events
        self.nextCursor = nextCursor
    }
}

extension ErrorCode {
    /// The events a client missed are older than the server keeps for replay. Reload the conversation.
    public static let historyTrimmed: ErrorCode = "ERR_HISTORY_TRIMMED"
    /// The client missed more events of a conversation than the server replays. Reload the conversation.
    public static let resumeTooFarBehind: ErrorCode = "ERR_RESUME_TOO_FAR_BEHIND"
    /// The client's position is ahead of the server's stream (the server's data was restored from an older
    /// backup). Reload the conversation.
    public static let resumePositionInvalid: ErrorCode = "ERR_RESUME_POSITION_INVALID"
}

extension EventName {
    /// Made by the SDK, never sent by the server: the replay after a (re)connect is over (``CaughtUpFrame``).
    public static let caughtUp: EventName = "parley.caughtUp"
    /// Made by the SDK from a `resync` frame or a failed backfill: reload the conversation (``ResyncFrame``).
    public static let resyncRequired: EventName = "parley.resyncRequired"
}
