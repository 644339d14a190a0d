import Logging
import ParleyProtocol
import ParleyStore

/// The pushes of messages to recipients without a live socket: the store's durable push queue, worked through by an
/// ``OutboxWorker``.
///
/// The message path only adds an outbox row in the message's own transaction (``Command/SendMessage`` with
/// `queuesPush`) and rings the worker. Then:
/// 1. outbox entries become jobs: for each recipient but the sender who had no live socket when the message was
///    stored and has none now (here or, with several nodes, on another node), and for each participant the message
///    mentions whatever their sockets, one job per registered device, with the alert, the badge (their unread
///    count) and the ids; deleting the entry and inserting its jobs is one transaction, so an entry yields its
///    jobs once, also when several nodes look at once (a message deleted before then yields none: its entry and
///    jobs are deleted with it);
/// 2. due jobs, leased, are sent: a sent job is deleted; an invalid token (410 `Unregistered`) removes the device;
///    429, 5xx and network failures come back after ``PushRetryPolicy`` backoff; a job past its attempts or its
///    expiry is given up with a warning.
///
/// What a crash can repeat is only a request in flight at that moment; its `apns-collapse-id` (the message id) makes
/// the device show it once.
struct PushQueue: OutboxQueue {
    let store: any ParleyStore
    let sender: any PushSender
    let presence: PresenceTracker
    let retry: PushRetryPolicy
    let time: ServerClock
    let metrics: ServerMetrics
    let logger: Logger

    static let outboxBatch = 200

    func expand(now: Int64) async throws -> Bool? {
        try await expandOutbox(now: now) == Self.outboxBatch
    }

    func nextDue() async throws -> Int64? {
        try await store.nextPushJobDue()
    }

    func claim(owner: String, now: Int64, leaseUntil: Int64, limit: Int) async throws -> [PushJob] {
        try await store.claimPushJobs(owner: owner, now: now, leaseUntil: leaseUntil, limit: limit)
    }

    func send(_ job: PushJob) async {
        await record(await sender.send(job), of: job)
    }

    func release(owner: String?) async throws {
        try await store.releasePushJobs(owner: owner)
    }

    func shutdown() async {
        await sender.shutdown()
    }

    // MARK: Outbox

    /// Turns outbox entries into jobs; returns how many entries were looked at.
    private func expandOutbox(now: Int64) async throws -> Int {
        let entries = try await store.pushOutbox(limit: Self.outboxBatch)
        guard !entries.isEmpty else { return 0 }
        var expansions: [PushExpansion] = []
        var names: [UserKey: String] = [:]
        for entry in entries {
            expansions.append(
                PushExpansion(entryId: entry.id, jobs: try await jobs(for: entry, now: now, names: &names)))
        }
        let inserted = try await store.expandPushOutbox(expansions)
        if inserted > 0 { logger.debug("Push: \(inserted) notification(s) queued for \(entries.count) message(s)") }
        return entries.count
    }

    private func jobs(for entry: PushOutboxEntry, now: Int64, names: inout [UserKey: String]) async throws
        -> [PushJob]
    {
        // A message deleted before its pushes were made makes none.
        guard let message = entry.message, !message.isDeleted, now - entry.createdAt <= retry.expiry.wholeMilliseconds,
            let participants = try await store.activeParticipants(
                appId: entry.appId, conversationId: entry.conversationId)
        else { return [] }
        let mentioned = Set(message.mentions ?? [])
        var jobs: [PushJob] = []
        var conversation: Conversation?
        for uid in participants where uid != message.sender {
            // Connected when the message was stored (it went out on that socket), or now: no push, unless the message
            // mentions them (a mention reaches their other devices too).
            let isMentioned = mentioned.contains(uid)
            if !isMentioned {
                guard try await !presence.hasLiveSocket(appId: entry.appId, uid: uid, since: entry.createdAt) else {
                    continue
                }
            }
            let devices = try await store.devices(appId: entry.appId, uid: uid).filter { $0.platform == .apns }
            guard !devices.isEmpty else { continue }
            let senderKey = UserKey(appId: entry.appId, uid: message.sender)
            if names[senderKey] == nil {
                names[senderKey] = try await store.user(appId: entry.appId, uid: message.sender)?.name ?? message.sender
            }
            if conversation == nil {
                conversation = try await store.conversation(appId: entry.appId, id: entry.conversationId, viewer: uid)?
                    .0
                    .conversation
            }
            let badge = try await store.unread(appId: entry.appId, uid: uid, conversationIds: nil).total
            let payload = PushComposer.payload(
                message: message, senderName: names[senderKey] ?? message.sender,
                groupName: conversation?.type == .group ? conversation?.name : nil, badge: badge,
                mentioned: isMentioned
            )
            for device in devices {
                jobs.append(
                    PushJob(
                        appId: entry.appId, uid: uid, deviceId: device.deviceId, platform: device.platform,
                        token: device.token, environment: device.environment, collapseId: message.id,
                        payload: payload, createdAt: entry.createdAt, notBefore: now
                    )
                )
            }
        }
        return jobs
    }

    // MARK: Results

    private func record(_ outcome: PushSendOutcome, of job: PushJob) async {
        let metadata: Logger.Metadata = ["uid": "\(job.uid)", "device": "\(job.deviceId)", "push": "\(job.collapseId)"]
        do {
            switch outcome {
            case .delivered:
                metrics.push("delivered")
                try await store.completePushJob(id: job.id)
            case .invalidToken(let reason, let since):
                metrics.push("invalid_token")
                let removed = try await store.removeInvalidToken(
                    appId: job.appId, uid: job.uid, deviceId: job.deviceId, token: job.token, invalidSince: since
                )
                try await store.completePushJob(id: job.id)
                logger.info(
                    "Push: APNs says the device token is invalid (\(reason)); \(removed ? "device removed" : "device kept: registered again since")",
                    metadata: metadata
                )
            case .retry(let reason, let after):
                let attempts = job.attempts + 1
                let now = time.epochMilliseconds()
                if attempts >= retry.maximumAttempts || now - job.createdAt > retry.expiry.wholeMilliseconds {
                    metrics.push("given_up")
                    try await store.completePushJob(id: job.id)
                    logger.warning(
                        "Push: given up after \(attempts) attempt(s): \(reason)", metadata: metadata
                    )
                } else {
                    metrics.push("retry")
                    let wait = after ?? retry.delay(afterAttempts: attempts)
                    try await store.retryPushJob(
                        id: job.id, attempts: attempts, notBefore: now + wait.wholeMilliseconds)
                    logger.notice(
                        "Push: attempt \(attempts) failed (\(reason)); next in \(wait)", metadata: metadata
                    )
                }
            case .rejected(let reason):
                metrics.push("rejected")
                try await store.completePushJob(id: job.id)
                logger.warning("Push: APNs refused the notification (\(reason)); dropped", metadata: metadata)
            }
        } catch {
            // The lease ends by itself; the job is tried again then.
            metrics.databaseErrors.increment()
            logger.warning("Push: could not record a result", metadata: ["error": "\(error)"])
        }
    }
}
