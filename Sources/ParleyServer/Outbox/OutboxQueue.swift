/// A durable queue of outgoing requests, leased to the node that sends them: push notifications (``PushQueue``) and
/// webhook deliveries (``WebhookQueue``). The queue knows its rows and how a request is made and recorded;
/// ``OutboxWorker`` knows when to look, how many to send at once, and what to release.
protocol OutboxQueue: Sendable {
    associatedtype Job: Sendable

    /// Turns what the message path queued into jobs (outbox rows into requests). Nil when nothing can be queued at all
    /// (webhooks without an enabled endpoint: the worker then ignores the message path's wake-ups), else whether there
    /// may be more to turn right away.
    func expand(now: Int64) async throws -> Bool?
    /// When the first job not leased is due (epoch ms); nil when there is none.
    func nextDue() async throws -> Int64?
    /// Leases up to `limit` jobs due at `now` to `owner` until `leaseUntil`.
    func claim(owner: String, now: Int64, leaseUntil: Int64, limit: Int) async throws -> [Job]
    /// Sends a job and records what came of it (done, tried again later, given up). A result that cannot be recorded
    /// leaves the lease to run out: the job is tried again then.
    func send(_ job: Job) async
    /// Ends the leases of `owner` (nil: every lease, a single node's at its start).
    func release(owner: String?) async throws
    /// Closes the clients the queue sends with.
    func shutdown() async
}
