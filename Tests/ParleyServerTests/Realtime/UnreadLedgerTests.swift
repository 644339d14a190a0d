import ParleyProtocol
import ParleyStore
import Testing

@testable import ParleyServer

/// The totals the unread notifier keeps per user, so that a push reads only the conversations that changed.
@Suite struct UnreadLedgerTests {
    let bob = UnreadNotifier.UserKey(appId: "a", uid: "bob")

    func count(_ id: String, _ unread: Int) -> ConversationUnread {
        ConversationUnread(conversationId: id, unread: unread, readSeq: 0, lastSeq: Int64(unread))
    }

    /// The counts in the user's ledger that are not 0.
    func unread(_ state: UnreadNotifier.State, _ key: UnreadNotifier.UserKey) -> [String: Int] {
        (state.users[key]?.ledger?.conversations ?? [:]).filter { $0.value.unread > 0 }.mapValues(\.unread)
    }

    /// A read of every conversation (what the store answers for `request.reads == nil`).
    func whole(_ counts: [ConversationUnread]) -> UnreadSummary {
        UnreadSummary(total: counts.reduce(0) { $0 + $1.unread }, conversations: counts)
    }

    @Test func theFirstReadIsWholeAndTheNextOnlyWhatChanged() throws {
        var state = UnreadNotifier.State()
        let first = state.request(bob, ["c2"], now: .zero)
        #expect(first.everyConversation && first.reads == nil)
        let pushed = state.apply(first, whole([count("c1", 3), count("c2", 1), count("c3", 0)]), now: .zero)
        // The push lists what changed, with the user's total over everything.
        #expect(pushed == UnreadSummary(total: 4, conversations: [count("c2", 1)]))
        #expect(unread(state, bob) == ["c1": 3, "c2": 1])
        #expect(state.users[bob]?.ledger?.conversations.keys.sorted() == ["c1", "c2", "c3"])

        let second = state.request(bob, ["c2", "c3"], now: .seconds(1))
        #expect(!second.everyConversation && second.reads == ["c2", "c3"] && second.ticket > first.ticket)
        let moved = state.apply(second, whole([count("c2", 4), count("c3", 2)]), now: .seconds(1))
        #expect(moved == UnreadSummary(total: 9, conversations: [count("c2", 4), count("c3", 2)]))

        // A conversation read as gone (left, deleted) has none; one read as 0 leaves the ledger.
        let third = state.request(bob, ["c1", "c3"], now: .seconds(2))
        let gone = state.apply(third, whole([count("c3", 0)]), now: .seconds(2))
        #expect(gone == UnreadSummary(total: 4, conversations: [count("c3", 0)]))
        #expect(unread(state, bob) == ["c2": 4] && state.users[bob]?.ledger?.conversations["c1"] == nil)
    }

    @Test func aReadOlderThanOneAppliedDropsTheLedgerAndIsReadWholeAgain() throws {
        var state = UnreadNotifier.State()
        _ = state.apply(state.request(bob, ["c1"], now: .zero), whole([count("c1", 1)]), now: .zero)
        let older = state.request(bob, ["c1"], now: .zero)
        let newer = state.request(bob, ["c1"], now: .zero)
        let applied = state.apply(newer, whole([count("c1", 3)]), now: .zero)
        #expect(applied?.total == 3)
        // The older read came back last: its count may be behind the one pushed, so nothing is pushed from it.
        let late = state.apply(older, whole([count("c1", 2)]), now: .zero)
        #expect(late == nil)
        #expect(state.users[bob]?.ledger == nil)
        let ready = state.rereadWhole([older])
        #expect(ready && state.ready == [bob] && state.users[bob]?.dirty == ["c1"])
        let again = state.request(bob, ["c1"], now: .zero)
        #expect(again.everyConversation)
    }

    @Test func aReadOfWhatChangedWithoutALedgerPushesNothing() throws {
        var state = UnreadNotifier.State()
        _ = state.apply(state.request(bob, ["c1"], now: .zero), whole([count("c1", 1)]), now: .zero)
        let partial = state.request(bob, ["c1"], now: .zero)
        #expect(!partial.everyConversation)
        // Dropped meanwhile (the user was away when a count changed).
        state.users[bob]?.ledger = nil
        let unknown = state.apply(partial, whole([count("c1", 2)]), now: .zero)
        #expect(unknown == nil)
        // A held user is recorded, not made ready: their interval's end pushes them.
        state.users[bob, default: UnreadNotifier.Entry()].held = true
        let ready = state.rereadWhole([partial])
        #expect(!ready && state.ready.isEmpty && state.users[bob]?.dirty == ["c1"])
    }

