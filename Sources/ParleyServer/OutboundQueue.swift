import NIOConcurrencyHelpers
import NIOCore
import ParleyProtocol

/// The bounded queue of frames waiting to be written to one WebSocket.
///
/// Many producers (the fan-out hub, the connection's own replies) push without waiting; one writer task takes
/// everything queued at once, so frames that pile up are written together. Past `limitBytes` the queue stops
/// accepting frames and tells the writer to close the connection with 4008 (`ERR_SLOW_CONSUMER`): a client that
/// does not read never costs the server unbounded memory.
final class OutboundQueue: Sendable {
    /// What the writer should do next.
    enum Next: Sendable {
        /// Write these frames, in order.
        case frames([ByteBuffer])
        /// Close the connection with this code and reason, without writing what is left.
        case close(code: UInt16, reason: ErrorCode)
        /// The connection is gone; stop.
        case finished
    }

    private struct State {
        var frames: [ByteBuffer] = []
        var bytes = 0
        var close: (code: UInt16, reason: ErrorCode)?
        var finished = false
        var waiter: CheckedContinuation<Next, Never>?

        /// What a writer gets now, or nil when it must wait.
        mutating func take() -> Next? {
            if finished { return .finished }
            if let close { return .close(code: close.code, reason: close.reason) }
            guard !frames.isEmpty else { return nil }
            defer {
                frames.removeAll(keepingCapacity: frames.count <= 64)
                bytes = 0
            }
            return .frames(frames)
        }
    }

    let limitBytes: Int
    private let state = NIOLockedValueBox(State())

    init(limitBytes: Int) {
        self.limitBytes = limitBytes
    }

    /// Bytes of frames waiting now (never more than `limitBytes`).
    var queuedBytes: Int { state.withLockedValue { $0.bytes } }

    /// Queues a frame. Returns false when the connection is closing (or now overflowed and will close).
    @discardableResult
    func push(_ frame: ByteBuffer) -> Bool {
        let (accepted, wake) = state.withLockedValue { state -> (Bool, (CheckedContinuation<Next, Never>, Next)?) in
            guard !state.finished, state.close == nil else { return (false, nil) }
            if state.bytes + frame.readableBytes > limitBytes {
                state.close = (WebSocketCloseCode.slowConsumer, .slowConsumer)
                state.frames = []
                state.bytes = 0
            } else {
                state.frames.append(frame)
                state.bytes += frame.readableBytes
            }
            guard let waiter = state.waiter, let next = state.take() else { return (state.close == nil, nil) }
            state.waiter = nil
            return (state.close == nil, (waiter, next))
        }
        if let (waiter, next) = wake { waiter.resume(returning: next) }
        return accepted
    }

    /// Asks the writer to close the connection; frames still queued are dropped. The first request wins.
    func requestClose(code: UInt16, reason: ErrorCode) {
        resumeWaiter { state in
            if state.close == nil && !state.finished { state.close = (code, reason) }
        }
    }

    /// Ends the queue: the writer gets `.finished`.
    func finish() {
        resumeWaiter { state in state.finished = true }
    }

    /// The next thing to do, waiting until there is one.
    func next() async -> Next {
        if let ready = state.withLockedValue({ $0.take() }) { return ready }
        return await withCheckedContinuation { continuation in
            let ready = state.withLockedValue { state -> Next? in
                if let next = state.take() { return next }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    private func resumeWaiter(_ change: (inout State) -> Void) {
        let wake = state.withLockedValue { state -> (CheckedContinuation<Next, Never>, Next)? in
            change(&state)
            guard let waiter = state.waiter, let next = state.take() else { return nil }
            state.waiter = nil
            return (waiter, next)
        }
        if let (waiter, next) = wake { waiter.resume(returning: next) }
    }
}
