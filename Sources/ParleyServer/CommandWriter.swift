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
final class CommandWriter: Service {
    typealias Completion = @Sendable (Result<CommandResult, any Error>) -> Void

    private struct Pending {
        var command: Command
        var completion: Completion
    }

    private enum Work {
        case commands([Pending])
        case committedElsewhere([CommittedRange])
    }

    private struct State {
        var queue: [Pending] = []
        var committedElsewhere: [CommittedRange] = []
        var waiter: CheckedContinuation<Void, Never>?
        var stopping = false
    }

    private let store: any ParleyStore
    private let publisher: EventPublisher
    private let maxBatch: Int
    private let logger: Logger
    private let state = NIOLockedValueBox(State())
    /// With push on: called after a batch that stored new messages (they are in the push outbox).
    private let pushQueued: (@Sendable () -> Void)?

    init(
        store: any ParleyStore, publisher: EventPublisher, maxBatch: Int, pushQueued: (@Sendable () -> Void)? = nil,
        logger: Logger
    ) {
        self.store = store
        self.publisher = publisher
        self.maxBatch = maxBatch
        self.pushQueued = pushQueued
        self.logger = logger
    }

    /// Queues a command; `completion` runs once it is committed and its events are published.
    func enqueue(_ command: Command, completion: @escaping Completion) {
        let accepted = addWork { $0.queue.append(Pending(command: command, completion: completion)) }
        if !accepted { completion(.failure(DomainError(.serverShuttingDown, "The server is shutting down."))) }
    }

    /// Queues the publication of events another node committed.
    func committedElsewhere(_ ranges: [CommittedRange]) {
        addWork { $0.committedElsewhere += ranges }
    }

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

    func run() async throws {
        await withGracefulShutdownHandler {
            while let work = await nextWork() {
                switch work {
                case .commands(let batch): await process(batch)
                case .committedElsewhere(let ranges): await publisher.publishCommitted(ranges)
                }
            }
        } onGracefulShutdown: {
            self.stop()
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
                // Other nodes' commits first: they are older than anything this node commits next.
                if !state.committedElsewhere.isEmpty {
                    defer { state.committedElsewhere = [] }
                    return .some(.committedElsewhere(state.committedElsewhere))
                }
                if !state.queue.isEmpty {
                    let count = min(maxBatch, state.queue.count)
                    let batch = Array(state.queue.prefix(count))
                    state.queue.removeFirst(count)
                    return .some(.commands(batch))
                }
                return state.stopping ? .some(nil) : nil
            }
            if let work { return work }
            await withCheckedContinuation { continuation in
                let ready = state.withLockedValue { state -> Bool in
                    if !state.queue.isEmpty || !state.committedElsewhere.isEmpty || state.stopping { return true }
                    state.waiter = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }

    private func process(_ batch: [Pending]) async {
        var commands = batch.map(\.command)
        if pushQueued != nil {
            for index in commands.indices {
                if case .sendMessage(var send) = commands[index] {
                    send.queuesPush = true
                    commands[index] = .sendMessage(send)
                }
            }
        }
        let results: [Result<CommandResult, DomainError>]
        do {
            results = try await store.apply(commands)
        } catch {
            logger.error("Storing a batch of \(batch.count) commands failed", metadata: ["error": "\(error)"])
            for pending in batch { pending.completion(.failure(error)) }
            return
        }
        if let pushQueued, results.contains(where: Self.storedNewMessage) { pushQueued() }
        for (pending, result) in zip(batch, results) {
            switch result {
            case .success(let outcome):
                await publisher.publish(outcome)
                pending.completion(.success(outcome))
            case .failure(let refusal):
                pending.completion(.failure(refusal))
            }
        }
    }

    private static func storedNewMessage(_ result: Result<CommandResult, DomainError>) -> Bool {
        guard case .success(let outcome) = result, case .message(_, duplicate: false) = outcome.outcome else { return false }
        return true
    }
}
