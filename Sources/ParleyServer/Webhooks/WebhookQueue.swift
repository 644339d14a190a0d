import Logging
import ParleyProtocol
import ParleyStore

/// The events the apps' endpoints want: the store's durable webhook outbox, worked through by an ``OutboxWorker``.
///
/// The event's own transaction only adds an outbox row (a trigger on `events`, or the report and user calls), and the
/// writer rings the worker: nothing here can slow a message down. Then:
/// 1. outbox rows become deliveries, one per enabled endpoint of the app that wants the event, in one transaction
///    (under a lock with several nodes, so that one conversation's deliveries are made in its order); with no enabled
///    endpoint, one read and nothing else (the outbox stays empty then; rows queued for an endpoint disabled since
///    make no delivery), and the worker ignores the message path's rings until a REST call may have enabled one;
/// 2. the deliveries that are due and first of their endpoint and ordering key (a conversation, a report, a user:
///    nothing earlier of it is still pending) are leased and sent: a 2xx answer deletes the delivery; any other
///    answer, a timeout or a network failure brings it back after ``WebhookRetryPolicy`` backoff with jitter, or,
///    past the last attempt, marks it `failed` (listed, and sent again on request) so the rest of its conversation
///    goes on; ``WebhookConfiguration/disableAfterFailures`` failed attempts in a row disable the endpoint.
///
/// What a crash can repeat is a request in flight at that moment, with the same delivery id.
struct WebhookQueue: OutboxQueue {
    let store: any ParleyStore
    let sender: WebhookSender
    let configuration: WebhookConfiguration
    let time: ServerClock
    let random: @Sendable () -> Double
    let metrics: ServerMetrics
    let logger: Logger
    /// The attempts this node made.
    let log = WebhookAttemptLog()

    static let outboxBatch = 500

    init(
        store: any ParleyStore, configuration: WebhookConfiguration, time: ServerClock,
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }, metrics: ServerMetrics = .discarding,
        logger: Logger
    ) {
        self.store = store
        self.sender = WebhookSender(configuration: configuration, time: time)
        self.configuration = configuration
        self.time = time
        self.random = random
        self.metrics = metrics
        self.logger = logger
    }

    func expand(now: Int64) async throws -> Bool? {
        guard try await store.hasEnabledWebhookEndpoints() else { return nil }
        return try await store.expandWebhookOutbox(limit: Self.outboxBatch, now: now) == Self.outboxBatch
    }

    func nextDue() async throws -> Int64? {
        try await store.nextWebhookDeliveryDue()
    }

    func claim(owner: String, now: Int64, leaseUntil: Int64, limit: Int) async throws -> [WebhookJob] {
        try await store.claimWebhookDeliveries(owner: owner, now: now, leaseUntil: leaseUntil, limit: limit)
    }

    func send(_ job: WebhookJob) async {
        await record(await sender.send(job), of: job)
    }

    /// Without an endpoint there is nothing leased: no write at every start.
    func release(owner: String?) async throws {
        guard try await store.hasEnabledWebhookEndpoints() else { return }
        try await store.releaseWebhookDeliveries(owner: owner)
    }

    func shutdown() async {
        await sender.shutdown()
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
                    : now + retry.delay(afterAttempts: attempts, unit: random()).wholeMilliseconds
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
                    metrics.webhookEndpointsDisabled.increment()
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
