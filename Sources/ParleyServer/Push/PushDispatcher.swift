import Logging
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore
import ServiceLifecycle

/// Sends the pushes of messages to recipients without a live socket, from the store's durable push queue.
///
/// The message path only adds an outbox row in the message's own transaction (``Command/SendMessage`` with
/// `queuesPush`) and rings ``wake()``; it never waits for anything here. This service then, in a loop:
/// 1. turns outbox entries into jobs: for each recipient but the sender who had no live socket when the message was
///    stored and has none now (here or, with several nodes, on another node), and for each participant the message
///    mentions whatever their sockets, one job per registered device, with the alert, the badge (their unread
///    count) and the ids; deleting the entry and inserting its jobs is one transaction, so an entry yields its
///    jobs once, also when several nodes look at once (a message deleted before then yields none: its entry and
///    jobs are deleted with it);
/// 2. leases the due jobs and sends them, up to ``APNsConfiguration/maxConcurrentRequests`` at a time: a sent job
///    is deleted; an invalid token (410 `Unregistered`) removes the device; 429, 5xx and network failures come back
///    after ``PushRetryPolicy`` backoff; a job past its attempts or its expiry is given up with a warning;
/// 3. sleeps until woken, until the next retry is due, or for ``ServerConfiguration/pushPollInterval``.
///
/// A restart loses nothing: entries and jobs are rows, and a lease ends with its node (at once on a graceful stop,
/// after the lease time when the node died). What a crash can repeat is only a request in flight at that moment;
/// its `apns-collapse-id` (the message id) makes the device show it once.
final class PushDispatcher: Service {
    private let store: any ParleyStore
    private let sender: any PushSender
    private let presence: PresenceTracker
    private let retry: PushRetryPolicy
    private let pollInterval: Duration
    private let leaseDuration: Duration
    private let concurrency: Int
    private let owner: String
    private let ownsEveryLease: Bool
    private let time: ServerClock
    private let logger: Logger
    private let doorbell = Doorbell()
    private let stopping = NIOLockedValueBox(false)

    static let outboxBatch = 200
    private let metrics: ServerMetrics

    /// - Parameters:
    ///   - owner: This node's name on the leases it takes.
    ///   - ownsEveryLease: True for a single node (SQLite): leases left by an earlier run are its own, released at
    ///     start.
    init(
        store: any ParleyStore, sender: any PushSender, presence: PresenceTracker, retry: PushRetryPolicy,
        pollInterval: Duration, requestTimeout: Duration, concurrency: Int, owner: String, ownsEveryLease: Bool,
        time: ServerClock, metrics: ServerMetrics = .discarding, logger: Logger
    ) {
        self.metrics = metrics
        self.store = store
        self.sender = sender
        self.presence = presence
        self.retry = retry
        self.pollInterval = pollInterval
        self.leaseDuration = requestTimeout * 2 + .seconds(30)
        self.concurrency = max(concurrency, 1)
        self.owner = owner
        self.ownsEveryLease = ownsEveryLease
        self.time = time
        self.logger = logger
    }

    /// New outbox entries were committed: look now rather than at the next poll. Never blocks.
    func wake() {
        doorbell.ring()
    }

    func run() async throws {
        do {
            try await store.releasePushJobs(owner: ownsEveryLease ? nil : owner)
        } catch {
            logger.warning("Push: could not release earlier leases", metadata: ["error": "\(error)"])
        }
        await withGracefulShutdownHandler {
            // Cancelled (another part of the server failed): the store answers every call with CancellationError
            // and every wait returns at once, so only this check ends the loop.
            while !stopping.withLockedValue({ $0 }), !Task.isCancelled {
                let busy = await pass()
                if busy { continue }
                await waitForWork()
            }
        } onGracefulShutdown: {
            self.stopping.withLockedValue { $0 = true }
            self.doorbell.ring()
        }
        do {
            try await store.releasePushJobs(owner: owner)
        } catch {
            logger.warning("Push: could not release leases at shutdown", metadata: ["error": "\(error)"])
        }
        await sender.shutdown()
    }

