import Logging
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyTesting
import ServiceLifecycle
import Testing

@testable import ParleyServer

/// The one loop of push and webhooks (``OutboxWorker``), in virtual time, over a queue held in memory: what is due is
/// sent at once, what is due later at its time, never more than the concurrency at once; a queue that can hold nothing
/// makes the worker idle until told otherwise; leases are released at start and at stop.
@Suite(.timeLimit(.minutes(1))) struct OutboxWorkerTests {
    /// Jobs in memory, each due at an epoch millisecond; every call the worker makes is recorded and told.
    final class MemoryQueue: OutboxQueue {
        struct State {
            var due: [Int: Int64] = [:]
            var leased: Set<Int> = []
            var sent: [Int] = []
            var claims: [Int] = []
            var releases: [String?] = []
            var expansions = 0
            var shutdowns = 0
            /// Whether nothing can be queued (``expand(now:)`` answers nil).
            var holdsNothing = false
        }

        let state = NIOLockedValueBox(State())
        let told: AsyncStream<String>
        private let tell: AsyncStream<String>.Continuation

        init(_ due: [Int: Int64] = [:]) {
            state.withLockedValue { $0.due = due }
            (told, tell) = AsyncStream.makeStream(of: String.self)
        }

        func expand(now: Int64) async throws -> Bool? {
            let holdsNothing = state.withLockedValue { state in
                state.expansions += 1
                return state.holdsNothing
            }
            tell.yield("expand")
            return holdsNothing ? nil : false
        }

        func nextDue() async throws -> Int64? {
            state.withLockedValue { state in state.due.filter { !state.leased.contains($0.key) }.values.min() }
        }

        func claim(owner: String, now: Int64, leaseUntil: Int64, limit: Int) async throws -> [Int] {
            state.withLockedValue { state in
                let due = state.due.filter { $0.value <= now && !state.leased.contains($0.key) }.keys.sorted()
                let claimed = Array(due.prefix(limit))
                state.leased.formUnion(claimed)
                state.claims.append(claimed.count)
                return claimed
            }
        }

        func send(_ job: Int) async {
            state.withLockedValue { state in
                state.due[job] = nil
                state.leased.remove(job)
                state.sent.append(job)
            }
            tell.yield("sent \(job)")
        }

        func release(owner: String?) async throws {
            state.withLockedValue { $0.releases.append(owner) }
            tell.yield("release")
        }

        func shutdown() async {
            state.withLockedValue { $0.shutdowns += 1 }
            tell.yield("shutdown")
        }

        /// Waits until the worker has done `what` (`"sent 3"`, `"expand"` ...).
        func waitFor(_ what: String) async {
            for await event in told where event == what { return }
        }
    }

    static let epoch: Int64 = 1_000_000

    static func worker(
        _ queue: MemoryQueue, clock: ManualClock, single: Bool = true, concurrency: Int = 4
    ) -> OutboxWorker<MemoryQueue> {
        OutboxWorker(
            queue, name: "Test", owner: "node-1", ownsEveryLease: single, pollInterval: .seconds(60),
            concurrency: concurrency, requestTimeout: .seconds(10),
            time: ServerClock(timeline: Timeline(clock), epochAtStart: epoch), logger: Logger(label: "test"))
    }

    @Test func whatIsDueGoesAtOnceAndWhatIsDueLaterAtItsTime() async throws {
        let clock = ManualClock()
        let queue = MemoryQueue([1: Self.epoch, 2: Self.epoch + 3_000])
        let worker = Self.worker(queue, clock: clock)
        let running = Task { try await worker.run() }
        await queue.waitFor("sent 1")
        // Job 2's time, not the 60 s poll.
        await clock.sleeper(at: .seconds(3))
        #expect(queue.state.withLockedValue(\.sent) == [1])
        clock.advance(by: .seconds(3))
        await queue.waitFor("sent 2")
        #expect(queue.state.withLockedValue(\.sent) == [1, 2])
        // Nothing left: the poll.
        await clock.sleeper(at: .seconds(63))
        // A single node releases every lease (an earlier run's) at start.
        #expect(queue.state.withLockedValue(\.releases) == [nil])
        running.cancel()
        try await running.value
    }

    @Test func neverMoreThanTheConcurrencyAtOnceAndTheRestWithoutWaiting() async throws {
        let clock = ManualClock()
        let queue = MemoryQueue(Dictionary(uniqueKeysWithValues: (1...5).map { ($0, Self.epoch) }))
        let worker = Self.worker(queue, clock: clock, concurrency: 2)
        let running = Task { try await worker.run() }
        for job in 1...5 { await queue.waitFor("sent \(job)") }
        #expect(queue.state.withLockedValue(\.claims) == [2, 2, 1])
        #expect(clock.now.offset == .zero)
        running.cancel()
        try await running.value
    }

    @Test func aQueueThatHoldsNothingIgnoresWakesUntilItChanges() async throws {
        let clock = ManualClock()
        let queue = MemoryQueue()
        queue.state.withLockedValue { $0.holdsNothing = true }
        // Several nodes: another node may make it hold something, so the idle worker still looks every poll.
        let worker = Self.worker(queue, clock: clock, single: false)
        let running = Task { try await worker.run() }
        await queue.waitFor("expand")
        await clock.sleeper(at: .seconds(60))
        #expect(worker.isIdle)
        queue.state.withLockedValue { state in
            state.holdsNothing = false
            state.due[7] = Self.epoch
        }
        // What can change it (not the message path's wake) makes the worker look at once.
        worker.queueChanged()
        #expect(!worker.isIdle)
        await queue.waitFor("sent 7")
        #expect(clock.now.offset == .zero)
        running.cancel()
        try await running.value
    }

    @Test func leasesAreReleasedAtStartAndAtAGracefulStop() async throws {
        let clock = ManualClock()
        let queue = MemoryQueue()
        let worker = Self.worker(queue, clock: clock, single: false)
        let group = ServiceGroup(services: [worker], logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        await queue.waitFor("expand")
        await clock.sleeper(at: .seconds(60))
        // Several nodes: only this node's own leases.
        #expect(queue.state.withLockedValue(\.releases) == ["node-1"])
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(queue.state.withLockedValue(\.releases) == ["node-1", "node-1"])
        #expect(queue.state.withLockedValue(\.shutdowns) == 1)
    }
}
