import Dispatch
import NIOCore
import NIOPosix
import ParleyTesting
import Synchronization
import Testing

@testable import ParleyServer

/// A producer ahead of its event loop waits for it: at most two windows are handed over and not yet taken.
@Suite struct OutboundPacerTests {
    @Test func aProducerAheadOfItsLoopWaitsAfterTwoWindows() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        // The loop is busy (as with other connections, or not scheduled) until the test lets it go.
        let busy = DispatchSemaphore(value: 0)
        loop.execute { busy.wait() }
        let written = Mutex(0)
        let producer = Task {
            var pacer = OutboundPacer(eventLoop: loop, window: 4)
            for _ in 0..<40 {
                written.withLock { $0 += 1 }
                try await pacer.wrote(1)
            }
        }
        // The first mark goes on the loop after 4 bytes, and at 8 the producer waits for the loop to pass it: it
        // stays at 8, where one that did not wait goes through it to 40. (A generous timeout: in CI, started beside
        // every other suite, this test took 17 s in all.)
        #expect(await eventually(timeout: .seconds(60)) { written.withLock { $0 } == 8 })
        busy.signal()
        try await producer.value
        #expect(written.withLock { $0 } == 40)
        try await group.shutdownGracefully()
    }

    @Test func aProducerOnALoopThatKeepsUpGoesOnToTheEnd() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var pacer = OutboundPacer(eventLoop: group.next(), window: 1024)
        for _ in 0..<1_000 { try await pacer.wrote(100) }  // 97 marks, each passed by the loop
        try await group.shutdownGracefully()
    }

}
