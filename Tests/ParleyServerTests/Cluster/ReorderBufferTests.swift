import ParleyProtocol
import ParleyStore
import Testing

@testable import ParleyServer

/// Events after a gap wait for the missing ones; what fills the gap releases them, in order, each once.
@Suite struct ReorderBufferTests {
    let room = ConversationRef(appId: "a", conversationId: "room")
    let other = ConversationRef(appId: "a", conversationId: "other")

    func events(_ seqs: Int64...) -> [RoutedEvent] {
        seqs.map { seq in
            let event = Event(
                id: "room:\(seq)", appId: "a", name: .reactionAdded, conversationId: "room", seq: seq, timestamp: 0,
                context: EventContext(createdBy: "alice"),
                payload: .reactionAdded(
                    MessageReaction(messageId: "m", messageSeq: 1, key: "+1", uid: "alice", count: Int(seq))))
            return RoutedEvent(stored: StoredEvent(event: event, json: []), recipients: ["bob"])
        }
    }

    func seqs(_ events: [RoutedEvent]) -> [Int64] { events.map { $0.facts.seq ?? 0 } }

    @Test func eventsThatFollowArePublishedAtOnceAndOldOnesDropped() {
        var buffer = ReorderBuffer()
        let (ready, gap) = buffer.take(room, after: 4, adding: events(3, 4, 5, 6))
        #expect(seqs(ready) == [5, 6] && gap == nil && buffer.held.isEmpty)
    }

    @Test func eventsAfterAGapWaitUntilItIsFilled() {
        var buffer = ReorderBuffer()
        // This node's own commit (7, 8) before another node's (5, 6) arrived.
        let held = buffer.take(room, after: 4, adding: events(7, 8))
        #expect(held.ready.isEmpty && held.gapBefore == 7 && seqs(buffer.held[room] ?? []) == [7, 8])
        // Another conversation is not held up.
        #expect(seqs(buffer.take(other, after: 0, adding: events(1)).ready) == [1])
        // Half the gap: 5 goes, 7 and 8 still wait for 6.
        let half = buffer.take(room, after: 4, adding: events(5))
        #expect(seqs(half.ready) == [5] && half.gapBefore == 7)
        // The rest, with a repeat of one held: everything in order, each once.
        let filled = buffer.take(room, after: 5, adding: events(6, 8))
        #expect(seqs(filled.ready) == [6, 7, 8] && filled.gapBefore == nil && buffer.held[room] == nil)
    }

    @Test func aGapReadFromTheDatabaseReleasesWhatWaitsAndAnInnerGapWaitsAgain() {
        var buffer = ReorderBuffer()
        // Out of order: held in order, the gap before the first.
        let first = buffer.take(room, after: 2, adding: events(9, 5, 6))
        #expect(first.ready.isEmpty && first.gapBefore == 5 && seqs(buffer.held[room] ?? []) == [5, 6, 9])
        // The publisher read 3 and 4 from the database: published up to 4 now.
        let next = buffer.take(room, after: 4, adding: [])
        #expect(seqs(next.ready) == [5, 6] && next.gapBefore == 9 && seqs(buffer.held[room] ?? []) == [9])
        // A gap that could not be read: everything that waits is taken, to be published past it.
        #expect(seqs(buffer.takeAll(room)) == [9] && buffer.held.isEmpty)
    }
}