    /// One round of work; true when there may be more right away.
    private func pass() async -> Bool {
        do {
            let expanded = try await expandOutbox()
            guard !stopping.withLockedValue({ $0 }) else { return false }
            let sent = try await sendDueJobs()
            return expanded == Self.outboxBatch || sent == concurrency
        } catch is CancellationError {
            return false  // the loop ends (see `run()`)
        } catch {
            logger.warning("Push: the queue is unavailable", metadata: ["error": "\(error)"])
            return false
        }
    }

    private func waitForWork() async {
        var wait = pollInterval
        if let due = try? await store.nextPushJobDue() {
            wait = min(wait, Duration.milliseconds(max(due - time.epochMilliseconds(), 0)))
        }
        let deadline = time.timeline.now() + wait
        let timeline = time.timeline
        let doorbell = self.doorbell
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await timeline.sleepUntil(deadline) }
            group.addTask { await doorbell.wait() }
            await group.next()
            group.cancelAll()
        }
    }

    // MARK: Outbox

    /// Turns outbox entries into jobs; returns how many entries were looked at.
    private func expandOutbox() async throws -> Int {
        let entries = try await store.pushOutbox(limit: Self.outboxBatch)
        guard !entries.isEmpty else { return 0 }
        var expansions: [PushExpansion] = []
        var names: [UserKey: String] = [:]
        for entry in entries {
            expansions.append(PushExpansion(entryId: entry.id, jobs: try await jobs(for: entry, names: &names)))
        }
        let inserted = try await store.expandPushOutbox(expansions)
        if inserted > 0 { logger.debug("Push: \(inserted) notification(s) queued for \(entries.count) message(s)") }
        return entries.count
    }

    private func jobs(for entry: PushOutboxEntry, names: inout [UserKey: String]) async throws -> [PushJob] {
        let now = time.epochMilliseconds()
        // A message deleted before its pushes were made makes none.
        guard let message = entry.message, !message.isDeleted, now - entry.createdAt <= Self.milliseconds(retry.expiry),
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

    // MARK: Sending

    /// Sends the jobs due now; returns how many were claimed.
    private func sendDueJobs() async throws -> Int {
        let now = time.epochMilliseconds()
        let jobs = try await store.claimPushJobs(
            owner: owner, now: now, leaseUntil: now + Self.milliseconds(leaseDuration), limit: concurrency
        )
        guard !jobs.isEmpty else { return 0 }
        let sender = self.sender
        await withTaskGroup(of: Void.self) { group in
            for job in jobs {
                group.addTask {
                    let outcome = await sender.send(job)
                    await self.record(outcome, of: job)
                }
            }
        }
        return jobs.count
    }

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
                if attempts >= retry.maximumAttempts || now - job.createdAt > Self.milliseconds(retry.expiry) {
                    metrics.push("given_up")
                    try await store.completePushJob(id: job.id)
                    logger.warning(
                        "Push: given up after \(attempts) attempt(s): \(reason)", metadata: metadata
                    )
                } else {
                    metrics.push("retry")
                    let wait = after ?? retry.delay(afterAttempts: attempts)
                    try await store.retryPushJob(
                        id: job.id, attempts: attempts, notBefore: now + Self.milliseconds(wait))
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

    static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }
}

/// Wakes one waiting task; a ring with nobody waiting is kept for the next wait (several rings count as one).
final class Doorbell: Sendable {
    private struct State {
        var rung = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = NIOLockedValueBox(State())

    func ring() {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.rung = true
            return nil
        }
        waiter?.resume()
    }

    /// Returns at the next ring (at once if one came since the last wait), or when the task is cancelled.
    func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLockedValue { state -> Bool in
                    if state.rung {
                        state.rung = false
                        return true
                    }
                    // Checked under the lock that the cancellation handler takes: no cancel is missed.
                    if Task.isCancelled { return true }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }
}
