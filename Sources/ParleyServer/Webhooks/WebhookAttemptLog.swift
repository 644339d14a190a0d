import NIOConcurrencyHelpers
import ParleyProtocol

/// One request this node made to a webhook endpoint.
public struct WebhookAttempt: Sendable, Hashable {
    public var deliveryId: String
    public var webhookId: String
    public var event: EventName
    /// The attempt's number for its delivery (1 for the first).
    public var attempt: Int
    /// True for a 2xx answer.
    public var delivered: Bool
    /// The answer's status, when there was one.
    public var status: Int?
    /// Why it failed.
    public var error: String?
}

/// The node's latest webhook attempts (the last ``capacity`` at least, twice as many at most), with waiters: what
/// tests and operators' tools watch instead of guessing when a retry happened.
final class WebhookAttemptLog: Sendable {
    static let capacity = 10_000

    private struct Waiter {
        var id: UInt64
        var condition: @Sendable ([WebhookAttempt]) -> Bool
        var continuation: CheckedContinuation<[WebhookAttempt], Never>
    }

    private struct State {
        var attempts: [WebhookAttempt] = []
        var waiters: [Waiter] = []
        var nextWaiter: UInt64 = 0
    }

    private let state = NIOLockedValueBox(State())

    func record(_ attempt: WebhookAttempt) {
        typealias WakeUp = (CheckedContinuation<[WebhookAttempt], Never>, [WebhookAttempt])
        let wakeUps = state.withLockedValue { state -> [WakeUp] in
            state.attempts.append(attempt)
            // Trimmed in chunks: one copy per `capacity` attempts, not one per attempt.
            if state.attempts.count >= 2 * Self.capacity { state.attempts.removeFirst(Self.capacity) }
            guard !state.waiters.isEmpty else { return [] }
            let attempts = state.attempts
            var wakeUps: [WakeUp] = []
            state.waiters.removeAll { waiter in
                guard waiter.condition(attempts) else { return false }
                wakeUps.append((waiter.continuation, attempts))
                return true
            }
            return wakeUps
        }
        for (continuation, attempts) in wakeUps { continuation.resume(returning: attempts) }
    }

    /// Returns once `condition` holds for the attempts so far, or, when the waiting task is cancelled, at once with the
    /// attempts so far (which the caller checks: a test's time limit ends its wait instead of leaving it hanging).
    func wait(until condition: @escaping @Sendable ([WebhookAttempt]) -> Bool) async -> [WebhookAttempt] {
        let id = state.withLockedValue { state -> UInt64 in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = state.withLockedValue { state -> [WebhookAttempt]? in
                    if condition(state.attempts) || Task.isCancelled { return state.attempts }
                    state.waiters.append(Waiter(id: id, condition: condition, continuation: continuation))
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let cancelled = state.withLockedValue {
                state -> (CheckedContinuation<[WebhookAttempt], Never>, [WebhookAttempt])? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return (state.waiters.remove(at: index).continuation, state.attempts)
            }
            if let (continuation, attempts) = cancelled { continuation.resume(returning: attempts) }
        }
    }
}
