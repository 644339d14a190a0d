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
final class CommandWriter: Service {
    typealias Completion = @Sendable (Result<CommandResult, any Error>) -> Void

    private struct Pending {
        var command: Command
        var completion: Completion
    }

    private struct State {
        var queue: [Pending] = []
        var waiter: CheckedContinuation<Void, Never>?
        var stopping = false
    }

    private let store: any ParleyStore
    private let hub: Hub
    private let maxBatch: Int
    private let logger: Logger
    /// Called after each applied command's events are published (typing, unread counts follow from them).
    private let onApplied: @Sendable (Command, CommandResult) -> Void
    private let state = NIOLockedValueBox(State())

    init(
        store: any ParleyStore, hub: Hub, maxBatch: Int, logger: Logger,
        onApplied: @escaping @Sendable (Command, CommandResult) -> Void = { _, _ in }
    ) {
        self.store = store
        self.hub = hub
        self.maxBatch = maxBatch
        self.logger = logger
        self.onApplied = onApplied
    }

    /// Queues a command; `completion` runs once it is committed and its events are published.
    func enqueue(_ command: Command, completion: @escaping Completion) {
        let (accepted, waiter) = state.withLockedValue { state -> (Bool, CheckedContinuation<Void, Never>?) in
            guard !state.stopping else { return (false, nil) }
            state.queue.append(Pending(command: command, completion: completion))
            defer { state.waiter = nil }
            return (true, state.waiter)
        }
        guard accepted else {
            completion(.failure(DomainError(.serverShuttingDown, "The server is shutting down.")))
            return
        }
        waiter?.resume()
    }

    /// Applies a command and returns its result, or throws its ``DomainError``.
    func submit(_ command: Command) async throws -> CommandResult {
        try await withCheckedThrowingContinuation { continuation in
            enqueue(command) { continuation.resume(with: $0) }
        }
    }

    func run() async throws {
        await withGracefulShutdownHandler {
            while let batch = await nextBatch() {
                await process(batch)
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

    private func nextBatch() async -> [Pending]? {
        while true {
            let batch = state.withLockedValue { state -> [Pending]?? in
                if !state.queue.isEmpty {
                    let count = min(maxBatch, state.queue.count)
                    let batch = Array(state.queue.prefix(count))
                    state.queue.removeFirst(count)
                    return .some(batch)
                }
                return state.stopping ? .some(nil) : nil
            }
            if let batch { return batch }
            await withCheckedContinuation { continuation in
                let ready = state.withLockedValue { state -> Bool in
                    if !state.queue.isEmpty || state.stopping { return true }
                    state.waiter = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }

    private func process(_ batch: [Pending]) async {
        let results: [Result<CommandResult, DomainError>]
        do {
            results = try await store.apply(batch.map(\.command))
        } catch {
            logger.error("Storing a batch of \(batch.count) commands failed", metadata: ["error": "\(error)"])
            for pending in batch { pending.completion(.failure(error)) }
            return
        }
        for (pending, result) in zip(batch, results) {
            switch result {
            case .success(let outcome):
                publish(outcome)
                onApplied(pending.command, outcome)
                pending.completion(.success(outcome))
            case .failure(let refusal):
                pending.completion(.failure(refusal))
            }
        }
    }

    private func publish(_ result: CommandResult) {
        for stored in result.events {
            hub.deliver(FrameEncoding.eventFrame(json: stored.json), appId: stored.event.appId, to: result.recipients)
        }
    }
}
