import ParleyProtocol
import Testing

@testable import Parley

/// ``MessageTimeline``, the fold behind ``MessageList``, fed pages and events directly: an event already in a page
/// is not counted twice, one that is news is applied once, and a thread follows only its own replies.
@Suite struct MessageTimelineTests {
    /// A timeline a test changes inside `#expect` (which cannot mutate a value it captures).
    final class Fold {
        var timeline: MessageTimeline
        init(viewer: String, thread: String?) { timeline = MessageTimeline(viewer: viewer, thread: thread) }
        var messages: [Message] { timeline.messages }
        var parent: Message? { timeline.parent }
        func load(_ page: MessagePage, older: Bool) { timeline.load(page, older: older) }
        func apply(_ event: Event) -> Bool { timeline.apply(event) }
    }

    static func message(_ seq: Int64, replyTo: String? = nil, reactions: [ReactionSummary]? = nil) -> Message {
        Message(
            id: "m\(seq)", conversationId: "c", seq: seq, sender: "bob", parts: [.text("\(seq)")], sentAt: seq * 1_000,
            replyTo: replyTo, reactions: reactions
        )
    }

    static func event(_ seq: Int64, _ payload: EventPayload, by uid: String = "bob") -> Event {
        Event(
            id: "c:\(seq)", appId: "app", name: payload.eventName!, conversationId: "c", seq: seq,
            timestamp: seq * 1_000,
            context: EventContext(createdBy: uid), payload: payload
        )
    }

    static func reaction(_ seq: Int64, on message: Int64, _ key: String, by uid: String, count: Int, added: Bool = true)
        -> Event
    {
        let reaction = MessageReaction(messageId: "m\(message)", messageSeq: message, key: key, uid: uid, count: count)
        return event(seq, added ? .reactionAdded(reaction) : .reactionRemoved(reaction), by: uid)
    }

    @Test func eventsAPageAlreadyIncludesChangeNothing() {
        let timeline = Fold(viewer: "alice", thread: nil)
        // The page was read at seq 5: m1's reaction by alice (seq 4) is in it, as is m3 (seq 3).
        let page = MessagePage(
            messages: [Self.message(1, reactions: [.init(key: "👍", count: 1, reacted: true)]), Self.message(3)],
            lastSeq: 5
        )
        timeline.load(page, older: false)
        let loaded = timeline.messages
        // The events up to seq 5 arrive after the page (a live socket racing the REST read): none counts again.
        #expect(!timeline.apply(Self.event(3, .messageSent(Self.message(3)))))
        #expect(!timeline.apply(Self.reaction(4, on: 1, "👍", by: "alice", count: 1)))
        #expect(!timeline.apply(Self.event(5, .messageUpdated(Self.message(1)))))
        #expect(timeline.messages == loaded)
        // News: bob's reaction (seq 6) makes two; the same event again does nothing.
        #expect(timeline.apply(Self.reaction(6, on: 1, "👍", by: "bob", count: 2)))
        #expect(!timeline.apply(Self.reaction(6, on: 1, "👍", by: "bob", count: 2)))
        #expect(timeline.messages[0].reactions == [.init(key: "👍", count: 2, reacted: true)])
        // alice removes hers: one left, not hers; bob removes his: none.
        #expect(timeline.apply(Self.reaction(7, on: 1, "👍", by: "alice", count: 1, added: false)))
        #expect(timeline.messages[0].reactions == [.init(key: "👍", count: 1, reacted: false)])
        #expect(timeline.apply(Self.reaction(8, on: 1, "👍", by: "bob", count: 0, added: false)))
        #expect(timeline.messages[0].reactions == nil)
    }

