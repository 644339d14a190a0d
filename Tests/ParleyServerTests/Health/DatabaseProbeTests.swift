import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyTesting
import Testing

@testable import ParleyServer

/// The readiness check's question to the database (``DatabaseProbe``), in virtual time.
@Suite(.timeLimit(.minutes(1))) struct DatabaseProbeTests {
    /// Questions the test answers by hand, in the order they were asked.
    final class Questions: Sendable {
        private let waiting = NIOLockedValueBox<[CheckedContinuation<Void, any Error>]>([])
        private let asked = NIOLockedValueBox(0)

        var count: Int { asked.withLockedValue { $0 } }

        func ask() async throws {
            try await withCheckedThrowingContinuation { continuation in
                waiting.withLockedValue { $0.append(continuation) }
                asked.withLockedValue { $0 += 1 }
            }
        }

        /// Answers the question asked `index`-th (0 first).
        func answer(_ index: Int, with error: (any Error)? = nil) {
            let continuation = waiting.withLockedValue { $0[index] }
            if let error { continuation.resume(throwing: error) } else { continuation.resume() }
        }
    }

    struct Unreachable: Error {}

    let timeout = Duration.seconds(2)
    let clock: ManualClock
    let timeline: Timeline
    let probe = DatabaseProbe()
    let questions = Questions()

    init() {
        let clock = ManualClock()
        self.clock = clock
        timeline = Timeline(clock)
    }

    /// One readiness check.
    func check() async -> String? {
        await probe.check(timeline: timeline, timeout: timeout, ask: questions.ask)
    }

    /// Callers that come while a question is out share it: one question, every caller answered by it.
    @Test func callersWhileAQuestionIsOutShareItsAnswer() async throws {
        async let first = check()
        async let second = check()
        // Both callers wait before the question is answered.
        while probe.waitingCallers < 2 || questions.count < 1 { await Task.yield() }
        questions.answer(0)
        #expect(await first == nil)
        #expect(await second == nil)
        #expect(questions.count == 1)
        #expect(probe.questionsInFlight == 0)
    }

    /// A question that never gets its answer (a query stuck on a half-open connection) is not joined once it is
    /// older than the timeout: the next caller asks again and is answered, though the first question is still out.
    @Test func aQuestionOlderThanTheTimeoutIsAskedAgain() async throws {
        async let stuck = check()
        await clock.sleeper(at: timeout)
        clock.advance(by: timeout)
        #expect(await stuck == "no answer within \(timeout)")
        #expect(probe.questionsInFlight == 1)

        async let again = check()
        while probe.waitingCallers < 1 { await Task.yield() }
        let askedAgain = probe.questionsInFlight == 2
        #expect(askedAgain, "the caller joined the question that never ends")
        if askedAgain {
            while questions.count < 2 { await Task.yield() }
            questions.answer(1)
            #expect(await again == nil)
            #expect(probe.questionsInFlight == 1)
        } else {
            await clock.sleeper(at: timeout * 2)
            clock.advance(by: timeout)
            _ = await again
        }
        // The stuck one fails at last; nothing waits for it.
        questions.answer(0, with: Unreachable())
        while probe.questionsInFlight > 0 { await Task.yield() }
    }

    /// While the database hangs, at most ``DatabaseProbe/maximumQuestions`` questions are out: later callers join the
    /// newest, and are answered by its deadline.
    @Test func aHangingDatabaseHoldsABoundedNumberOfQuestions() async throws {
        for round in 1...(DatabaseProbe.maximumQuestions + 3) {
            async let answer = check()
            await clock.sleeper(at: timeout * round)
            clock.advance(by: timeout)
            #expect(await answer == "no answer within \(timeout)")
        }
        #expect(questions.count == DatabaseProbe.maximumQuestions)
        #expect(probe.questionsInFlight == DatabaseProbe.maximumQuestions)
        for index in 0..<questions.count { questions.answer(index, with: Unreachable()) }
        while probe.questionsInFlight > 0 { await Task.yield() }
    }
}
