import NIOCore
import ParleyTesting
import Testing

@testable import NATSNIO

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Order and volume: asserts only counts and order; prints the measured rates.
@Suite(
    "Live: order and throughput", .enabled(if: liveServerAvailable, "nats-server not found"), .timeLimit(.minutes(4)))
struct NATSThroughputTests {
    /// User plus system CPU time of the whole test process.
    static func processCPUTime() -> Duration {
        var usage = rusage()
        #if canImport(Glibc)
            getrusage(RUSAGE_SELF.rawValue, &usage)
        #else
            getrusage(RUSAGE_SELF, &usage)
        #endif
        let user = Duration.seconds(usage.ru_utime.tv_sec) + .microseconds(usage.ru_utime.tv_usec)
        let system = Duration.seconds(usage.ru_stime.tv_sec) + .microseconds(usage.ru_stime.tv_usec)
        return user + system
    }

    struct Received: Sendable {
        var count = 0
        var outOfOrder = 0
        var duration = Duration.zero
    }

    static func consume(_ inbox: NATSInbox, count: Int, subjects: [String]) async -> Received {
        var received = Received()
        var start: ContinuousClock.Instant?
        while received.count < count, let batch = await inbox.nextBatch() {
            if start == nil { start = .now }
            for message in batch {
                let index: UInt32? = message.payload.getInteger(at: message.payload.readerIndex, as: UInt32.self)
                let expectedSubject: String = subjects[received.count % subjects.count]
                if index != UInt32(received.count) || message.subject != expectedSubject {
                    received.outOfOrder += 1
                }
                received.count += 1
            }
        }
        received.duration = ContinuousClock.now - (start ?? .now)
        return received
    }

    /// Publishes `count` 400-byte messages carrying their index; returns how often the buffer was full.
    static func publish(count: Int, subjects: [String], on connection: NATSConnection) async throws -> Int {
        var payload = ByteBuffer(repeating: 0x61, count: 400)
        var fullWaits = 0
        var index = 0
        while index < count {
            payload.setInteger(UInt32(index), at: payload.readerIndex)
            do {
                try connection.publish(payload, to: subjects[index % subjects.count])
                index += 1
                if index % 1000 == 0 {
                    // A hot loop that never suspends would starve the other tasks of the cooperative pool.
                    await Task.yield()
                }
            } catch {
                guard error.code == .outboundBufferFull else { throw error }
                // Back-pressure: let the socket catch up.
                fullWaits += 1
                try await connection.flush(timeout: .seconds(10))
            }
        }
        return fullWaits
    }

    /// 20,000 messages: about the outbound buffer's worth, interleaved over three subjects, and few enough that a debug
    /// build beside every other suite (25,000 messages a second, or far fewer on a loaded machine) stays within the
    /// server's limits for a slow reader (its 64 MiB of pending bytes, its write deadline), past which NATS drops the
    /// subscriber (at most once) and the order could not be checked. The write deadline is 120 s rather than the
    /// default 10 s: at the start of a whole run on two cores this process was once starved that long, and the server
    /// dropped the subscriber after 10,472 messages.
    @Test func twentyThousandMessagesOverThreeSubjectsArriveCompleteAndInOrder() async throws {
        var options = NATSServerProcess.Options()
        options.writeDeadline = .seconds(120)
        let server = try await NATSServerProcess.start(options)
        defer { server.stop() }
        // Pings every 30 s rather than 2 s: starved of CPU at the start of a whole run, a client missed two pongs in a
        // row, took its connection for dead mid-stream and reconnected, and what was in flight was lost (at most
        // once). Staleness has tests of its own; this one is about order and completeness on one connection.
        let quietPings: (inout NATSConfiguration) -> Void = { $0.pingInterval = .seconds(30) }
        let subscriber = try await TestClient.connected(server.url, configure: quietPings)
        let publisher = try await TestClient.connected(server.url, configure: quietPings)
        let count = 20_000
        let subjects = ["order.a", "order.b", "order.c"]
        let inbox = subscriber.connection.makeInbox(maxMessages: 2 * count, maxBytes: 256 << 20)
        for subject in subjects {
            _ = try subscriber.connection.subscribe(to: subject, into: inbox)
        }
        try await subscriber.connection.flush(timeout: .seconds(10))

        // The consumer checks order as it goes, in batches.
        // Structured: cancelling the test (time limit) ends the consumer too.
        async let consumed = Self.consume(inbox, count: count, subjects: subjects)
        let cpuStart = Self.processCPUTime()
        let publishStart = ContinuousClock.now
        let fullWaits = try await Self.publish(count: count, subjects: subjects, on: publisher.connection)
        let publishTime = ContinuousClock.now - publishStart
        try await publisher.connection.flush(timeout: .seconds(30))
        let flushedTime = ContinuousClock.now - publishStart

        let received = await consumed
        let cpu = Self.processCPUTime() - cpuStart
        let receiveTime = received.duration
        #expect(received.count == count)
        #expect(received.outOfOrder == 0)
        #expect(inbox.droppedMessages == 0)
        #expect(publisher.connection.statistics.messagesOut == count)
        #expect(subscriber.connection.statistics.messagesIn == count)
        #expect(subscriber.connection.statistics.reconnects == 0)

        func rate(_ duration: Duration) -> Int {
            let nanoseconds: Int64 =
                duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
            let perSecond: Int64 = nanoseconds > 0 ? Int64(count) * 1_000_000_000 / nanoseconds : 0
            return Int(perSecond)
        }
        print(
            """
            [NATSNIO throughput] \(count) x 400 B: publish() loop \(publishTime) (\(rate(publishTime)) msg/s), \
            through server PONG \(flushedTime) (\(rate(flushedTime)) msg/s, \(fullWaits) buffer-full waits); \
            receive \(receiveTime) (\(rate(receiveTime)) msg/s); \
            process CPU (both clients, all threads, other tests included) \(cpu)
            """)
        _ = await publisher.close()
        _ = await subscriber.close()
    }
}