    @Test func anEditKeepsReactionsAndRepliesADeletionDropsReactions() {
        let timeline = Fold(viewer: "alice", thread: nil)
        timeline.load(MessagePage(messages: [Self.message(1)], lastSeq: 1), older: false)
        #expect(timeline.apply(Self.reaction(2, on: 1, "🎉", by: "carol", count: 1)))
        #expect(timeline.apply(Self.event(3, .messageSent(Self.message(3, replyTo: "m1")))))
        var edited = Self.message(1)
        edited.parts = [.text("edited")]
        edited.editedAt = 4_000
        #expect(timeline.apply(Self.event(4, .messageUpdated(edited))))
        #expect(timeline.messages[0].text == "edited" && timeline.messages[0].editedAt == 4_000)
        #expect(timeline.messages[0].replyCount == 1 && timeline.messages[0].lastReplyAt == 3_000)
        #expect(timeline.messages[0].reactions?.first?.count == 1)
        // The reply is deleted: its parent counts none; the tombstone stays in place.
        var tombstone = Self.message(3, replyTo: "m1")
        tombstone.parts = []
        tombstone.deletedAt = 5_000
        tombstone.deletedBy = "bob"
        #expect(timeline.apply(Self.event(5, .messageDeleted(tombstone))))
        #expect(timeline.messages.map(\.id) == ["m1", "m3"] && timeline.messages[1].isDeleted)
        #expect(timeline.messages[0].replyCount == nil)
        // The parent is deleted: its reactions go with its content.
        var deletedParent = Self.message(1)
        deletedParent.parts = []
        deletedParent.deletedAt = 6_000
        #expect(timeline.apply(Self.event(6, .messageDeleted(deletedParent))))
        #expect(timeline.messages[0].isDeleted && timeline.messages[0].reactions == nil)
    }

    @Test func anOlderPageAddsOnlyWhatIsNotHeld() {
        let timeline = Fold(viewer: "alice", thread: nil)
        timeline.load(MessagePage(messages: [Self.message(5), Self.message(6)], lastSeq: 6), older: false)
        #expect(timeline.apply(Self.reaction(7, on: 5, "👍", by: "bob", count: 1)))
        // An older page, read later (at seq 7), overlapping on m5: m5 keeps its state, m3 and m4 come before it.
        let older = MessagePage(
            messages: [
                Self.message(3), Self.message(4),
                Self.message(5, reactions: [.init(key: "👍", count: 1, reacted: false)]),
            ],
            lastSeq: 7
        )
        timeline.load(older, older: true)
        #expect(timeline.messages.map(\.seq) == [3, 4, 5, 6])
        #expect(timeline.messages[2].reactions == [.init(key: "👍", count: 1, reacted: false)])
        // A reaction on m3 at seq 7 is in the older page already; one at seq 8 is news.
        #expect(!timeline.apply(Self.reaction(7, on: 3, "👍", by: "bob", count: 1)))
        #expect(timeline.apply(Self.reaction(8, on: 3, "👍", by: "bob", count: 1)))
    }

    @Test func aThreadFollowsItsRepliesAndItsParent() {
        let timeline = Fold(viewer: "alice", thread: "m1")
        var parent = Self.message(1)
        parent.replyCount = 1
        parent.lastReplyAt = 2_000
        timeline.load(MessagePage(messages: [Self.message(2, replyTo: "m1")], lastSeq: 3, parent: parent), older: false)
        #expect(timeline.parent == parent)
        // Another thread's reply and a message outside any thread are not this thread's.
        #expect(!timeline.apply(Self.event(4, .messageSent(Self.message(4)))))
        #expect(!timeline.apply(Self.event(5, .messageSent(Self.message(5, replyTo: "m4")))))
        // A reply of this thread joins it and counts on the parent.
        #expect(timeline.apply(Self.event(6, .messageSent(Self.message(6, replyTo: "m1")))))
        #expect(timeline.messages.map(\.id) == ["m2", "m6"])
        #expect(timeline.parent?.replyCount == 2 && timeline.parent?.lastReplyAt == 6_000)
        // A reaction to the parent reaches the parent.
        #expect(timeline.apply(Self.reaction(7, on: 1, "👍", by: "alice", count: 1)))
        #expect(timeline.parent?.reactions == [.init(key: "👍", count: 1, reacted: true)])
    }
}
