import ParleyProtocol

/// Durable storage of a Parley server. Implementations: `SQLiteStore` (GRDB) and `PostgresStore` (postgres-nio); the
/// same conformance suite runs against each (Tests/ParleyStoreTests).
///
/// Reads may run concurrently. ``apply(_:)`` is the only way to change conversations: the server calls it from
/// one writer at a time and publishes the returned events in order. A store decides no command itself: it reads what
/// ``CommandDecisions`` needs, and writes the plan it returns.
public protocol ParleyStore: Sendable {
    /// Fails when the database cannot answer (used by `/health`).
    func checkHealth() async throws
    /// The store's use of its database now, for `/metrics`.
    var activity: StoreActivity { get }
    /// Releases the database.
    func close() async throws
    /// What the store can do beyond this protocol, declared by the store once: the server asks nothing of a store's
    /// type.
    var capabilities: StoreCapabilities { get }

    // MARK: Apps
    func insertApp(_ app: AppRecord) async throws
    /// Inserts the app only when the store has no app at all (atomically, also against other server nodes); returns
    /// whether it did.
    func insertFirstApp(_ app: AppRecord) async throws -> Bool
    func app(id: String) async throws -> AppRecord?
    func app(restAPIKeyHash: [UInt8]) async throws -> AppRecord?
    func apps() async throws -> [AppRecord]
    /// Replaces an app's key hashes. Returns false when there is no such app.
    func updateAppKeys(appId: String, authKeyHash: [UInt8], restAPIKeyHash: [UInt8]) async throws -> Bool
    /// Replaces an app's allowed web origins (``AppRecord/allowedOrigins``). Returns false when there is no such app.
    func updateAppOrigins(appId: String, origins: [String]) async throws -> Bool
    /// Sets or (nil) removes an app's own upload limit (``AppRecord/maxFileBytes``). Returns false when there is no
    /// such app.
    func updateAppFileLimit(appId: String, maxFileBytes: Int64?) async throws -> Bool
    /// Sets whom the app's users find by searching for users (``AppRecord/userDirectory``). Returns false when there is
    /// no such app.
    func updateAppUserDirectory(appId: String, visibility: UserDirectoryVisibility) async throws -> Bool
    /// Sets what becomes of a deleted user's messages (``AppRecord/deletedUserMessages``). Returns false when there is
    /// no such app.
    func updateAppDeletedUserMessages(appId: String, _ mode: DeletedUserMessages) async throws -> Bool
    /// The app's users in uid order, those after `after` (exclusive), at most `limit`.
    func users(appId: String, after: String?, limit: Int) async throws -> [User]
    /// Every conversation of the app that is not deleted, newest first (by `pk`), those before `beforePK`.
    func appConversations(appId: String, beforePK: Int64?, limit: Int) async throws -> [ConversationRow]
    /// How many users and (not deleted) conversations the app has.
    func appCounts(appId: String) async throws -> AppCounts

    // MARK: Users
    /// Throws ``DomainError`` `ERR_UID_ALREADY_EXISTS`.
    func insertUser(appId: String, _ user: User) async throws
    func user(appId: String, uid: String) async throws -> User?
    /// Returns the stored user, inserting `user` first when the uid is new.
    func ensureUser(appId: String, _ user: User) async throws -> User
    /// Deactivates (at `now`, epoch ms) or reactivates the user, with its `user.deactivate` / `user.reactivate` webhook
    /// event, in one transaction; a user already in that state is left as is (no event). Returns the user, nil when
    /// there is none.
    func setUserDeactivated(appId: String, uid: String, deactivated: Bool, now: Int64) async throws -> User?
    /// Returns nil when there is no such user.
    func updateUser(appId: String, uid: String, _ update: UpdateUserRequest, now: Int64) async throws -> User?

    /// The users `request` finds (``UserDirectory``), in its order, at most `request.limit`. A user's words are
    /// written with the user, in the same transaction, and again when their name changes.
    func searchUsers(_ request: UserSearchRequest) async throws -> UserSearchPage
    /// How many words of the app's users begin with each prefix, each counted to at most `cap` + 1 (the choice of
    /// ``UserSearchRequest/lead``).
    func userWordCounts(appId: String, prefixes: [String], cap: Int) async throws -> [Int]

