import NIOConcurrencyHelpers

/// A bounded queue of messages that any number of subscriptions deliver into, in the order they arrived on the
/// socket. Made by ``NATSConnection/makeInbox(maxMessages:maxBytes:)``.
///
/// One consumer reads it, message by message (`for await message in inbox`) or in batches
/// (``nextBatch()``). When it is over a limit, new messages are dropped and counted (``droppedMessages``), and the
/// connection reports `.slowConsumer` once per overflow episode, which ends when the consumer has emptied it.
/// ```swift
/// let inbox = connection.makeInbox()
/// _ = try connection.subscribe(to: "room.*", into: inbox)
/// while let batch = await inbox.nextBatch() {
///     for message in batch { handle(message) }
/// }
/// ```
public final class NATSInbox: AsyncSequence, Sendable {
    /// The messages.
    public typealias Element = NATSMessage
    /// Reading never fails.
    public typealias Failure = Never

    /// An id for logs and `.slowConsumer` events.
    public let id: UInt64
    /// The most messages queued at once.
    public let maxMessages: Int
    /// The most bytes (payload, subject, reply subject) queued at once.
    public let maxBytes: Int

    /// Reports drops to the connection: (inbox id, newly dropped, total dropped, starts an overflow episode).
    typealias DropReporter = @Sendable (_ inbox: UInt64, _ newlyDropped: Int, _ total: Int, _ newEpisode: Bool) -> Void

    private struct State {
        var queue: [NATSMessage] = []
        var queuedBytes = 0
        var activeSIDs: Set<UInt64> = []
        var waiter: CheckedContinuation<[NATSMessage]?, Never>?
        var finished = false
        var dropped = 0
        var overflowing = false
    }

    private let state = NIOLockedValueBox(State())
    private let reportDrops: DropReporter

    init(id: UInt64, maxMessages: Int, maxBytes: Int, reportDrops: @escaping DropReporter) {
        self.id = id
        self.maxMessages = Swift.max(1, maxMessages)
        self.maxBytes = Swift.max(1, maxBytes)
        self.reportDrops = reportDrops
    }

    /// Messages dropped because the inbox was over a limit (slow consumer).
    public var droppedMessages: Int {
        self.state.withLockedValue { $0.dropped }
    }

    /// The number of messages queued now.
    public var count: Int {
        self.state.withLockedValue { $0.queue.count }
    }

    /// Everything queued now, or waits for at least one message.
    /// - Returns: The messages in arrival order; `nil` once the inbox is finished (the connection closed for good,
    ///   or ``finish()``) and empty, or when the calling task is cancelled.
    public func nextBatch() async -> [NATSMessage]? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<[NATSMessage]?, Never>) in
                let batch: [NATSMessage]?? = self.state.withLockedValue { state in
                    if !state.queue.isEmpty {
                        return .some(Self.takeAll(&state))
                    }
                    if state.finished || Task.isCancelled {
                        return .some(nil)
                    }
                    precondition(state.waiter == nil, "NATSInbox has one consumer; nextBatch() called concurrently")
                    state.waiter = continuation
                    return .none
                }
                if let batch {
                    continuation.resume(returning: batch)
                }
            }
        } onCancel: {
            let waiter = self.state.withLockedValue { state in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
        }
    }

    /// Ends the inbox: the consumer gets what is queued, then `nil`; later messages are dropped silently.
    /// Finishing does not unsubscribe.
    public func finish() {
        let waiter = self.state.withLockedValue { state in
            state.finished = true
            defer { state.waiter = nil }
            return state.queue.isEmpty ? state.waiter : nil
        }
        waiter?.resume(returning: nil)
    }

    /// An iterator that takes messages in batches from the inbox.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let inbox: NATSInbox
        var batch: [NATSMessage] = []
        var index = 0

        /// The next message, or `nil` when the inbox is finished.
        public mutating func next() async -> NATSMessage? {
            if self.index >= self.batch.count {
                guard let batch = await self.inbox.nextBatch() else { return nil }
                self.batch = batch
                self.index = 0
            }
            defer { self.index += 1 }
            return self.batch[self.index]
        }
    }

    /// Makes the (single) consumer's iterator.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(inbox: self)
    }

    // MARK: - Connection side

    /// Accepts messages of this subscription from now on.
    func activate(sid: UInt64) {
        self.state.withLockedValue { _ = $0.activeSIDs.insert(sid) }
    }

    /// Drops messages of this subscription from now on.
    func deactivate(sid: UInt64) {
        self.state.withLockedValue { _ = $0.activeSIDs.remove(sid) }
    }

    /// Queues messages in order; drops those of inactive subscriptions silently, and those over the limits with a
    /// count and a report.
    func deliver(_ messages: some Sequence<NATSMessage>) {
        var newlyDropped = 0
        var newEpisode = false
        var totalDropped = 0
        let (waiter, batch): (CheckedContinuation<[NATSMessage]?, Never>?, [NATSMessage]) =
            self.state.withLockedValue { state in
                guard !state.finished else { return (nil, []) }
                for message in messages where state.activeSIDs.contains(message.sid) {
                    let size = message.accountedBytes
                    if state.queue.count >= self.maxMessages || state.queuedBytes + size > self.maxBytes {
                        newlyDropped += 1
                        if !state.overflowing {
                            state.overflowing = true
                            newEpisode = true
                        }
                        continue
                    }
                    state.queue.append(message)
                    state.queuedBytes += size
                }
                state.dropped += newlyDropped
                totalDropped = state.dropped
                guard let waiter = state.waiter, !state.queue.isEmpty else { return (nil, []) }
                state.waiter = nil
                return (waiter, Self.takeAll(&state))
            }
        waiter?.resume(returning: batch)
        if newlyDropped > 0 {
            self.reportDrops(self.id, newlyDropped, totalDropped, newEpisode)
        }
    }

    private static func takeAll(_ state: inout State) -> [NATSMessage] {
        var batch: [NATSMessage] = []
        swap(&batch, &state.queue)
        state.queuedBytes = 0
        state.overflowing = false
        return batch
    }
}
