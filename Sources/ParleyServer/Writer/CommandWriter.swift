import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import ParleyProtocol
import ParleyStore
import ServiceLifecycle

/// The single ordered path for every change to conversations: batches commands into one transaction
/// (group commit), then publishes the events they made, in sequence order, before answering their callers.
///
/// Commands are taken in the order they were enqueued, so one connection's sends keep their order. Because
/// publishing happens here, one batch after another, receivers see each conversation's events in sequence order.
/// With several nodes, the wake-ups for other nodes' commits are published on this same path, between batches.
///
/// Two loops: one stores batches, the other publishes them, so that while batch N's events are published and its
/// callers answered, batch N+1 can be stored. Publication follows commit order (the publishing loop takes the stored
/// batches in order, and the storing loop hands it each one only when it has taken the one before), each command is
/// answered only after its batch committed and its events were published, and the storing loop is never more than one
/// batch ahead.
///
/// Where the loops run is chosen once (``Execution``). On a single node whose store applies batches on the calling
/// thread (SQLite, ``SynchronousBatches``), both run on a thread of the writer's own (``WriterThread``), taking turns:
/// a batch is stored, published and answered without crossing a thread, before the next is stored, and the only
/// wake-ups are the writer's (when a command arrives while it sleeps) and the event loops' of the recipients.
/// Otherwise (PostgreSQL, several nodes) they are tasks of the cooperative pool, and storing overlaps publishing.
final class CommandWriter: Service {
    typealias Completion = @Sendable (Result<CommandResult, any Error>) -> Void

    private struct Pending: Sendable {
        var command: Command
        var completion: Completion
    }

    /// What the storing loop hands to the publishing loop, in commit order.
    private enum Stored: Sendable {
        /// With the unread counts read in the batch's transaction.
        case committed([Pending], BatchOutcome)
        case failed([Pending], any Error)
        case cluster([ClusterWork])
    }

    private enum Work {
        case commands([Pending])
        case cluster([ClusterWork])
    }

    /// Where the writer's loops run, and so how a batch is stored.
    private enum Execution {
        /// On a ``WriterThread``, the store applying each batch there without a suspension.
        case ownThread(any SynchronousBatches)
        /// As tasks of the cooperative pool.
        case tasks
    }

    private struct State {
        var queue: [Pending] = []
        var cluster: [ClusterWork] = []
        var waiter: CheckedContinuation<Void, Never>?
        var stopping = false

        /// Takes the next work: other nodes' commits first (they are older than anything this node commits next),
        /// then up to `maxBatch` commands.
        mutating func take(maxBatch: Int) -> Work? {
            if !cluster.isEmpty {
                defer { cluster = [] }
                return .cluster(cluster)
            }
            guard !queue.isEmpty else { return nil }
            let count = min(maxBatch, queue.count)
            let batch = Array(queue.prefix(count))
            queue.removeFirst(count)
            return .commands(batch)
        }
    }

    private let store: any ParleyStore
    private let publisher: EventPublisher
    private let maxBatch: Int
    private let logger: Logger
    private let state = NIOLockedValueBox(State())
    private let stored = HandOff<Stored>()
    /// With push on: called after a batch that stored new messages (they are in the push outbox).
    private let pushQueued: (@Sendable () -> Void)?
    /// Called after a batch that stored events (the webhook outbox may have rows for them).
    private let eventsStored: (@Sendable () -> Void)?
    /// Called after a batch that stored new messages (the search indexer files them).
    private let messagesStored: (@Sendable () -> Void)?
    private let execution: Execution
    private let metrics: ServerMetrics
    /// Where the data is, for the log line of a full disk (the data directory, or PostgreSQL).
    private let storage: String
    /// That line, once a minute at most.
    private let storageFullLog = LogThrottle()
    /// The batches started and finished, for readers that must know whether anything was written meanwhile.
    let epoch = WriteEpoch()

