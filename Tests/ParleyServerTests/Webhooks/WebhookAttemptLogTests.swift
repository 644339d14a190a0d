import Testing

@testable import ParleyServer

/// The webhook attempt log's waits: what tests and operators' tools watch for retries.
@Suite(.timeLimit(.minutes(1))) struct WebhookAttemptLogTests {
    static func attempt(_ number: Int, delivered: Bool) -> WebhookAttempt {
        WebhookAttempt(
            deliveryId: "dlv_1", webhookId: "wh_1", event: .messageSent, attempt: number, delivered: delivered,
            status: delivered ? 200 : 500, error: nil
        )
    }

    /// A wait returns once its condition holds, with every attempt so far; one whose condition already holds returns
    /// at once.
    @Test func aWaitEndsWhenItsConditionHolds() async {
        let log = WebhookAttemptLog()
        let waiting = Task { await log.wait { $0.contains(where: \.delivered) } }
        log.record(Self.attempt(1, delivered: false))
        log.record(Self.attempt(2, delivered: true))
        #expect(await waiting.value.map(\.attempt) == [1, 2])
        #expect(await log.wait { $0.count == 2 }.count == 2)
    }

    /// A cancelled wait (a test past its time limit) returns the attempts so far instead of waiting for ever, and
    /// is forgotten: a later attempt resumes nobody twice.
    @Test func aCancelledWaitReturnsWhatThereIs() async {
        let log = WebhookAttemptLog()
        log.record(Self.attempt(1, delivered: false))
        let waiting = Task { await log.wait { _ in false } }
        let cancelledFirst = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await log.wait { _ in false }
        }
        #expect(await cancelledFirst.value.map(\.attempt) == [1])
        waiting.cancel()
        #expect(await waiting.value.map(\.attempt) == [1])
        log.record(Self.attempt(2, delivered: true))
        #expect(await log.wait { $0.count == 2 }.map(\.attempt) == [1, 2])
    }
}