    // MARK: Auth tokens
    func insertToken(_ token: TokenRecord) async throws
    func token(hash: [UInt8]) async throws -> TokenRecord?
    /// Live (not revoked, not expired at `now`) tokens of a user.
    func tokens(appId: String, uid: String, now: Int64) async throws -> [TokenRecord]
    /// Revokes the token; returns its record, or nil when the user has no live token with this id.
    func revokeToken(appId: String, uid: String, tokenId: String, now: Int64) async throws -> TokenRecord?
    /// Revokes every live token of the user; returns the ids.
    func revokeTokens(appId: String, uid: String, now: Int64) async throws -> [String]

    // MARK: Push devices
    /// Registers the user's device, or replaces its token. A token is held by one device of one user per app: the
    /// same platform token registered before by any other device (of this user or another) moves here, and that
    /// registration is removed. Keeps `createdAt` of a device already registered by this user.
    ///
    /// - Returns: The stored device.
    func putDevice(appId: String, uid: String, _ device: Device) async throws -> Device
    /// The user's registered devices, by device id.
    func devices(appId: String, uid: String) async throws -> [Device]
    /// Removes the user's device; returns false when the user has no device with this id.
    func deleteDevice(appId: String, uid: String, deviceId: String) async throws -> Bool
    /// Removes a device whose token the push service reported invalid, unless the device registered another token,
    /// or registered this one again after `invalidSince` (epoch milliseconds, nil: whenever); its waiting jobs go
    /// with it. Returns whether the device was removed.
    func removeInvalidToken(appId: String, uid: String, deviceId: String, token: String, invalidSince: Int64?)
        async throws -> Bool

    // MARK: Push queue
    /// The oldest outbox entries, at most `limit`.
    func pushOutbox(limit: Int) async throws -> [PushOutboxEntry]
    /// In one transaction: deletes each entry and inserts its jobs. An entry that is already gone (taken by another
    /// node) inserts nothing, so an entry yields its jobs once. Returns the number of jobs inserted.
    @discardableResult
    func expandPushOutbox(_ expansions: [PushExpansion]) async throws -> Int
    /// Leases due jobs (`notBefore <= now`, not leased by anyone until after `now`) to `owner` until `leaseUntil`,
    /// oldest first, at most `limit`. A job leased by a node that died becomes due again when its lease ends.
    func claimPushJobs(owner: String, now: Int64, leaseUntil: Int64, limit: Int) async throws -> [PushJob]
    /// Removes a job that was sent (or can never be).
    func completePushJob(id: Int64) async throws
    /// Gives a job back with its attempts counted, due again at `notBefore`.
    func retryPushJob(id: Int64, attempts: Int, notBefore: Int64) async throws
    /// Ends the leases of `owner` (every lease when nil): its jobs are due again at once.
    func releasePushJobs(owner: String?) async throws
    /// When the next job becomes due (its `notBefore`, or the end of its lease); nil when there is none.
    func nextPushJobDue() async throws -> Int64?
    func pushQueueDepth() async throws -> PushQueueDepth

    // MARK: Search
    /// The messages `request` finds (``MessageSearch``), in its order, at most `request.limit`. Throws
    /// `ERR_BAD_REQUEST` for a cursor that is not one of this order's.
    func searchMessages(_ request: MessageSearchRequest) async throws -> MessageSearchPage
    /// Files up to `limit` stored messages that the search index does not hold yet; returns how many it filed (fewer
    /// than `limit`: none is left). See ``StoreCapabilities/searchFiledAfterCommit``.
    func fileSearchIndex(limit: Int) async throws -> Int