    /// - Parameter ownThread: run the loops on a thread of the writer's own on a single node whose store applies
    ///   batches on the calling thread (see the type's discussion); false runs them as tasks there too.
    init(
        store: any ParleyStore, publisher: EventPublisher, maxBatch: Int, pushQueued: (@Sendable () -> Void)? = nil,
        eventsStored: (@Sendable () -> Void)? = nil, messagesStored: (@Sendable () -> Void)? = nil,
        ownThread: Bool = true, metrics: ServerMetrics = .discarding, storage: String = "the database",
        logger: Logger
    ) {
        self.metrics = metrics
        self.storage = storage
        self.store = store
        self.publisher = publisher
        self.maxBatch = maxBatch
        self.pushQueued = pushQueued
        self.eventsStored = eventsStored
        self.messagesStored = messagesStored
        if ownThread, let store = store.capabilities.synchronousBatches, publisher.isSingleNode {
            self.execution = .ownThread(store)
        } else {
            self.execution = .tasks
        }
        self.logger = logger
    }

    /// Queues a command; `completion` runs once it is committed and its events are published.
    func enqueue(_ command: Command, completion: @escaping Completion) {
        let accepted = addWork { $0.queue.append(Pending(command: command, completion: completion)) }
        if !accepted { completion(.failure(DomainError(.serverShuttingDown, "The server is shutting down."))) }
    }

    /// Queues work of the cluster for the publishing loop: events another node committed, or a catch-up.
    ///
    /// Bounded: a node whose loop falls this far behind what arrives drops the events queued and reads every
    /// conversation it follows from the database instead (``maxClusterBacklog``).
    func clusterWork(_ work: ClusterWork) {
        addWork { state in
            // A catch-up of everything still queued covers this one: it runs after everything queued before now.
            let syncsAll = { (item: ClusterWork) -> Bool in
                if case .sync(nil) = item { return true }
                return false
            }
            if syncsAll(work), state.cluster.contains(where: syncsAll) { return }
            guard state.cluster.count < Self.maxClusterBacklog else {
                state.cluster = [.sync(nil)]
                return
            }
            state.cluster.append(work)
        }
    }

    /// Cluster work queued at most; past it, a catch-up from the database replaces it.
    static let maxClusterBacklog = 50_000

    /// Adds work unless the writer is stopping, and wakes the loop; returns whether the work was taken.
    @discardableResult
    private func addWork(_ add: (inout State) -> Void) -> Bool {
        let (accepted, waiter) = state.withLockedValue { state -> (Bool, CheckedContinuation<Void, Never>?) in
            guard !state.stopping else { return (false, nil) }
            add(&state)
            defer { state.waiter = nil }
            return (true, state.waiter)
        }
        waiter?.resume()
        return accepted
    }

    /// Applies a command and returns its result, or throws its ``DomainError``.
    func submit(_ command: Command) async throws -> CommandResult {
        try await withCheckedThrowingContinuation { continuation in
            enqueue(command) { continuation.resume(with: $0) }
        }
    }

