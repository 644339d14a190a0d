import ParleyProtocol

/// What a new WebSocket starts from: its token, the token's user (nil when the user is gone), and the user's stream
/// positions read in the same transaction.
public struct ConnectionOpening: Sendable, Hashable {
    public var token: TokenRecord
    public var user: User?
    public var positions: StreamPositions

    public init(token: TokenRecord, user: User?, positions: StreamPositions) {
        self.token = token
        self.user = user
        self.positions = positions
    }
}

/// What catching a registered connection up starts from: the stream positions now, and the user's membership changes
/// since a position in their own stream.
public struct CatchUpState: Sendable, Hashable {
    public var positions: StreamPositions
    public var changes: [MembershipChange]

    public init(positions: StreamPositions, changes: [MembershipChange]) {
        self.positions = positions
        self.changes = changes
    }
}

/// The reads on the server's hot paths (a WebSocket handshake, presence, unread counts), answered at once on the
/// caller's thread.
///
/// A store adopts it when these reads (a few indexed rows, normally in memory) cost less than the hop to another
/// thread and back that an `async` read costs: SQLite does. The server then opens a connection without leaving the
/// socket's event loop. A store on a network database (PostgreSQL) does not adopt it; the server uses the `async`
/// reads of ``ParleyStore`` instead.
public protocol InlineReads: Sendable {
    /// The token with this hash, its user and their stream positions, in one read transaction; nil for an unknown
    /// token.
    func connectionOpening(tokenHash: [UInt8]) throws -> ConnectionOpening?
    /// The user's stream positions and their membership changes after `afterUserSeq` (at most `limit`), in one read
    /// transaction.
    func catchUpState(appId: String, uid: String, afterUserSeq: Int64, limit: Int) throws -> CatchUpState
    /// ``ParleyStore/contacts(appId:uid:)`` of each user, in one read transaction, in the order asked: for the
    /// presence changes of users who just connected.
    func contacts(of users: [(appId: String, uid: String)]) throws -> [[String]]
    /// The counts each request asks for (``UnreadRequest/reads``, as ``ParleyStore/unread(appId:uid:conversationIds:)``
    /// reads them), in one read transaction, in the order asked.
    func unread(_ requests: [UnreadRequest]) throws -> [UnreadSummary]
}

/// The unread counts the unread notifier wants read for a user: with a batch (``ParleyStore/apply(_:readingUnread:)``),
/// or on its own (``InlineReads/unread(_:)``).
public struct UnreadRequest: Sendable, Hashable {
    public var appId: String
    public var uid: String
    /// The conversations whose counts changed.
    public var conversationIds: [String]
    /// Whether every conversation of the user is read (the summary's total is then the user's, and it lists every
    /// conversation), or only ``conversationIds`` (the total is then their sum): a user in many conversations costs a
    /// read of all of them only when the notifier has no total of theirs to start from.
    public var everyConversation: Bool
    /// The notifier's mark for this read, not looked at by the store: reads of one user are applied in this order.
    public var ticket: UInt64
    /// With ``everyConversation``: a user in more conversations than this is not read (the read fails), so that a read
    /// with a batch stays short.
    public var maxConversations: Int?

    public init(
        appId: String, uid: String, conversationIds: [String], everyConversation: Bool = true, ticket: UInt64 = 0,
        maxConversations: Int? = nil
    ) {
        self.appId = appId
        self.uid = uid
        self.conversationIds = conversationIds
        self.everyConversation = everyConversation
        self.ticket = ticket
        self.maxConversations = maxConversations
    }

    /// What to read, as ``ParleyStore/unread(appId:uid:conversationIds:)`` takes it: nil for every conversation.
    public var reads: [String]? { everyConversation ? nil : conversationIds }
}

/// What a batch of commands did: each command's result, in order, and the unread counts read in the batch's
/// transaction (``ParleyStore/apply(_:readingUnread:)``).
public struct BatchOutcome: Sendable {
    public var results: [Result<CommandResult, DomainError>]
    public var unread: [(UnreadRequest, UnreadSummary)]

    public init(results: [Result<CommandResult, DomainError>], unread: [(UnreadRequest, UnreadSummary)]) {
        self.results = results
        self.unread = unread
    }
}

/// What a store can do beyond ``ParleyStore``, declared once by the store (``ParleyStore/capabilities``).
public struct StoreCapabilities: Sendable {
    /// The reads on the server's hot paths answered on the caller's thread; nil: the server uses the `async` reads.
    public var inlineReads: (any InlineReads)?
    /// Batches applied on the calling thread; nil: only ``ParleyStore/apply(_:readingUnread:)``.
    public var synchronousBatches: (any SynchronousBatches)?
    /// Whether one server at a time uses the database (SQLite's file): what an earlier run left leased in the push and
    /// webhook queues is its own, released when it starts.
    public var oneServerAtATime: Bool
    /// Whether new messages reach the search index only when ``ParleyStore/fileSearchIndex(limit:)`` files them after
    /// their commit (SQLite); false: with their transaction, so the call only files what was stored before the
    /// search existed (PostgreSQL).
    public var searchFiledAfterCommit: Bool

    public init(
        inlineReads: (any InlineReads)? = nil, synchronousBatches: (any SynchronousBatches)? = nil,
        oneServerAtATime: Bool = false, searchFiledAfterCommit: Bool = false
    ) {
        self.inlineReads = inlineReads
        self.synchronousBatches = synchronousBatches
        self.oneServerAtATime = oneServerAtATime
        self.searchFiledAfterCommit = searchFiledAfterCommit
    }
}

/// A store that applies a batch of commands on the calling thread, blocking it until the commit (SQLite: the writer's
/// connection, a page cache and a file, no round trip to a server).
///
/// The command writer then takes, stores and publishes each batch on one thread of its own: a batch is not handed
/// from the thread that takes it to the store's and back, and to a publishing task, which on two cores cost more
/// than storing a small batch.
public protocol SynchronousBatches: Sendable {
    /// ``ParleyStore/apply(_:readingUnread:)``, on the calling thread.
    func applySynchronously(
        _ commands: [Command], readingUnread wanted: ([Result<CommandResult, DomainError>]) -> [UnreadRequest]
    ) throws -> BatchOutcome
}