    // MARK: Conversations
    /// Applies commands in one transaction, in order. A command refused by a rule gets its ``DomainError`` and
    /// does not affect the others.
    func apply(_ commands: [Command]) async throws -> [Result<CommandResult, DomainError>]
    /// ``apply(_:)``, then, before the commit, the unread counts that `wanted` asks for the results
    /// (``UnreadRequest/reads``), in that order; a count that cannot be read is left out and the batch is stored all
    /// the same. `wanted` runs inside the transaction, on the store's writer. A store that does not read counts with a
    /// batch returns none (the default), and the server reads them afterwards.
    func apply(
        _ commands: [Command],
        readingUnread wanted: @escaping @Sendable ([Result<CommandResult, DomainError>]) -> [UnreadRequest]
    ) async throws -> BatchOutcome
    /// A conversation and the caller's role in it; nil role when the caller is not a participant.
    func conversation(appId: String, id: String, viewer: String) async throws -> (ConversationRow, ParticipantRole?)?
    /// The caller's conversations, most recently active first.
    func conversations(appId: String, uid: String, query: ConversationQuery) async throws -> [ConversationRow]
    /// A page of the user's inbox (`request`): their (not deleted) conversations with what an inbox shows of each,
    /// filtered and sorted, read in one transaction, and the unread total over every conversation of the user.
    func inbox(_ request: InboxRequest) async throws -> InboxPage
    /// Archives the conversation for `uid` (until a message comes after this one), or (false) brings it back. Returns
    /// false when `uid` does not participate in a (not deleted) conversation of the app with this id.
    func setArchived(appId: String, conversationId: String, uid: String, archived: Bool) async throws -> Bool
    func participants(appId: String, conversationId: String) async throws -> [Participant]
    /// A page of history (or of a thread: `query.thread`), newest first, read in one transaction. Throws
    /// `ERR_MESSAGE_NOT_FOUND` for a thread whose first message is not in the conversation; empty for a conversation
    /// that does not exist.
    func messages(appId: String, conversationId: String, query: HistoryQuery) async throws -> MessageHistory
    /// One message in its latest state, with its thread summary and reactions as `viewer` sees them; nil when the
    /// conversation has no message with this id.
    func message(appId: String, conversationId: String, messageId: String, viewer: String?) async throws -> Message?
    /// The conversation's pinned messages, the most recently pinned first, each in its latest state as `viewer` reads
    /// it (``Message/pin`` set), and the conversation's last sequence number in the same read; empty for a
    /// conversation that does not exist.
    func pinnedMessages(appId: String, conversationId: String, viewer: String?) async throws -> MessageHistory
    /// The messages that mention `uid` and that `uid` has not read (after their read position, in conversations they
    /// still participate in, not deleted), newest first, after `after`, at most `limit`.
    func unreadMentions(appId: String, uid: String, after: MentionPosition?, limit: Int) async throws -> [MentionRow]
    /// The user's unread counts. With `conversationIds` nil: every conversation of the user, and the total over all of
    /// them (a read of every participation of the user). Otherwise only those conversations (the ones the user is in
    /// and that are not deleted; the others are left out), and the total over them: a read per conversation asked for.
    func unread(appId: String, uid: String, conversationIds: [String]?) async throws -> UnreadSummary
    /// ``unread(appId:uid:conversationIds:)`` of many users at once (the unread notifier's pushes), in the order asked:
    /// ``UnreadRequest/reads`` of each (a store may refuse a read of every conversation of a user in more than
    /// `maxConversations`).
    func unread(_ requests: [UnreadRequest]) async throws -> [UnreadSummary]
    /// The users who share at least one (not deleted) conversation with `uid`, not including `uid` nor those who
    /// blocked `uid` (they do not see `uid`'s presence and profile changes).
    func contacts(appId: String, uid: String) async throws -> [String]
    /// ``contacts(appId:uid:)`` of many users (the arrivals of one turn of the presence tracker), in the order asked.
    func contacts(of users: [UserRef]) async throws -> [[String]]
    /// The participants of a conversation that is not deleted; nil when there is no such conversation.
    func activeParticipants(appId: String, conversationId: String) async throws -> [String]?

    // MARK: Deleting users
    /// The last step of deleting a user, in one transaction, once they participate in no conversation and their
    /// messages are deleted: their reactions, unread mentions, archives, membership stream, blocks both ways, reports
    /// by or about them, bans, tokens, devices and pending pushes, directory words and uploads no message carries
    /// (marked removed: the sweeper deletes their bytes) go, then the user, with a `user.delete` webhook event.
    /// ``UserPurge/stillParticipates`` (and nothing done) when they participate in a conversation again.
    func purgeUser(appId: String, uid: String, now: Int64) async throws -> UserPurge

    // MARK: Exports
    /// The conversations `uid` is in now (deleted ones included), with their participation, by conversation key.
    func memberships(appId: String, uid: String) async throws -> [UserMembership]
    /// A page of the messages `uid` sent, walked as ``UserExport/Walk`` walks (every conversation the user ever
    /// joined, from `after`), at most `limit` messages and `scan` events.
    func exportMessages(appId: String, uid: String, after: UserExport.Position?, limit: Int, scan: Int) async throws
        -> UserExport.Page

