import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyTesting
import Testing

@testable import ParleyServer

/// Fixed-delay timers on one task, in virtual time: a timer runs out once, `delay` after it was last scheduled,
/// unless cancelled; many timers cost no task each.
@Suite struct FixedDelayTimersTests {
    @Test func timersRunOutInOrderOnceAndNotWhenCancelledOrReplaced() async throws {
        let clock = ManualClock()
        let timers = FixedDelayTimers<String>(delay: .seconds(5), timeline: Timeline(clock))
        let (expired, sink) = AsyncStream.makeStream(of: String.self)
        let runner = Task { await timers.run { sink.yield($0) } }
        var fired = expired.makeAsyncIterator()

        timers.schedule("a")
        timers.schedule("b")
        timers.schedule("c")
        #expect(timers.cancel("b"))
        #expect(!timers.cancel("b"))
        await clock.sleeper(at: .seconds(5))
        clock.advance(by: .seconds(2))
        timers.schedule("a")  // replaced: now due at 7 s
        clock.advance(by: .seconds(3))
        #expect(await fired.next() == "c")
        #expect(timers.isScheduled("a") && !timers.isScheduled("c"))
        await clock.sleeper(at: .seconds(7))
        clock.advance(by: .seconds(2))
        #expect(await fired.next() == "a")

        // Ten thousand timers at once: one sleeper, all of them run out together.
        for index in 0..<10_000 { timers.schedule("k\(index)") }
        await clock.sleeper(at: .seconds(12))
        #expect(clock.sleeperCount == 1)
        clock.advance(by: .seconds(5))
        var count = 0
        while count < 10_000, let key = await fired.next() {
            #expect(key == "k\(count)")
            count += 1
        }
        #expect(count == 10_000)
        runner.cancel()
        await runner.value
    }
}
