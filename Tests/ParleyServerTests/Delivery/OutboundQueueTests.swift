import NIOCore
import ParleyProtocol
import Testing

@testable import ParleyServer

/// The bound of one connection's outbound queue (docs/PROTOCOL.md, Limits): frames past `limitBytes` are not kept;
/// the writer is told to close with 4008 `ERR_SLOW_CONSUMER`. And its wake-ups: one per burst, none while held or
/// while the socket is full.
@Suite struct OutboundQueueTests {
    let frame = ByteBuffer(repeating: UInt8(ascii: "x"), count: 300)

    @Test func framesPastTheLimitAreDroppedAndTheWriterIsToldToCloseWith4008() {
        let queue = OutboundQueue(limitBytes: 1000)
        var accepted = 0
        var pushes: [OutboundQueue.Push] = []
        for _ in 0..<10 {
            let push = queue.push(frame)
            pushes.append(push)
            if push.accepted { accepted += 1 }
            #expect(queue.queuedBytes <= 1000)
        }
        #expect(accepted == 3)
        // The first push wakes the writer; the overflow finds it already due; later pushes are refused quietly.
        #expect(pushes == [.queuedWake, .queued, .queued] + [.refused(wake: false)] * 7)
        // What was queued is dropped as well: a slow consumer keeps nothing.
        #expect(queue.queuedBytes == 0)
        guard case .close(let code, let reason) = queue.take() else {
            Issue.record("the writer was not told to close")
            return
        }
        #expect(code == WebSocketCloseCode.slowConsumer && reason == .slowConsumer)
        // The close is handed out once.
        guard case .idle = queue.take() else {
            Issue.record("close handed out twice")
            return
        }
    }

    @Test func aReaderThatKeepsUpNeverReachesTheLimitAndIsWokenOncePerBurst() {
        let queue = OutboundQueue(limitBytes: 1000)
        for _ in 0..<100 {
            #expect(queue.push(frame) == .queuedWake)
            #expect(queue.push(frame) == .queued)
            guard case .frames(let frames) = queue.take() else {
                Issue.record("expected frames")
                return
            }
            #expect(frames.count == 2)
            guard case .idle = queue.take() else {
                Issue.record("expected nothing more")
                return
            }
        }
    }

    @Test func aHeldQueueKeepsItsFramesUntilReleased() {
        let queue = OutboundQueue(limitBytes: 1000, held: true)
        #expect(queue.push(frame) == .queued)
        guard case .idle = queue.take() else {
            Issue.record("a held queue gave frames")
            return
        }
        #expect(queue.release())
        guard case .frames(let frames) = queue.take(), frames.count == 1 else {
            Issue.record("expected the frame")
            return
        }
        #expect(!OutboundQueue(limitBytes: 1000, held: true).release())
    }

    /// A writer waiting for a full socket is woken by a close all the same: a client that never reads again never
    /// makes the socket writable, and the close does not need room (the close timeout ends it).
    @Test func aCloseWakesAWriterThatWaitsForAFullSocket() {
        let queue = OutboundQueue(limitBytes: 1000)
        #expect(queue.push(frame) == .queuedWake)
        guard case .idle = queue.take(blocked: true) else {
            Issue.record("frames taken while blocked")
            return
        }
        // Past the limit while blocked: the push wakes the writer, which takes the close without waiting for room.
        #expect(queue.push(ByteBuffer(repeating: 0, count: 900)) == .refused(wake: true))
        guard case .close(let code, _) = queue.take(blocked: true) else {
            Issue.record("expected the close while blocked")
            return
        }
        #expect(code == WebSocketCloseCode.slowConsumer)

        // A close the server asks for (a token expired) while blocked wakes it too; one already due does not again.
        let other = OutboundQueue(limitBytes: 1000)
        _ = other.push(frame)
        _ = other.take(blocked: true)
        #expect(other.requestClose(code: 4001, reason: .authTokenInvalid))
        #expect(!other.requestClose(code: 4000, reason: .internalError))
        guard case .close(let closeCode, _) = other.take(blocked: true) else {
            Issue.record("expected the requested close while blocked")
            return
        }
        #expect(closeCode == 4001)
    }

    @Test func aFullSocketKeepsFramesQueuedWithoutWakingTheWriterAgain() {
        let queue = OutboundQueue(limitBytes: 1000)
        #expect(queue.push(frame) == .queuedWake)
        guard case .idle = queue.take(blocked: true) else {
            Issue.record("frames taken while blocked")
            return
        }
        // The writer comes back on its own when the socket is writable: no wake-up meanwhile.
        #expect(queue.push(frame) == .queued)
        guard case .frames(let frames) = queue.take(), frames.count == 2 else {
            Issue.record("expected 2 frames")
            return
        }
        // Frames the socket did not take go back in front, and count against the limit.
        queue.putBack(frames[1...])
        #expect(queue.queuedBytes == 300)
        #expect(queue.push(frame) == .queued)
        guard case .frames(let again) = queue.take(), again.count == 2 else {
            Issue.record("expected 2 frames")
            return
        }
        queue.putBack(again[...])
        #expect(queue.push(frame) == .queued)
        queue.putBack([frame, frame][...])
        guard case .close(let code, _) = queue.take() else {
            Issue.record("expected a close past the limit")
            return
        }
        #expect(code == WebSocketCloseCode.slowConsumer)
    }

    @Test func aCloseRequestDropsWhatIsQueuedAndTheFirstOneWins() {
        let queue = OutboundQueue(limitBytes: 1000)
        _ = queue.push(frame)
        #expect(queue.requestClose(code: 4001, reason: .authTokenInvalid) == false)  // a wake-up is already due
        #expect(queue.requestClose(code: 1001, reason: .serverShuttingDown) == false)
        #expect(queue.push(frame) == .refused(wake: false))
        guard case .close(let code, let reason) = queue.take() else {
            Issue.record("expected a close")
            return
        }
        #expect(code == 4001 && reason == .authTokenInvalid)
    }
}

extension Array {
    fileprivate static func * (element: [Element], count: Int) -> [Element] {
        Array((0..<count).flatMap { _ in element })
    }
}
