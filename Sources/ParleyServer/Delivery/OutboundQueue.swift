import NIOConcurrencyHelpers
import NIOCore
import ParleyProtocol

/// The bounded queue of frames waiting to be written to one WebSocket.
///
/// Many producers (the fan-out hub, the connection's own replies, typing and presence) push from any thread without
/// waiting. The connection's writer takes everything queued at once on its event loop, so frames that pile up
/// between two turns of the loop go out in one flush (one `writev`). A push reports whether the writer must be woken:
/// only the first push after a drain does, so a burst of frames costs one wake-up.
///
/// Past `limitBytes` the queue drops what it holds, stops accepting frames and asks the writer to close the connection
/// with 4008 (`ERR_SLOW_CONSUMER`): a client that does not read never costs the server unbounded memory.
final class OutboundQueue: Sendable {
    /// What the writer should do next.
    enum Next: Sendable {
        /// Write these frames, in order.
        case frames([ByteBuffer])
        /// Close the connection with this code and reason, without writing what is left.
        case close(code: UInt16, reason: ErrorCode)
        /// Nothing to do (or the queue is held, or finished).
        case idle
    }

    /// The result of a push.
    enum Push: Equatable, Sendable {
        /// Queued; the writer is already due to run.
        case queued
        /// Queued; wake the writer.
        case queuedWake
        /// Not queued: the connection is closing or gone. `wake` when this push made it close (overflow).
        case refused(wake: Bool)

        var accepted: Bool {
            switch self {
            case .queued, .queuedWake: true
            case .refused: false
            }
        }

        var wakesWriter: Bool {
            switch self {
            case .queuedWake, .refused(wake: true): true
            case .queued, .refused(wake: false): false
            }
        }
    }

    private struct State {
        var frames: [ByteBuffer] = []
        var bytes = 0
        var close: (code: UInt16, reason: ErrorCode)?
        /// The close waits until the frames queued before it are written.
        var closeAfterFrames = false
        var closeTaken = false
        var finished = false
        /// While held, frames wait without waking the writer (a new connection catching up).
        var held: Bool
        /// The writer was woken (or is blocked on a full socket) and will take what is queued: no new wake-up.
        var wakePending = false
        /// The writer is blocked on a full socket: it calls again when the socket is writable, which a client that
        /// never reads again never makes it.
        var waitingForSocket = false

        /// Marks a wake-up due unless one already is; returns whether the caller must wake the writer.
        mutating func wake() -> Bool {
            guard !held, !wakePending, !finished else { return false }
            wakePending = true
            return true
        }

        /// A wake-up for a close: also when the writer waits for a full socket, since a close is written whether the
        /// socket has room or not (the close is then bounded by the writer's close timeout, not by the client).
        mutating func wakeToClose() -> Bool {
            guard !held, !finished, !wakePending || waitingForSocket else { return false }
            wakePending = true
            waitingForSocket = false
            return true
        }
    }

    let limitBytes: Int
    private let state: NIOLockedValueBox<State>

    /// - Parameter held: start held (see ``release()``).
    init(limitBytes: Int, held: Bool = false) {
        self.limitBytes = limitBytes
        self.state = NIOLockedValueBox(State(held: held))
    }

    /// Bytes of frames waiting now (never more than `limitBytes`).
    var queuedBytes: Int { state.withLockedValue { $0.bytes } }

    /// Queues a frame.
    func push(_ frame: ByteBuffer) -> Push {
        state.withLockedValue { state in
            guard !state.finished, state.close == nil else { return .refused(wake: false) }
            if state.bytes + frame.readableBytes > limitBytes {
                state.close = (WebSocketCloseCode.slowConsumer, .slowConsumer)
                state.frames = []
                state.bytes = 0
                // A held queue is released by its writer, which then finds the close.
                return .refused(wake: state.wakeToClose())
            }
            state.frames.append(frame)
            state.bytes += frame.readableBytes
            return state.wake() ? .queuedWake : .queued
        }
    }

    /// Asks the writer to close the connection; frames still queued are dropped, unless `afterQueued`: then they are
    /// written first (the answers to the frames that led to the close). Either way nothing more is queued. The first
    /// request wins. Returns whether the writer must be woken.
    func requestClose(code: UInt16, reason: ErrorCode, afterQueued: Bool = false) -> Bool {
        state.withLockedValue { state in
            guard state.close == nil, !state.finished else { return false }
            state.close = (code, reason)
            state.closeAfterFrames = afterQueued
            if !afterQueued {
                state.frames = []
                state.bytes = 0
                return state.wakeToClose()
            }
            return state.wake()
        }
    }

    /// Ends holding: what was queued meanwhile may be written. Returns whether the writer must be woken.
    func release() -> Bool {
        state.withLockedValue { state in
            state.held = false
            guard !state.frames.isEmpty || state.close != nil else { return false }
            return state.wake()
        }
    }

    /// Ends the queue for good: frames are refused and dropped.
    func finish() {
        state.withLockedValue { state in
            state.finished = true
            state.frames = []
            state.bytes = 0
        }
    }

    /// Takes what the writer must do now. With `blocked` (the socket is full) frames stay queued, and no wake-up is
    /// asked for until the writer calls again: it does once the socket is writable.
    func take(blocked: Bool = false) -> Next {
        state.withLockedValue { state in
            if state.finished || state.held { return .idle }
            if let close = state.close, !(state.closeAfterFrames && !state.frames.isEmpty) {
                guard !state.closeTaken else { return .idle }
                state.closeTaken = true
                return .close(code: close.code, reason: close.reason)
            }
            if blocked || state.frames.isEmpty {
                state.wakePending = blocked && !state.frames.isEmpty
                state.waitingForSocket = state.wakePending
                return .idle
            }
            state.wakePending = false
            state.waitingForSocket = false
            defer {
                state.frames.removeAll(keepingCapacity: state.frames.count <= 64)
                state.bytes = 0
            }
            return .frames(state.frames)
        }
    }

    /// Puts back, in front, frames the writer took but could not write yet (the socket filled up). They count against
    /// the limit again (past it, the connection closes as a slow consumer); the writer asks for them when the socket
    /// is writable.
    func putBack(_ frames: ArraySlice<ByteBuffer>) {
        guard !frames.isEmpty else { return }
        state.withLockedValue { state in
            guard !state.finished, state.close == nil || state.closeAfterFrames else { return }
            state.frames.insert(contentsOf: frames, at: 0)
            state.bytes += frames.reduce(0) { $0 + $1.readableBytes }
            if state.bytes > limitBytes, !state.closeAfterFrames {
                state.close = (WebSocketCloseCode.slowConsumer, .slowConsumer)
                state.frames = []
                state.bytes = 0
            }
            state.wakePending = true
        }
    }
}
