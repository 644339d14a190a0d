import NIOCore
import Testing

@testable import ParleyServer

/// The hand-over of a connection's upgrade outcome from its event loop to Hummingbird's task for it
/// (``UpgradeOutcome``): in either order, once, failures included.
@Suite struct UpgradeOutcomeTests {
    @Test func anOutcomeDecidedBeforeTheTaskAsksIsReturnedAtOnce() async throws {
        let outcome = UpgradeOutcome()
        outcome.decide(.success(.websocket))
        #expect(!outcome.hasWaiter)
        guard case .websocket = try await outcome.value() else {
            Issue.record("expected .websocket")
            return
        }
    }

    @Test func aWaitingTaskIsResumedByTheDecision() async throws {
        let outcome = UpgradeOutcome()
        let waiter = Task { try await outcome.value() }
        while !outcome.hasWaiter { await Task.yield() }
        outcome.decide(.success(.websocket))
        guard case .websocket = try await waiter.value else {
            Issue.record("expected .websocket")
            return
        }
        #expect(!outcome.hasWaiter)
    }

    @Test func aFailureIsThrownToTheWaitingTask() async throws {
        let outcome = UpgradeOutcome()
        let waiter = Task { try await outcome.value() }
        while !outcome.hasWaiter { await Task.yield() }
        outcome.decide(.failure(ChannelError.inputClosed))
        await #expect(throws: ChannelError.inputClosed) { try await waiter.value }
    }

    @Test func onlyTheFirstDecisionCounts() async throws {
        let outcome = UpgradeOutcome()
        outcome.decide(.success(.websocket))
        outcome.decide(.failure(ChannelError.inputClosed))
        guard case .websocket = try await outcome.value() else {
            Issue.record("expected .websocket")
            return
        }
    }
}