    // MARK: Safety
    /// `blocker` blocks `blocked`; blocking again keeps the first block. Throws `ERR_UID_NOT_FOUND` when `blocked` is
    /// not a user of the app, `ERR_BLOCK_LIMIT` past ``Safety/maxBlocks``.
    func block(appId: String, blocker: String, blocked: String, now: Int64) async throws -> BlockedUser
    /// Lifts a block; nothing happens when there is none.
    func unblock(appId: String, blocker: String, blocked: String) async throws
    /// The users `uid` blocked, most recent first.
    func blocks(appId: String, uid: String) async throws -> [BlockedUser]
    /// The users who blocked each of `users`, in the order asked (one read for a turn of presence changes).
    func blockers(of users: [UserRef]) async throws -> [[String]]
    /// Whether `uid` is muted in the conversation at `now` (typing checks it).
    func isMuted(appId: String, conversationId: String, uid: String, now: Int64) async throws -> Bool
    /// The bans of a conversation that hold at `now`, newest first (empty for a conversation that does not exist).
    func bans(appId: String, conversationId: String, now: Int64) async throws -> [ConversationBan]
    /// `uid`'s ban from the conversation when it holds at `now`, else nil (reads refused to the banned check it).
    func ban(appId: String, conversationId: String, uid: String, now: Int64) async throws -> ConversationBan?
    /// Stores a report, or finds the open one of the same reporter about the same message or user
    /// (`created` false).
    func insertReport(appId: String, _ report: Report) async throws -> (report: Report, created: Bool)
    /// The app's reports (in `state`, when given), oldest first, after the position `after`, at most `limit`; each with
    /// its position (the cursor of the next page).
    func reports(appId: String, state: ReportState?, after: Int64?, limit: Int) async throws
        -> [(position: Int64, report: Report)]
    /// Sets a report's state (and resolution); nil when the app has no report with this id.
    func updateReport(appId: String, id: String, state: ReportState, resolution: String?, now: Int64) async throws
        -> Report?

    // MARK: Attachments
    /// Records an upload (its bytes are already in the blob store).
    func insertAttachment(_ record: AttachmentRecord) async throws
    /// One upload of an app; nil when there is none with this id.
    func attachment(appId: String, id: String) async throws -> AttachmentRecord?
    /// Uploads of every app that no message carries and that were made before `createdBefore`, oldest first: what the
    /// sweeper removes.
    func unattachedAttachments(createdBefore: Int64, limit: Int) async throws -> [AttachmentRecord]
    /// Forgets an upload; false when there was none (with `unattachedOnly`, none that no message carries: a message
    /// that took it meanwhile keeps it). Its bytes are the blob store's to remove, after this.
    func deleteAttachment(appId: String, id: String, unattachedOnly: Bool) async throws -> Bool

