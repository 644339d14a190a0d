import Logging
import NIOCore
import NIOEmbedded
import Testing

@testable import ParleyServer

/// Connections being set up at once are capped (ServerConfiguration.maxConnectionsInSetup): at the cap the listening
/// socket is not read (nothing more is accepted) until one of them is live, serving, or closed.
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

    @Test func atTheCapNothingMoreIsAcceptedUntilAConnectionIsAdmittedOrCloses() async throws {
        let loop = NIOAsyncTestingEventLoop()
        let listener = NIOAsyncTestingChannel(loop: loop)
        let gate = AdmissionGate(limit: 2, timeout: .seconds(1))
        try await gate.install(on: listener, logger: Logger(label: "test"))
        let counter = ReadCounter()
        try await listener.pipeline.addHandler(counter, position: .first).get()
        func reads() async throws -> Int { try await loop.submit { counter.reads }.get() }

        let first = NIOAsyncTestingChannel(loop: loop)
        let second = NIOAsyncTestingChannel(loop: loop)
        try await listener.writeInbound(first as any Channel)
        listener.read()
        #expect(try await reads() == 1)
        try await listener.writeInbound(second as any Channel)
        listener.read()
        listener.read()
        // Two connections being set up: the cap.
        #expect(try await reads() == 1)

        // The first goes live: one withheld read goes through.
        gate.admitted(first)
        await loop.run()
        #expect(try await reads() == 2)
        // Saying it twice changes nothing.
        gate.admitted(first)
        await loop.run()
        let third = NIOAsyncTestingChannel(loop: loop)
        try await listener.writeInbound(third as any Channel)
        listener.read()
        #expect(try await reads() == 2)

        // A connection that closes during its setup stops counting too.
        try await second.close()
        await loop.run()
        #expect(try await reads() == 3)

        // Connections that say nothing cannot hold the gate shut: after the timeout they no longer count.
        let fourth = NIOAsyncTestingChannel(loop: loop)
        try await listener.writeInbound(fourth as any Channel)
        listener.read()
        #expect(try await reads() == 3)
        await loop.advanceTime(by: .milliseconds(999))
        #expect(try await reads() == 3)
        await loop.advanceTime(by: .milliseconds(1))
        #expect(try await reads() == 4)
        _ = try? await listener.finish(acceptAlreadyClosed: true)
    }
}
