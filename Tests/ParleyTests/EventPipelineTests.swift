import Foundation
import Logging
import NIOConcurrencyHelpers
import ParleyTesting
import Testing

@testable import Parley

/// The SDK's event pipeline fed frames directly: order, duplicates, gaps filled over a stand-in backfill, and
/// what it does when a gap cannot be filled.
@Suite struct EventPipelineTests {
    final class Harness: Sendable {
        let pipeline: EventPipeline
        let published: AsyncStream<Event>
        let backfills = NIOLockedValueBox<[(String, Int64, Int64)]>([])
        let reconnects = NIOLockedValueBox(0)
        let directory: TemporaryDirectory
        private let task: Task<Void, Never>

        init(serverEvents: [Event] = [], failing: Bool = false) throws {
            let directory = try TemporaryDirectory(prefix: "parley-pipeline")
            self.directory = directory
            let (published, sink) = AsyncStream.makeStream(of: Event.self)
            self.published = published
            let backfills = self.backfills
            let reconnects = self.reconnects
            let pipeline = EventPipeline(
                appId: "app", store: CursorStore(directory: URL(fileURLWithPath: directory.path), appId: "app"),
                backfill: { conversationId, after, through in
                    backfills.withLockedValue { $0.append((conversationId, after, through)) }
                    if failing { throw ParleyError(.serverUnreachable, "down") }
                    return serverEvents.filter {
                        $0.conversationId == conversationId && $0.seq! > after && $0.seq! <= through
                    }
                },
                publish: { sink.yield($0) },
                reconnect: { reconnects.withLockedValue { $0 += 1 } },
                logger: Logger(label: "test")
            )
            self.pipeline = pipeline
            pipeline.begin(uid: "alice")
            task = Task { await pipeline.run() }
        }

        func send(_ frames: ServerFrame...) { for frame in frames { pipeline.receive(frame) } }

        /// The next `count` published events.
        func next(_ count: Int) async -> [Event] {
            var events: [Event] = []
            for await event in published {
                events.append(event)
                if events.count == count { break }
            }
            return events
        }

        deinit { task.cancel() }
    }

    static func message(_ conversationId: String, _ seq: Int64) -> Event {
        let message = Message(
            id: "m\(seq)", conversationId: conversationId, seq: seq, sender: "bob", parts: [.text("\(seq)")], sentAt: 0)
        return Event(
            id: "\(conversationId):\(seq)", appId: "app", name: .messageSent, conversationId: conversationId, seq: seq,
            timestamp: 0, context: EventContext(createdBy: "bob"), payload: .messageSent(message)
        )
    }

    static func frame(_ event: Event) -> ServerFrame { .event(EventFrame(event: event)) }

    @Test func duplicatesAreDroppedAndTheCatchUpIsAnnounced() async throws {
        let harness = try Harness()
        harness.send(
            .caughtUp(CaughtUpFrame(userSeq: 0, conversations: ["c": 2], replayed: 0)),
            Self.frame(Self.message("c", 2)), Self.frame(Self.message("c", 3)), Self.frame(Self.message("c", 3)),
            Self.frame(Self.message("c", 4))
        )
        let events = await harness.next(3)
        #expect(events.map(\.name) == [.caughtUp, .messageSent, .messageSent])
        #expect(events.compactMap(\.seq) == [3, 4])
        #expect(harness.pipeline.positions?.conversations == ["c": 4])
        // Saved: a new pipeline over the same folder resumes from there.
        #expect(
            CursorStore(directory: URL(fileURLWithPath: harness.directory.path), appId: "app").load(uid: "alice")?
                .conversations == ["c": 4])
    }

    @Test func aGapIsFilledFromTheServerBeforeTheEventAfterIt() async throws {
        let stored = (1...9).map { Self.message("c", Int64($0)) }
        let harness = try Harness(serverEvents: stored)
        harness.send(
            .caughtUp(CaughtUpFrame(userSeq: 0, conversations: ["c": 3])), Self.frame(Self.message("c", 7)),
            Self.frame(Self.message("c", 8))
        )
        let events = await harness.next(6)
        #expect(events.dropFirst().compactMap(\.seq) == [4, 5, 6, 7, 8])
        #expect(harness.backfills.withLockedValue { $0.map { "\($0.0) \($0.1) \($0.2)" } } == ["c 3 6"])
    }

    @Test func aGapTheServerCannotFillIsAnnouncedAsAResync() async throws {
        let harness = try Harness(serverEvents: [Self.message("c", 6)])  // 4 and 5 are gone
        harness.send(.caughtUp(CaughtUpFrame(userSeq: 0, conversations: ["c": 3])), Self.frame(Self.message("c", 7)))
        let events = await harness.next(3)
        #expect(events.map(\.name) == [.caughtUp, .resyncRequired, .messageSent])
        guard case .resyncRequired(let resync) = events[1].payload else {
            Issue.record("no resync")
            return
        }
        #expect(resync == ResyncFrame(conversationId: "c", reason: .historyTrimmed, lastSeq: 6) && events[2].seq == 7)
    }

    @Test func whenTheBackfillFailsTheEventWaitsForTheResumeOfANewConnection() async throws {
        let harness = try Harness(failing: true)
        harness.send(
            .caughtUp(CaughtUpFrame(userSeq: 0, conversations: ["c": 3])), Self.frame(Self.message("c", 7)),
            // The reconnection's replay:
            Self.frame(Self.message("c", 4)), Self.frame(Self.message("c", 5))
        )
        let events = await harness.next(3)
        #expect(events.dropFirst().compactMap(\.seq) == [4, 5])
        #expect(harness.reconnects.withLockedValue { $0 } == 1)
        #expect(harness.pipeline.resumeRequest?.conversations == ["c": 5])
    }

    @Test func ephemeralEventsPassStraightThrough() async throws {
        let harness = try Harness()
        let typing = Event(
            id: "t", appId: "app", name: .participantTyping, conversationId: "c", timestamp: 0, context: EventContext(),
            payload: .participantTyping(TypingIndicator(uid: "bob"))
        )
        harness.send(Self.frame(typing), Self.frame(typing))
        #expect(await harness.next(2).map(\.name) == [.participantTyping, .participantTyping])
    }
}
