import Testing

@testable import Parley

/// How the SDK decides, per durable event, to deliver it, drop it as a duplicate, or fill a gap first.
@Suite struct StreamCursorsTests {
    func event(
        _ conversationId: String, _ seq: Int64,
        _ payload: EventPayload = .messageSent(
            Message(id: "m", conversationId: "c", seq: 0, sender: "bob", parts: [.text("x")], sentAt: 0)
        )
    ) -> Event {
        Event(
            id: "\(conversationId):\(seq)", appId: "a", name: payload.eventName ?? "x", conversationId: conversationId,
            seq: seq, timestamp: 0, context: EventContext(), payload: payload
        )
    }

    @Test func theNextEventIsDeliveredAnOldOneIsADuplicateAndASkipIsAGap() {
        var cursors = StreamCursors(uid: "alice")
        cursors.caughtUp(CaughtUpFrame(userSeq: 1, conversations: ["c": 5]))
        #expect(cursors.decide(conversationId: "c", seq: 6) == .deliver)
        #expect(cursors.decide(conversationId: "c", seq: 5) == .duplicate)
        #expect(cursors.decide(conversationId: "c", seq: 9) == .gap(after: 5, through: 8))
        cursors.delivered(event("c", 6))
        #expect(cursors.conversations["c"] == 6)
        // A conversation the client has no position in starts with whatever comes.
        #expect(cursors.decide(conversationId: "new", seq: 3) == .deliver)
    }

    @Test func nothingIsResumedBeforeTheFirstCatchUp() {
        var cursors = StreamCursors(uid: "alice")
        #expect(cursors.resumeRequest == nil)
        cursors.caughtUp(CaughtUpFrame(userSeq: 4, conversations: ["c": 2]))
        #expect(cursors.resumeRequest == ResumeRequest(userSeq: 4, conversations: ["c": 2]))
    }

    @Test func catchingUpKeepsOnlyTheServersConversationsAndNeverMovesBack() {
        var cursors = StreamCursors(uid: "alice")
        cursors.caughtUp(CaughtUpFrame(userSeq: 1, conversations: ["a": 5, "b": 5]))
        cursors.delivered(event("a", 6))
        cursors.caughtUp(CaughtUpFrame(userSeq: 2, conversations: ["a": 5, "c": 1]))
        #expect(cursors.conversations == ["a": 6, "c": 1] && cursors.userSeq == 2)
    }

    @Test func theUsersOwnRemovalEndsTheConversationsStreamAndResyncMovesThePosition() {
        var cursors = StreamCursors(uid: "alice")
        cursors.caughtUp(CaughtUpFrame(userSeq: 1, conversations: ["a": 5, "b": 2]))
        cursors.delivered(event("a", 6, .participantRemoved(Participant(uid: "bob", role: .member, joinedAt: 0))))
        #expect(cursors.conversations["a"] == 6)
        cursors.delivered(event("a", 7, .participantRemoved(Participant(uid: "alice", role: .member, joinedAt: 0))))
        #expect(cursors.conversations["a"] == nil)
        cursors.resync(ResyncFrame(conversationId: "b", reason: .resumeTooFarBehind, lastSeq: 90))
        #expect(cursors.conversations["b"] == 90)
    }

    @Test func theUsersOwnBanOrUnbanStartsNoStreamAndOthersMoveThePosition() {
        var cursors = StreamCursors(uid: "alice")
        cursors.caughtUp(CaughtUpFrame(userSeq: 1, conversations: ["a": 5]))
        let bobs = ConversationBan(conversationId: "a", uid: "bob", createdAt: 0)
        cursors.delivered(event("a", 6, .participantBanned(bobs)))
        cursors.delivered(event("a", 7, .participantUnbanned(bobs)))
        #expect(cursors.conversations["a"] == 7)
        // alice is removed (7), then told of her ban (8): she is out. A ban of her, or its lifting, in a group she is
        // not in (she was banned beforehand) starts nothing either.
        let alices = ConversationBan(conversationId: "a", uid: "alice", createdAt: 0)
        cursors.delivered(event("a", 8, .participantRemoved(Participant(uid: "alice", role: .member, joinedAt: 0))))
        cursors.delivered(event("a", 9, .participantBanned(alices)))
        #expect(cursors.conversations["a"] == nil)
        #expect(cursors.decide(conversationId: "z", seq: 4) == .deliver)
        let beforehand = ConversationBan(conversationId: "z", uid: "alice", createdAt: 0)
        cursors.delivered(event("z", 4, .participantBanned(beforehand)))
        cursors.delivered(event("z", 5, .participantUnbanned(beforehand)))
        #expect(cursors.conversations.isEmpty)
    }
}