    /// Runs until ``stop()``, a graceful shutdown or the task's cancellation (which all stop it the same way: what
    /// is queued is still applied), then returns once everything taken is published and answered.
    func run() async throws {
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                switch execution {
                case .ownThread: await WriterThread.run(named: "parley-writer") { await runLoops() }
                case .tasks: await runLoops()
                }
            } onGracefulShutdown: {
                self.stop()
            }
        } onCancel: {
            self.stop()
        }
    }

    /// The writer's two loops: one stores batches, the other publishes them (see the type's discussion).
    private func runLoops() async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.publishStored() }
            while let work = await nextWork() {
                switch work {
                case .commands(let batch):
                    epoch.batchStarted()
                    await stored.put(await commit(batch))
                case .cluster(let work): await stored.put(.cluster(work))
                }
                // The publishing loop has the batch but may not have run yet: `put` returns without suspending when
                // it was waiting. Let it go first, so that on the writer's own thread (one job at a time, in order)
                // a batch's callers are answered before the next batch is stored, not after.
                await Task.yield()
            }
            // Everything queued is stored: the publishing loop ends once it has published it.
            stored.finish()
        }
    }

    /// Stops taking commands; those already queued are still applied.
    func stop() {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            state.stopping = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    private func nextWork() async -> Work? {
        while true {
            let work = state.withLockedValue { state -> Work?? in
                if let work = state.take(maxBatch: maxBatch) { return .some(work) }
                return state.stopping ? .some(nil) : nil
            }
            if let work { return work }
            await withCheckedContinuation { continuation in
                let ready = state.withLockedValue { state -> Bool in
                    if !state.queue.isEmpty || !state.cluster.isEmpty || state.stopping { return true }
                    state.waiter = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }

    /// The commands of a batch as the store applies them (sends queue a push when push is on).
    private func commands(of batch: [Pending]) -> [Command] {
        var commands = batch.map(\.command)
        if pushQueued != nil {
            for index in commands.indices {
                if case .sendMessage(var send) = commands[index] {
                    send.queuesPush = true
                    commands[index] = .sendMessage(send)
                }
            }
        }
        return commands
    }

    /// Applies a batch in one transaction: on the writer's thread, there and then (``Execution``).
    private func commit(_ batch: [Pending]) async -> Stored {
        let started = DispatchTime.now().uptimeNanoseconds
        do {
            let outcome: BatchOutcome
            switch execution {
            case .ownThread(let store):
                outcome = try store.applySynchronously(commands(of: batch)) { publisher.unreadDue($0) }
            case .tasks:
                outcome = try await store.apply(commands(of: batch)) { [publisher] in publisher.unreadDue($0) }
            }
            return committed(batch, outcome, started: started)
        } catch {
            return failed(batch, error)
        }
    }

    private func committed(_ batch: [Pending], _ outcome: BatchOutcome, started: UInt64) -> Stored {
        let results = outcome.results
        metrics.commitDuration.recordNanoseconds(Int64(DispatchTime.now().uptimeNanoseconds - started))
        metrics.commandBatchSize.record(batch.count)
        metrics.commandsCommitted.increment(by: batch.count)
        let newMessages = results.reduce(0) { $0 + (Self.storedNewMessage($1) ? 1 : 0) }
        if newMessages > 0 { metrics.messagesStored.increment(by: newMessages) }
        if let pushQueued, newMessages > 0 { pushQueued() }
        if let messagesStored, newMessages > 0 { messagesStored() }
        if let eventsStored, results.contains(where: { (try? $0.get())?.events.isEmpty == false }) { eventsStored() }
        return .committed(batch, outcome)
    }

    private func failed(_ batch: [Pending], _ error: any Error) -> Stored {
        metrics.commitFailures.increment()
        metrics.databaseErrors.increment()
        if let refusal = error as? DomainError, refusal.code == .storageFull {
            // One line that names the disk, then at most one a minute: every send fails the same way meanwhile.
            if storageFullLog.take() {
                logger.error(
                    "The database's disk is full (\(storage)): sends and changes are refused with 507 ERR_STORAGE_FULL until space is freed."
                )
            }
            return .failed(batch, error)
        }
        logger.error("Storing a batch of \(batch.count) commands failed", metadata: ["error": "\(error)"])
        return .failed(batch, error)
    }

    /// Publishes what the storing loop stored, in order, and answers the callers; returns when it is all done.
    private func publishStored() async {
        while let next = await stored.take() {
            switch next {
            case .committed(let batch, let outcome):
                // Sockets are woken once the whole batch is published and answered: a sender's event and ack, or a
                // member's events of several messages, and the unread counts they changed, go out in one flush.
                var delivery = BatchDelivery(countedWithBatch: outcome.unread)
                await publish(batch, outcome.results, into: &delivery)
                publisher.deliverCounts(outcome.unread, into: &delivery)
                publisher.finish(&delivery)
                epoch.batchFinished()
            case .failed(let batch, let error):
                // Answered in order with the batches around it, like the others.
                for pending in batch { pending.completion(.failure(error)) }
                epoch.batchFinished()
            case .cluster(let work):
                for item in work {
                    switch item {
                    case .events(let conversation, let events): await publisher.publishRemote(conversation, events)
                    case .sync(let conversations): await publisher.sync(conversations)
                    case .fillGap(let conversation): await publisher.fillGap(conversation)
                    }
                }
            }
        }
    }

    /// Publishes a stored batch's outcomes and answers its callers, in order.
    private func publish(
        _ batch: [Pending], _ results: [Result<CommandResult, DomainError>], into delivery: inout BatchDelivery
    ) async {
        for (pending, result) in zip(batch, results) {
            switch result {
            case .success(let outcome):
                await publisher.publish(outcome, into: &delivery)
                pending.completion(.success(outcome))
            case .failure(let refusal):
                pending.completion(.failure(refusal))
            }
        }
    }

    private static func storedNewMessage(_ result: Result<CommandResult, DomainError>) -> Bool {
        guard case .success(let outcome) = result, case .message(_, duplicate: false) = outcome.outcome else {
            return false
        }
        return true
    }
}
