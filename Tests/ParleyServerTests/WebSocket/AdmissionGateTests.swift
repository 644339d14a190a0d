import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing

@testable import ParleyServer

/// Setup work in progress is capped (ServerConfiguration.maxConnectionsInSetup): accepted connections until their first
/// request is read and WebSocket handshakes share the slots; at the cap the listening socket is not read (nothing more is
/// accepted) until a slot is free, and a free slot goes to a waiting handshake first.
@Suite struct AdmissionGateTests {
    /// Counts the reads (accepts) that reach the listening socket.
    final class ReadCounter: ChannelOutboundHandler {
        typealias OutboundIn = Never
        var reads = 0
        func read(context: ChannelHandlerContext) {
            reads += 1
            context.read()
        }
    }

    struct Rig {
        let loop = NIOAsyncTestingEventLoop()
        let listener: NIOAsyncTestingChannel
        let gate: AdmissionGate
        let counter = ReadCounter()

        init(limit: Int) async throws {
            listener = NIOAsyncTestingChannel(loop: loop)
            gate = AdmissionGate(limit: limit)
            try await gate.install(on: listener, logger: Logger(label: "test"))
            try await listener.pipeline.addHandler(counter, position: .first).get()
        }

        func reads() async throws -> Int {
            let counter = self.counter
            return try await loop.submit { counter.reads }.get()
        }

        func accept() async throws -> NIOAsyncTestingChannel {
            let child = NIOAsyncTestingChannel(loop: loop)
            try await listener.writeInbound(child as any Channel)
            listener.read()
            // The read is passed on (or withheld) before the test goes on.
            await loop.run()
            return child
        }
    }

    @Test func atTheCapNothingMoreIsAcceptedUntilAConnectionIsAdmittedOrCloses() async throws {
        let rig = try await Rig(limit: 2)
        let first = try await rig.accept()
        #expect(try await rig.reads() == 1)
        let second = try await rig.accept()
        rig.listener.read()
        // Two connections being set up: the cap.
        #expect(try await rig.reads() == 1)

        // The first is admitted: the withheld read goes through.
        rig.gate.admitted(first)
        await rig.loop.run()
        #expect(try await rig.reads() == 2)
        // Saying it twice changes nothing.
        rig.gate.admitted(first)
        await rig.loop.run()
        _ = try await rig.accept()
        #expect(try await rig.reads() == 2)

        // A connection that closes during its setup frees its slot too.
        try await second.close()
        await rig.loop.run()
        #expect(try await rig.reads() == 3)
        _ = try? await rig.listener.finish(acceptAlreadyClosed: true)
    }

    @Test func handshakesShareTheSlotsAndAFreedSlotGoesToAWaitingHandshakeFirst() async throws {
        let rig = try await Rig(limit: 2)
        let first = try await rig.accept()
        let granted = NIOLockedValueBox<[Int]>([])
        let (one, oneHolds) = rig.gate.requestHandshake(at: rig.loop.now) { granted.withLockedValue { $0.append(1) } }
        #expect(oneHolds)
        // Full: the next handshakes wait, in order; a waiter that leaves is skipped.
        let (two, twoHolds) = rig.gate.requestHandshake(at: rig.loop.now) { granted.withLockedValue { $0.append(2) } }
        let (_, threeHolds) = rig.gate.requestHandshake(at: rig.loop.now) { granted.withLockedValue { $0.append(3) } }
        #expect(!twoHolds && !threeHolds)
        rig.listener.read()
        #expect(try await rig.reads() == 1)
        rig.gate.release(two)
        // The accepted connection's slot goes to the waiting handshake, not to a new connection.
        rig.gate.admitted(first)
        await rig.loop.run()
        #expect(granted.withLockedValue { $0 } == [3])
        #expect(try await rig.reads() == 1)
        rig.gate.release(one)
        rig.gate.release(one)
        await rig.loop.run()
        #expect(try await rig.reads() == 2)
        #expect(rig.gate.counts.handshakes == 1 && rig.gate.counts.waiting == 0)
        _ = try? await rig.listener.finish(acceptAlreadyClosed: true)
    }

    /// A connection that has sent nothing (a TCP health check, a port scan) gives its slot up at the first sweep while
    /// the gate is full (10 ms), so that silent connections cannot hold the gate shut; one that sent its first bytes
    /// keeps it.
    @Test func connectionsThatSendNothingAreFreedByTheNextSweep() async throws {
        let rig = try await Rig(limit: 2)
        let silent = try await rig.accept()
        let talking = try await rig.accept()
        rig.gate.heard(talking)
        rig.listener.read()
        #expect(try await rig.reads() == 1)
        await rig.loop.advanceTime(by: .milliseconds(5))
        #expect(try await rig.reads() == 1)
        await rig.loop.advanceTime(by: .milliseconds(10))
        #expect(try await rig.reads() == 2)
        #expect(rig.gate.counts.accepting == 1)
        withExtendedLifetime((silent, talking)) {}
        _ = try? await rig.listener.finish(acceptAlreadyClosed: true)
    }

    /// Slots held longer than a second (a connection that never finishes its setup) are freed while the gate is full.
    @Test func slotsHeldTooLongAreFreedWhileTheGateIsFull() async throws {
        let rig = try await Rig(limit: 2)
        let connection = try await rig.accept()
        // It sent something (a head that never ends): only the hold's limit frees it.
        rig.gate.heard(connection)
        _ = rig.gate.requestHandshake(at: rig.loop.now) {}
        rig.listener.read()
        #expect(try await rig.reads() == 1)
        await rig.loop.advanceTime(by: .milliseconds(900))
        #expect(try await rig.reads() == 1)
        await rig.loop.advanceTime(by: .milliseconds(200))
        #expect(try await rig.reads() == 2)
        #expect(rig.gate.counts.accepting == 0 && rig.gate.counts.handshakes == 0)
        withExtendedLifetime(connection) {}
        _ = try? await rig.listener.finish(acceptAlreadyClosed: true)
    }
}