    /// Bob's ledger read whole: c1 has 2 unread (read to 3, last 5), c2 none (read to 7, last 7).
    func ledgered() -> UnreadNotifier.State {
        var state = UnreadNotifier.State()
        let read = state.request(bob, [], now: .zero)
        let counts = [
            ConversationUnread(conversationId: "c1", unread: 2, readSeq: 3, lastSeq: 5),
            ConversationUnread(conversationId: "c2", unread: 0, readSeq: 7, lastSeq: 7),
        ]
        _ = state.apply(read, UnreadSummary(total: 2, conversations: counts), now: .zero)
        return state
    }

    func observe(_ state: inout UnreadNotifier.State, _ id: String, _ change: UnreadNotifier.Change) -> Bool {
        state.observe(bob, id, change, connected: true, now: .seconds(1))
    }

    @Test func aMessageOfSomeoneElseMovesTheLedgerAndIsPushedWithNoRead() throws {
        var state = ledgered()
        #expect(observe(&state, "c2", .arrived(seq: 8)))
        #expect(
            state.users[bob]?.ledger?.total == 3 && state.users[bob]?.moved == ["c2"] && state.users[bob]?.dirty == nil)
        #expect(state.ready == [bob])
        // Another one before the push: nothing more to wake.
        #expect(!observe(&state, "c1", .arrived(seq: 6)))
        // A push with no read spends from the budget (here of 1: the user is held).
        let taken = state.take(now: .seconds(1), interval: .seconds(1), burst: 1)
        #expect(taken.reads.isEmpty && taken.held == [bob] && state.users[bob]?.moved == nil)
        let pushed = try #require(taken.pushes.first)
        #expect(
            pushed.1
                == UnreadSummary(
                    total: 4,
                    conversations: [
                        ConversationUnread(conversationId: "c1", unread: 3, readSeq: 3, lastSeq: 6),
                        ConversationUnread(conversationId: "c2", unread: 1, readSeq: 7, lastSeq: 8),
                    ]))
        // Held: the ledger still moves; the push waits for the interval's end.
        #expect(!observe(&state, "c2", .arrived(seq: 9)))
        #expect(state.users[bob]?.ledger?.total == 5 && state.users[bob]?.moved == ["c2"] && state.ready.isEmpty)

        // With a budget left, the next push goes at once and holds no one.
        var roomy = ledgered()
        _ = observe(&roomy, "c2", .arrived(seq: 8))
        #expect(roomy.take(now: .seconds(1), interval: .seconds(1), burst: 5).held.isEmpty)
        #expect(observe(&roomy, "c2", .arrived(seq: 9)) && roomy.ready == [bob])
    }

    @Test func theBatchsEndPushesMovedLedgersAndLeavesReadsToTheTask() throws {
        var state = ledgered()
        #expect(observe(&state, "c2", .arrived(seq: 8)))
        let moved = state.takeMoved(now: .seconds(1), interval: .seconds(1), burst: 5, maxUsersForBurst: 256)
        #expect(moved.held.isEmpty && !moved.toRead && state.ready.isEmpty && state.users[bob]?.moved == nil)
        #expect(
            moved.pushes.map(\.1) == [
                UnreadSummary(
                    total: 3,
                    conversations: [ConversationUnread(conversationId: "c2", unread: 1, readSeq: 7, lastSeq: 8)])
            ])
        // After a gap only a read can tell: the user stays ready, for the notifier's task.
        #expect(observe(&state, "c1", .arrived(seq: 9)))
        let gap = state.takeMoved(now: .seconds(1), interval: .seconds(1), burst: 5, maxUsersForBurst: 256)
        #expect(gap.pushes.isEmpty && gap.toRead && state.ready == [bob] && state.users[bob]?.dirty == ["c1"])
        let taken = state.take(now: .seconds(1), interval: .seconds(1), burst: 5)
        #expect(taken.reads.map(\.conversationIds) == [["c1"]])

        // More users due at once than the burst allows for: each is pushed once and held, as with a burst of 1.
        var group = ledgered()
        let carol = UnreadNotifier.UserKey(appId: "a", uid: "carol")
        _ = group.apply(group.request(carol, [], now: .zero), whole([count("c2", 0)]), now: .zero)
        #expect(observe(&group, "c2", .arrived(seq: 8)))
        let carolDue = group.observe(carol, "c2", .arrived(seq: 1), connected: true, now: .seconds(1))
        #expect(carolDue)
        let many = group.takeMoved(now: .seconds(1), interval: .seconds(1), burst: 5, maxUsersForBurst: 1)
        #expect(many.pushes.count == 2 && Set(many.held) == [bob, carol])
        #expect(group.users[bob]?.held == true && group.users[carol]?.budget?.credit == .zero)
    }

    @Test func anEventCountedAlreadyChangesNothingAndAGapIsRead() throws {
        var state = ledgered()
        // A read's snapshot can be newer than what was published here: events up to its last seq are in it.
        #expect(!observe(&state, "c1", .arrived(seq: 5)))
        #expect(
            state.users[bob]?.ledger?.total == 2 && state.users[bob]?.moved == nil && state.users[bob]?.dirty == nil)
        // Events that move no count keep the ledger whole past them.
        #expect(!observe(&state, "c1", .passed(seq: 6)))
        #expect(state.users[bob]?.ledger?.conversations["c1"]?.lastSeq == 6)
        // One after a gap (events not seen here): only a read can tell.
        #expect(observe(&state, "c1", .arrived(seq: 9)))
        #expect(state.users[bob]?.dirty == ["c1"] && state.users[bob]?.ledger?.total == 2)
        let taken = state.take(now: .seconds(1), interval: .seconds(1), burst: 1)
        #expect(taken.pushes.isEmpty && taken.reads.map(\.conversationIds) == [["c1"]])
        #expect(taken.reads.allSatisfy { !$0.everyConversation })
    }

    @Test func whileAReadIsOutEventsAreReadAgainAfterIt() throws {
        var state = ledgered()
        let out = state.request(bob, ["c2"], now: .seconds(1))
        #expect(state.users[bob]?.reading == true && state.users[bob]?.readingWhole == false)
        // Its snapshot may be older or newer than this message: the conversation is read again after it.
        #expect(observe(&state, "c1", .arrived(seq: 6)))
        #expect(state.users[bob]?.dirty == ["c1"] && state.users[bob]?.ledger?.total == 2)
        _ = state.apply(out, UnreadSummary(total: 0, conversations: [count("c2", 0)]), now: .seconds(1))
        #expect(state.users[bob]?.reading == false && state.users[bob]?.asked == nil)
        // A conversation the ledger does not have (a new one) is read too.
        state.users[bob]?.dirty = nil
        state.ready = []
        #expect(observe(&state, "c9", .arrived(seq: 1)) && state.users[bob]?.dirty == ["c9"])
    }

    @Test func readingOrSendingPastEverythingCountedLeavesNone() throws {
        var state = ledgered()
        // A receipt behind the last message counted: how many stay unread, only a read can tell.
        #expect(observe(&state, "c1", .read(seq: 4)) && state.users[bob]?.dirty == ["c1"])
        state = ledgered()
        // A receipt at or past it (another node's commit not brought here yet): none, and later events up to it are
        // counted already.
        #expect(observe(&state, "c1", .read(seq: 6)))
        #expect(state.users[bob]?.ledger?.total == 0 && state.users[bob]?.moved == ["c1"])
        #expect(state.users[bob]?.ledger?.conversations["c1"] == .init(unread: 0, readSeq: 6, lastSeq: 6))
        #expect(!observe(&state, "c1", .arrived(seq: 6)) && state.users[bob]?.ledger?.total == 0)
        // A receipt that moves nothing (an older one).
        #expect(!observe(&state, "c1", .read(seq: 5)) && state.users[bob]?.dirty == nil)

        // Bob's own message reads the conversation up to it: none there, not pushed by itself.
        state = ledgered()
        #expect(!observe(&state, "c1", .sent(seq: 6)))
        #expect(state.users[bob]?.ledger?.total == 0 && state.users[bob]?.moved == nil && state.ready.isEmpty)
        // Behind what was counted: read.
        state = ledgered()
        #expect(observe(&state, "c1", .sent(seq: 4)) && state.users[bob]?.dirty == ["c1"])
        // With no ledger and no read out: nothing to move, nothing pushed.
        var empty = UnreadNotifier.State()
        let pushNothing = empty.observe(bob, "c1", .sent(seq: 6), connected: true, now: .zero)
        #expect(!pushNothing && empty.users.values.allSatisfy { $0.dirty == nil })
        // Away: the ledger goes.
        state = ledgered()
        let away = state.observe(bob, "c1", .arrived(seq: 6), connected: false, now: .seconds(1))
        #expect(!away)
        #expect(state.users[bob]?.ledger == nil && state.users[bob]?.dirty == nil)
    }

    @Test func whatEachEventChanges() throws {
        func event(_ payload: EventPayload, seq: Int64?, by actor: String = "alice") -> Event {
            Event(
                id: "e", appId: "a", name: .messageSent, conversationId: "c1", seq: seq, timestamp: 0,
                context: EventContext(createdBy: actor), payload: payload)
        }
        func changes(_ event: Event, _ recipients: [String]) -> [String] {
            UnreadNotifier.changes(EventFacts(event), recipients: recipients).map { "\($0.uid):\($0.change)" }
        }
        let message = Message(
            id: "m", conversationId: "c1", seq: 4, sender: "alice", clientMessageId: nil, parts: [], metadata: nil,
            alert: nil, sentAt: 0, replyTo: nil, mentions: nil)
        #expect(
            changes(event(.messageSent(message), seq: 4), ["alice", "bob"]) == [
                "alice:sent(seq: 4)", "bob:arrived(seq: 4)",
            ])
        #expect(
            changes(event(.messageDeleted(message), seq: 5), ["alice", "bob"]) == [
                "alice:passed(seq: 5)", "bob:changed",
            ])
        #expect(
            changes(event(.messageRead(Receipt(uid: "bob", seq: 4)), seq: nil, by: "bob"), ["alice", "bob"]) == [
                "bob:read(seq: 4)"
            ])
        let removed = Participant(uid: "carol", role: .member, joinedAt: 0)
        // The one removed is no longer a recipient.
        #expect(
            changes(event(.participantRemoved(removed), seq: 6), ["alice", "bob"]) == [
                "carol:changed", "alice:passed(seq: 6)", "bob:passed(seq: 6)",
            ])
        #expect(changes(event(.messageUpdated(message), seq: 7), ["bob"]) == ["bob:passed(seq: 7)"])
        #expect(changes(event(.messageDelivered(Receipt(uid: "bob", seq: 4)), seq: nil), ["bob"]).isEmpty)
    }

    @Test func aLedgerIsReadWholeAgainAfterItsLifetimeAndDroppedBySweeps() throws {
        var state = UnreadNotifier.State(ledgerLifetime: .seconds(60))
        _ = state.apply(state.request(bob, ["c1"], now: .zero), whole([count("c1", 1)]), now: .zero)
        // Between one lifetime and two (spread by the read's number: users read together expire apart).
        let young = state.request(bob, ["c1"], now: .seconds(59))
        let old = state.request(bob, ["c1"], now: .seconds(120))
        #expect(!young.everyConversation && old.everyConversation)
        #expect(state.users[bob]?.hasLedger(now: .seconds(59)) == true)
        #expect(state.users[bob]?.hasLedger(now: .seconds(120)) == false)
        let expiries = (0..<64).map { _ in
            let key = UnreadNotifier.UserKey(appId: "a", uid: "u")
            state.users[key]?.ledger = nil
            _ = state.apply(state.request(key, [], now: .zero), whole([]), now: .zero)
            return state.users[key]!.ledger!.expiresAt
        }
        #expect(Set(expiries).count == 64 && expiries.allSatisfy { $0 >= .seconds(60) && $0 < .seconds(120) })
        // The sweep that comes with pushes drops expired ledgers: the map holds users pushed lately.
        let other = UnreadNotifier.UserKey(appId: "a", uid: "carol")
        _ = state.apply(state.request(other, ["c9"], now: .seconds(100)), whole([count("c9", 1)]), now: .seconds(100))
        _ = state.push(other, now: .seconds(125), interval: .seconds(1), burst: 5)
        #expect(state.users[bob]?.ledger == nil && state.users[other]?.ledger != nil)
    }
}
