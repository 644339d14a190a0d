import Logging
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore
import ServiceLifecycle

/// Delivers the events the apps' endpoints want, from the store's durable webhook outbox.
///
/// The event's own transaction only adds an outbox row (a trigger on `events`, or the report and user calls), and the
/// writer rings ``wake()``: nothing here can slow a message down. This service then, in a loop:
/// 1. turns outbox rows into deliveries, one per enabled endpoint of the app that wants the event, in one transaction
///    (under a lock with several nodes, so that one conversation's deliveries are made in its order);
/// 2. leases the deliveries that are due and first of their endpoint and ordering key (a conversation, a report, a
///    user: nothing earlier of it is still pending), up to ``WebhookConfiguration/maxConcurrentRequests``, and sends
///    them: a 2xx answer deletes the delivery; any other answer, a timeout or a network failure brings it back after
///    ``WebhookRetryPolicy`` backoff with jitter, or, past the last attempt, marks it `failed` (listed, and sent again
///    on request) so the rest of its conversation goes on; ``WebhookConfiguration/disableAfterFailures`` failed
///    attempts in a row disable the endpoint;
/// 3. sleeps until woken, until the next retry is due, or for ``WebhookConfiguration/pollInterval``.
///
/// With no enabled endpoint (what most deployments have), the message path's rings (``wake()``, after every batch the
/// writer commits) are ignored once a pass has found none: a ring cost this service two reads, a task group and the
/// thread hand-offs that come with them, on every batch, for nothing (the outbox stays empty without an endpoint).
/// What can enable one rings ``endpointsChanged()`` (this node's REST calls, after their commit), which makes the next
/// pass look again; with several nodes, where another node's calls enable endpoints, an idle dispatcher also looks
/// every ``WebhookConfiguration/pollInterval``.
///
/// A restart loses nothing: the outbox and the deliveries are rows, and a lease ends with its node (at once on a
/// graceful stop, when it expires after a crash). What a crash can repeat is a request in flight at that moment, with
/// the same delivery id.
final class WebhookDispatcher: Service {
    private let store: any ParleyStore
    private let sender: WebhookSender
    private let configuration: WebhookConfiguration
    private let leaseDuration: Duration
    private let owner: String
    private let ownsEveryLease: Bool
    private let time: ServerClock
    private let random: @Sendable () -> Double
    private let logger: Logger
    private let doorbell = Doorbell()
    private let stopping = NIOLockedValueBox(false)
    /// Whether the last pass found no enabled endpoint, and the count of ``endpointsChanged()`` calls (a pass only
    /// records "none" if no call came while it read).
    private let idle = NIOLockedValueBox((noEndpoints: false, changes: 0))
    /// The attempts this node made.
    let log = WebhookAttemptLog()

    static let outboxBatch = 500
    private let metrics: ServerMetrics

    init(
        store: any ParleyStore, configuration: WebhookConfiguration, owner: String, ownsEveryLease: Bool,
        time: ServerClock, random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        metrics: ServerMetrics = .discarding, logger: Logger
    ) {
        self.metrics = metrics
        self.store = store
        self.sender = WebhookSender(configuration: configuration, time: time)
        self.configuration = configuration
        self.leaseDuration = configuration.requestTimeout * 2 + .seconds(30)
        self.owner = owner
        self.ownsEveryLease = ownsEveryLease
        self.time = time
        self.random = random
        self.logger = logger
    }

    /// Events were committed: look now rather than at the next poll, unless the last look found no enabled endpoint
    /// (then nothing can have been queued for one). Never blocks.
    func wake() {
        guard !isIdle else { return }
        doorbell.ring()
    }

    /// Whether the last pass found no enabled endpoint (``wake()`` then does nothing).
    var isIdle: Bool { idle.withLockedValue { $0.noEndpoints } }

    /// Something this node did may have enabled an endpoint or queued an event for one (a REST call, after its
    /// commit): look now, whatever the last look found.
    func endpointsChanged() {
        idle.withLockedValue { idle in
            idle.noEndpoints = false
            idle.changes += 1
        }
        doorbell.ring()
    }

    func run() async throws {
        do {
            // Without an endpoint there is nothing leased: no write at every start.
            if try await store.hasEnabledWebhookEndpoints() {
                try await store.releaseWebhookDeliveries(owner: ownsEveryLease ? nil : owner)
            }
        } catch {
            logger.warning("Webhooks: could not release earlier leases", metadata: ["error": "\(error)"])
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
            try await store.releaseWebhookDeliveries(owner: owner)
        } catch {
            logger.warning("Webhooks: could not release leases at shutdown", metadata: ["error": "\(error)"])
        }
        await sender.shutdown()
    }

