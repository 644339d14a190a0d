import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore

/// Asks the database whether it answers, with one question in flight at a time: callers that come while one is out
/// wait for its answer, each at most until its own deadline. A database that hangs holds one question, not one per
/// health request.
///
/// A question older than the check's timeout is no longer joined: the next caller asks a new one. A question can hang
/// for good (a query queued behind a connection that a broken network left half open), and callers that kept joining
/// it would find the database unavailable long after it answers again. While the database hangs, that is one more
/// question per timeout, up to ``maximumQuestions`` at once; past that, callers join the newest.
final class DatabaseProbe: Sendable {
    /// Questions in flight at most (all but the newest older than the timeout).
    static let maximumQuestions = 4

    private struct Waiter {
        var question: UInt64
        var continuation: CheckedContinuation<String?, Never>
    }

    private struct State {
        /// The newest question: its number and when it was asked (time since the timeline's start).
        var newest: (number: UInt64, askedAt: Duration)?
        var inFlight = 0
        var nextQuestion: UInt64 = 0
        var waiters: [UInt64: Waiter] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let state = NIOLockedValueBox(State())

    /// Questions in flight now.
    var questionsInFlight: Int { state.withLockedValue { $0.inFlight } }

    /// Callers waiting for an answer now.
    var waitingCallers: Int { state.withLockedValue { $0.waiters.count } }

    /// Nil when the store answered in time; else why not.
    func check(_ store: any ParleyStore, timeline: Timeline, timeout: Duration) async -> String? {
        await check(timeline: timeline, timeout: timeout) { try await store.checkHealth() }
    }

    /// Nil when `ask` (the database's question) returned in time; else why not.
    func check(timeline: Timeline, timeout: Duration, ask: @escaping @Sendable () async throws -> Void) async -> String?
    {
        let now = timeline.now()
        let deadline = now + timeout
        return await withCheckedContinuation { continuation in
            let (id, asked) = state.withLockedValue { state -> (UInt64, UInt64?) in
                let id = state.nextWaiter
                state.nextWaiter += 1
                var asked: UInt64?
                let question: UInt64
                if let newest = state.newest,
                    now < newest.askedAt + timeout || state.inFlight >= Self.maximumQuestions
                {
                    question = newest.number
                } else {
                    question = state.nextQuestion
                    state.nextQuestion += 1
                    state.newest = (question, now)
                    state.inFlight += 1
                    asked = question
                }
                state.waiters[id] = Waiter(question: question, continuation: continuation)
                return (id, asked)
            }
            if let asked {
                Task {
                    var failure: String?
                    do {
                        try await ask()
                    } catch {
                        failure = "\(error)"
                    }
                    let waiters = self.state.withLockedValue { state -> [Waiter] in
                        state.inFlight -= 1
                        if state.newest?.number == asked { state.newest = nil }
                        let answered = state.waiters.filter { $0.value.question == asked }
                        for key in answered.keys { state.waiters[key] = nil }
                        return Array(answered.values)
                    }
                    for waiter in waiters { waiter.continuation.resume(returning: failure) }
                }
            }
            Task {
                try? await timeline.sleepUntil(deadline)
                let waiter = self.state.withLockedValue { $0.waiters.removeValue(forKey: id) }
                waiter?.continuation.resume(returning: "no answer within \(timeout)")
            }
        }
    }
}
