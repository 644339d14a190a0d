import NIOCore
import ParleyProtocol
import Testing

@testable import ParleyServer

/// The bound of one connection's outbound queue (docs/PROTOCOL.md, Limits): frames past `limitBytes` are not kept;
/// the writer is told to close with 4008 `ERR_SLOW_CONSUMER`.
@Suite struct OutboundQueueTests {
    @Test func framesPastTheLimitAreDroppedAndTheWriterIsToldToCloseWith4008() async {
        let queue = OutboundQueue(limitBytes: 1000)
        let frame = ByteBuffer(repeating: UInt8(ascii: "x"), count: 300)
        var accepted = 0
        for _ in 0..<10 {
            if queue.push(frame) { accepted += 1 }
            #expect(queue.queuedBytes <= 1000)
        }
        #expect(accepted == 3)
        // What was queued is dropped as well: a slow consumer keeps nothing.
        #expect(queue.queuedBytes == 0)
        guard case .close(let code, let reason) = await queue.next() else {
            Issue.record("the writer was not told to close")
            return
        }
        #expect(code == WebSocketCloseCode.slowConsumer && reason == .slowConsumer)
    }

    @Test func aReaderThatKeepsUpNeverReachesTheLimit() async {
        let queue = OutboundQueue(limitBytes: 1000)
        let frame = ByteBuffer(repeating: UInt8(ascii: "x"), count: 300)
        for _ in 0..<100 {
            #expect(queue.push(frame))
            #expect(queue.push(frame))
            guard case .frames(let frames) = await queue.next() else {
                Issue.record("expected frames")
                return
            }
            #expect(frames.count == 2)
        }
    }
}