    // MARK: Webhooks
    /// Registers an endpoint. Throws `ERR_WEBHOOK_LIMIT` past ``Webhooks/maxEndpoints`` for the app.
    func insertWebhookEndpoint(_ record: WebhookEndpointRecord) async throws
    /// The app's endpoints, oldest first.
    func webhookEndpoints(appId: String) async throws -> [WebhookEndpoint]
    func webhookEndpoint(appId: String, id: String) async throws -> WebhookEndpoint?
    /// Applies a change; enabling clears the failure run. Nil when the app has no such endpoint.
    func updateWebhookEndpoint(appId: String, id: String, _ change: WebhookEndpointChange, now: Int64) async throws
        -> WebhookEndpoint?
    /// Removes an endpoint and its deliveries; false when the app has no such endpoint.
    func deleteWebhookEndpoint(appId: String, id: String) async throws -> Bool
    /// In one transaction: turns the oldest outbox rows (at most `limit`) into one pending delivery per enabled endpoint
    /// of the app that wants the event, due at `now`, and deletes them. Nodes doing it at once take turns. Returns the
    /// number of outbox rows taken.
    func expandWebhookOutbox(limit: Int, now: Int64) async throws -> Int
    /// Leases to `owner` until `leaseUntil` the due pending deliveries of enabled endpoints that are first of their
    /// endpoint and ordering key (nothing earlier of the same conversation, report or user is pending), oldest first,
    /// at most `limit`.
    func claimWebhookDeliveries(owner: String, now: Int64, leaseUntil: Int64, limit: Int) async throws -> [WebhookJob]
    /// The endpoint took the delivery: it is removed and the endpoint's failure run ends.
    func completeWebhookDelivery(_ job: WebhookJob, now: Int64) async throws
    /// The attempt failed: the delivery is due again at `failure.retryAt` or, without one, given up (`failed`); the
    /// endpoint's failure run grows, and at `failure.disableAfter` the endpoint is disabled. Returns true when this
    /// failure disabled it.
    func failWebhookDelivery(_ job: WebhookJob, _ failure: WebhookFailure) async throws -> Bool
    /// Ends the leases of `owner` (every lease when nil).
    func releaseWebhookDeliveries(owner: String?) async throws
    /// Whether any app has an enabled endpoint (without one the dispatcher has nothing to look for).
    func hasEnabledWebhookEndpoints() async throws -> Bool
    /// When the next pending delivery of an enabled endpoint becomes due; nil when none is waiting.
    func nextWebhookDeliveryDue() async throws -> Int64?
    /// An endpoint's pending or failed deliveries (in `state`, when given), oldest first, after `after`, at most
    /// `limit`, each with its position (the cursor of the next page).
    func webhookDeliveries(appId: String, webhookId: String, state: WebhookDeliveryState?, after: Int64?, limit: Int)
        async throws -> [(position: Int64, delivery: WebhookDelivery)]
    /// Makes a failed delivery pending again, due at `now` with its attempts reset; nil when the endpoint has no
    /// failed delivery with this id.
    func redeliverWebhookDelivery(appId: String, webhookId: String, deliveryId: String, now: Int64) async throws
        -> WebhookDelivery?

    // MARK: Resume
    /// Durable events of a conversation with a sequence number above `afterSeq`, ascending, at most `limit`.
    /// Empty when there is no such conversation. Readers never miss an event: sequence numbers of a conversation are
    /// assigned under its row lock, so they become visible in order.
    func events(appId: String, conversationId: String, afterSeq: Int64, limit: Int) async throws -> [StoredEvent]
    /// The user's membership changes with a position above `afterUserSeq`, ascending, at most `limit`.
    func membershipChanges(appId: String, uid: String, afterUserSeq: Int64, limit: Int) async throws
        -> [MembershipChange]
    /// Where the user's streams stand now.
    func streamPositions(appId: String, uid: String) async throws -> StreamPositions
}

/// How a store uses its database (`/metrics`: `parley_database_*`).
public struct StoreActivity: Sendable, Hashable {
    /// Operations under way now: each holds a connection of the pool or waits for one (PostgreSQL; 0 for SQLite,
    /// whose writer is one thread and whose reads do not wait on each other).
    public var inFlight: Int
    /// Most connections the store opens: PostgreSQL's pool size; SQLite's readers and its writer.
    public var capacity: Int
    /// Operations the database failed since the start (not refusals of the rules).
    public var failures: Int

    public init(inFlight: Int = 0, capacity: Int = 0, failures: Int = 0) {
        self.inFlight = inFlight
        self.capacity = capacity
        self.failures = failures
    }
}

extension ParleyStore {
    /// The batch alone: no unread counts read with it.
    public func apply(
        _ commands: [Command],
        readingUnread wanted: @escaping @Sendable ([Result<CommandResult, DomainError>]) -> [UnreadRequest]
    ) async throws -> BatchOutcome {
        BatchOutcome(results: try await apply(commands), unread: [])
    }

    /// One user after the other.
    public func unread(_ requests: [UnreadRequest]) async throws -> [UnreadSummary] {
        var summaries: [UnreadSummary] = []
        for request in requests {
            summaries.append(
                try await unread(appId: request.appId, uid: request.uid, conversationIds: request.reads))
        }
        return summaries
    }

    /// One user after the other.
    public func contacts(of users: [UserRef]) async throws -> [[String]] {
        var contacts: [[String]] = []
        for user in users { contacts.append(try await self.contacts(appId: user.appId, uid: user.uid)) }
        return contacts
    }
}