    /// One round of work; true when there may be more right away.
    private func pass() async -> Bool {
        do {
            // With no endpoint anywhere, one read and nothing else (the outbox stays empty then; rows queued for an
            // endpoint disabled since make no delivery); the message path's rings are ignored from then on.
            let changes = idle.withLockedValue { $0.changes }
            let enabled = try await store.hasEnabledWebhookEndpoints()
            idle.withLockedValue { idle in
                if idle.changes == changes { idle.noEndpoints = !enabled }
            }
            guard enabled else { return false }
            let now = time.epochMilliseconds()
            let expanded = try await store.expandWebhookOutbox(limit: Self.outboxBatch, now: now)
            guard !stopping.withLockedValue({ $0 }) else { return false }
            let sent = try await sendDue()
            return expanded == Self.outboxBatch || sent > 0
        } catch is CancellationError {
            return false  // the loop ends (see `run()`)
        } catch {
            logger.warning("Webhooks: the queue is unavailable", metadata: ["error": "\(error)"])
            return false
        }
    }

    /// Until woken, the next retry, or the poll interval; with no endpoint enabled, on a single node only until woken
    /// (``endpointsChanged()``), so that an idle server sets no timer, and with several nodes for the poll interval
    /// (another node may enable one).
    private func waitForWork() async {
        var wait: Duration?
        if isIdle {
            if !ownsEveryLease { wait = configuration.pollInterval }
        } else if (try? await store.hasEnabledWebhookEndpoints()) != false {
            wait = configuration.pollInterval
            if let due = try? await store.nextWebhookDeliveryDue() {
                wait = min(configuration.pollInterval, Duration.milliseconds(max(due - time.epochMilliseconds(), 0)))
            }
        }
        let deadline = wait.map { time.timeline.now() + $0 }
        let timeline = time.timeline
        let doorbell = self.doorbell
        await withTaskGroup(of: Void.self) { group in
            if let deadline { group.addTask { try? await timeline.sleepUntil(deadline) } }
            group.addTask { await doorbell.wait() }
            await group.next()
            group.cancelAll()
        }
    }

    /// Sends what is due now, keeping up to the concurrency limit in flight; returns how many were sent.
    private func sendDue() async throws -> Int {
        let limit = max(configuration.maxConcurrentRequests, 1)
        let now = time.epochMilliseconds()
        // Leasing writes; look first (a read) whether anything is due.
        guard let due = try await store.nextWebhookDeliveryDue(), due <= now else { return 0 }
        let jobs = try await store.claimWebhookDeliveries(
            owner: owner, now: now, leaseUntil: now + PushDispatcher.milliseconds(leaseDuration), limit: limit
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

    private func record(_ outcome: WebhookSendOutcome, of job: WebhookJob) async {
        let metadata: Logger.Metadata = [
            "webhook": "\(job.endpointId)", "delivery": "\(job.deliveryId)", "event": "\(job.event)",
        ]
        let now = time.epochMilliseconds()
        var attempt = WebhookAttempt(
            deliveryId: job.deliveryId, webhookId: job.endpointId, event: job.event, attempt: job.attempts + 1,
            delivered: false
        )
        switch outcome {
        case .delivered(let status):
            metrics.webhook("delivered")
            (attempt.delivered, attempt.status) = (true, status)
        case .failed(let status, let reason):
            (attempt.status, attempt.error) = (status, reason)
        }
        // Logged once the store knows, so that a watcher sees the state it reads next.
        defer { log.record(attempt) }
        do {
            switch outcome {
            case .delivered:
                try await store.completeWebhookDelivery(job, now: now)
            case .failed(let status, let reason):
                let attempts = job.attempts + 1
                let retry = configuration.retry
                let retryAt: Int64? =
                    attempts >= retry.maximumAttempts
                    ? nil
                    : now + PushDispatcher.milliseconds(retry.delay(afterAttempts: attempts, unit: random()))
                let disabled = try await store.failWebhookDelivery(
                    job,
                    WebhookFailure(
                        attempts: attempts, retryAt: retryAt, status: status, error: reason, now: now,
                        disableAfter: configuration.disableAfterFailures
                    )
                )
                metrics.webhook(retryAt == nil ? "given_up" : "failed")
                if retryAt == nil {
                    logger.warning(
                        "Webhooks: delivery given up after \(attempts) attempt(s): \(reason)", metadata: metadata)
                } else {
                    logger.notice("Webhooks: attempt \(attempts) failed: \(reason)", metadata: metadata)
                }
                if disabled {
                    logger.warning(
                        "Webhooks: endpoint disabled after \(configuration.disableAfterFailures) failed attempts in a row",
                        metadata: metadata
                    )
                }
            }
        } catch {
            // The lease ends by itself; the delivery is tried again then.
            metrics.databaseErrors.increment()
            logger.warning("Webhooks: could not record a result", metadata: ["error": "\(error)"])
        }
    }
}
