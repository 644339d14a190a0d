import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle

/// Works through a durable, leased queue of outgoing requests (``OutboxQueue``): the one loop of push notifications
/// and webhook deliveries.
///
/// The message path only adds rows in its own transaction and rings ``wake()``; it never waits for anything here.
/// This service then, in a loop:
/// 1. turns what was queued into jobs (``OutboxQueue/expand(now:)``);
/// 2. when a job is due (a read first: leasing writes), leases up to `concurrency` of them and sends them at once;
/// 3. sleeps until woken, until the next job is due, or for `pollInterval`.
///
/// A queue that can hold nothing (webhooks without an enabled endpoint, what most deployments have) makes the message
/// path's rings do nothing once a pass has found it so: a ring cost two reads, a task group and the thread hand-offs
/// that come with them, on every batch, for nothing. What can change that rings ``queueChanged()`` (this node's REST
/// calls, after their commit), which makes the next pass look again; with several nodes, where another node's calls
/// can, an idle worker also looks every `pollInterval`, and on a single node it sets no timer.
///
/// A restart loses nothing: the queue is rows, and a lease ends with its node (at once on a graceful stop, when it
/// runs out after a crash). What a crash can repeat is only a request in flight at that moment.
final class OutboxWorker<Queue: OutboxQueue>: Service {
    let queue: Queue
    private let name: String
    private let owner: String
    private let ownsEveryLease: Bool
    private let pollInterval: Duration
    private let concurrency: Int
    private let leaseDuration: Duration
    private let time: ServerClock
    private let logger: Logger
    private let doorbell = Doorbell()
    private let stopping = NIOLockedValueBox(false)
    /// Whether the last pass found that nothing can be queued, and the count of ``queueChanged()`` calls (a pass only
    /// records "nothing" if no call came while it read).
    private let idle = NIOLockedValueBox((nothingQueueable: false, changes: 0))

    /// - Parameters:
    ///   - name: The log lines' prefix ("Push", "Webhooks").
    ///   - owner: This node's name on the leases it takes.
    ///   - ownsEveryLease: True for a single node (SQLite): leases left by an earlier run are its own, released at
    ///     start, and nobody else can make an idle queue hold something.
    ///   - requestTimeout: How long one request may take; a lease lasts twice that and 30 s.
    init(
        _ queue: Queue, name: String, owner: String, ownsEveryLease: Bool, pollInterval: Duration, concurrency: Int,
        requestTimeout: Duration, time: ServerClock, logger: Logger
    ) {
        self.queue = queue
        self.name = name
        self.owner = owner
        self.ownsEveryLease = ownsEveryLease
        self.pollInterval = pollInterval
        self.concurrency = max(concurrency, 1)
        self.leaseDuration = requestTimeout * 2 + .seconds(30)
        self.time = time
        self.logger = logger
    }

    /// Rows were committed: look now rather than at the next poll, unless the last look found that nothing can be
    /// queued. Never blocks.
    func wake() {
        guard !isIdle else { return }
        doorbell.ring()
    }

    /// Whether the last pass found that nothing can be queued (``wake()`` then does nothing).
    var isIdle: Bool { idle.withLockedValue { $0.nothingQueueable } }

    /// Something this node did may have made the queue able to hold something, or queued it (a REST call, after its
    /// commit): look now, whatever the last look found.
    func queueChanged() {
        idle.withLockedValue { idle in
            idle.nothingQueueable = false
            idle.changes += 1
        }
        doorbell.ring()
    }

    func run() async throws {
        do {
            try await queue.release(owner: ownsEveryLease ? nil : owner)
        } catch {
            logger.warning("\(name): could not release earlier leases", metadata: ["error": "\(error)"])
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
            try await queue.release(owner: owner)
        } catch {
            logger.warning("\(name): could not release leases at shutdown", metadata: ["error": "\(error)"])
        }
        await queue.shutdown()
    }

    /// One round of work; true when there may be more right away.
    private func pass() async -> Bool {
        do {
            let changes = idle.withLockedValue { $0.changes }
            let more = try await queue.expand(now: time.epochMilliseconds())
            idle.withLockedValue { idle in
                if idle.changes == changes { idle.nothingQueueable = more == nil }
            }
            guard let more, !stopping.withLockedValue({ $0 }) else { return false }
            let sent = try await sendDue()
            // A job sent can make the next one of its order due (webhooks): look again.
            return more || sent > 0
        } catch is CancellationError {
            return false  // the loop ends (see `run()`)
        } catch {
            logger.warning("\(name): the queue is unavailable", metadata: ["error": "\(error)"])
            return false
        }
    }

    /// Until woken, the next job's time, or the poll interval; idle, on a single node only until woken.
    private func waitForWork() async {
        var wait: Duration? = pollInterval
        if isIdle {
            if ownsEveryLease { wait = nil }
        } else if let due = try? await queue.nextDue() {
            wait = min(pollInterval, .milliseconds(max(due - time.epochMilliseconds(), 0)))
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

    /// Sends what is due now, up to the concurrency limit at once; returns how many were sent.
    private func sendDue() async throws -> Int {
        let now = time.epochMilliseconds()
        // Leasing writes; look first (a read) whether anything is due.
        guard let due = try await queue.nextDue(), due <= now else { return 0 }
        let jobs = try await queue.claim(
            owner: owner, now: now, leaseUntil: now + leaseDuration.wholeMilliseconds, limit: concurrency)
        guard !jobs.isEmpty else { return 0 }
        let queue = self.queue
        await withTaskGroup(of: Void.self) { group in
            for job in jobs {
                group.addTask { await queue.send(job) }
            }
        }
        return jobs.count
    }
}
