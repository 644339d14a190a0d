import NIOConcurrencyHelpers
import NIOCore
import ParleyTesting
import Testing

@testable import NATSNIO

@Suite("NATSInbox")
struct NATSInboxTests {
    struct Drop: Equatable, Sendable {
        var newlyDropped: Int
        var total: Int
        var newEpisode: Bool
    }

    static func makeInbox(maxMessages: Int = 10, maxBytes: Int = 1 << 20) -> (NATSInbox, NIOLockedValueBox<[Drop]>) {
        let drops = NIOLockedValueBox<[Drop]>([])
        let inbox = NATSInbox(id: 1, maxMessages: maxMessages, maxBytes: maxBytes) { _, new, total, episode in
            drops.withLockedValue { $0.append(Drop(newlyDropped: new, total: total, newEpisode: episode)) }
        }
        inbox.activate(sid: 1)
        return (inbox, drops)
    }

    static func messages(_ range: Range<Int>, sid: UInt64 = 1) -> [NATSMessage] {
        range.map { NATSMessage(subject: "s", sid: sid, payload: ByteBuffer(string: "\($0)")) }
    }

    @Test func deliversInOrderInOneBatch() async {
        let (inbox, _) = Self.makeInbox()
        inbox.deliver(Self.messages(0..<3))
        inbox.deliver(Self.messages(3..<5))
        let batch = await inbox.nextBatch()
        #expect(batch?.map { String(buffer: $0.payload) } == ["0", "1", "2", "3", "4"])
        #expect(inbox.count == 0)
    }

    @Test func keepsTheFirstMessagesAndCountsTheDroppedOnesOncePerEpisode() async {
        let (inbox, drops) = Self.makeInbox(maxMessages: 10)
        for start in stride(from: 0, to: 100, by: 7) {
            inbox.deliver(Self.messages(start..<min(start + 7, 100)))
        }
        #expect(inbox.droppedMessages == 90)
        #expect(drops.withLockedValue { $0.filter(\.newEpisode).count } == 1)
        #expect(drops.withLockedValue { $0.map(\.newlyDropped).reduce(0, +) } == 90)
        let batch = await inbox.nextBatch()
        #expect(batch?.map { String(buffer: $0.payload) } == (0..<10).map { "\($0)" })
        // Drained: a new overflow is a new episode.
        inbox.deliver(Self.messages(0..<11))
        #expect(drops.withLockedValue { $0.filter(\.newEpisode).count } == 2)
        #expect(inbox.droppedMessages == 91)
    }

    @Test func theByteLimitAlsoBounds() async {
        let (inbox, _) = Self.makeInbox(maxMessages: 1000, maxBytes: 100)
        let big = NATSMessage(subject: "s", sid: 1, payload: ByteBuffer(repeating: 0, count: 60))
        inbox.deliver([big, big, big])
        #expect(inbox.count == 1)
        #expect(inbox.droppedMessages == 2)
    }

    @Test func messagesOfInactiveSubscriptionsAreDroppedSilently() async {
        let (inbox, drops) = Self.makeInbox()
        inbox.deliver(Self.messages(0..<2, sid: 2))
        inbox.deactivate(sid: 1)
        inbox.deliver(Self.messages(0..<2, sid: 1))
        #expect(inbox.count == 0)
        #expect(inbox.droppedMessages == 0)
        #expect(drops.withLockedValue { $0.isEmpty })
    }

    @Test func aConsumerGetsADeliveryWhetherItWaitsAlreadyOrNot() async {
        let (inbox, _) = Self.makeInbox()
        let consumer = Task { await inbox.nextBatch() }
        inbox.deliver(Self.messages(0..<1))
        #expect(await consumer.value?.count == 1)
    }

    @Test func finishEndsTheConsumerAfterWhatIsQueued() async {
        let (inbox, _) = Self.makeInbox()
        inbox.deliver(Self.messages(0..<2))
        inbox.finish()
        inbox.deliver(Self.messages(2..<3))
        #expect(await inbox.nextBatch()?.count == 2)
        #expect(await inbox.nextBatch() == nil)
        var iterator = inbox.makeAsyncIterator()
        #expect(await iterator.next() == nil)
    }

    @Test func finishWakesAWaitingConsumer() async throws {
        let (inbox, _) = Self.makeInbox()
        let ended = Collector<Bool>()
        Task {
            let batch = await inbox.nextBatch()
            ended.append([batch == nil])
        }
        inbox.finish()
        try await ended.wait(for: "the consumer to end", until: { !$0.isEmpty })
        #expect(ended.items == [true])
    }

    @Test func cancellingTheConsumerReturnsNil() async throws {
        let (inbox, _) = Self.makeInbox()
        let task = Task { await inbox.nextBatch() }
        task.cancel()
        #expect(await task.value == nil)
        // The inbox still works for the next consumer.
        inbox.deliver(Self.messages(0..<1))
        #expect(await inbox.nextBatch()?.count == 1)
    }

    @Test func iteratesMessageByMessage() async {
        let (inbox, _) = Self.makeInbox()
        inbox.deliver(Self.messages(0..<4))
        inbox.finish()
        var seen: [String] = []
        for await message in inbox {
            seen.append(String(buffer: message.payload))
        }
        #expect(seen == ["0", "1", "2", "3"])
    }
}
