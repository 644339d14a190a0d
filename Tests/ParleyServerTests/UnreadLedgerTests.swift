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
        #expect(state.ledgers[bob]?.unread == ["c1": 3, "c2": 1])

        let second = state.request(bob, ["c2", "c3"], now: .seconds(1))
        #expect(!second.everyConversation && second.reads == ["c2", "c3"] && second.ticket > first.ticket)
        let moved = state.apply(second, whole([count("c2", 4), count("c3", 2)]), now: .seconds(1))
        #expect(moved == UnreadSummary(total: 9, conversations: [count("c2", 4), count("c3", 2)]))

        // A conversation read as gone (left, deleted) has none; one read as 0 leaves the ledger.
        let third = state.request(bob, ["c1", "c3"], now: .seconds(2))
        let gone = state.apply(third, whole([count("c3", 0)]), now: .seconds(2))
        #expect(gone == UnreadSummary(total: 4, conversations: [count("c3", 0)]))
        #expect(state.ledgers[bob]?.unread == ["c2": 4])
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
        #expect(state.ledgers[bob] == nil)
        let ready = state.rereadWhole([older])
        #expect(ready && state.ready == [bob] && state.dirty[bob] == ["c1"])
        let again = state.request(bob, ["c1"], now: .zero)
        #expect(again.everyConversation)
    }

    @Test func aReadOfWhatChangedWithoutALedgerPushesNothing() throws {
        var state = UnreadNotifier.State()
        _ = state.apply(state.request(bob, ["c1"], now: .zero), whole([count("c1", 1)]), now: .zero)
        let partial = state.request(bob, ["c1"], now: .zero)
        #expect(!partial.everyConversation)
        // Dropped meanwhile (the user was away when a count changed).
        state.ledgers[bob] = nil
        let unknown = state.apply(partial, whole([count("c1", 2)]), now: .zero)
        #expect(unknown == nil)
        // A held user is recorded, not made ready: their interval's end pushes them.
        state.held.insert(bob)
        let ready = state.rereadWhole([partial])
        #expect(!ready && state.ready.isEmpty && state.dirty[bob] == ["c1"])
    }

    @Test func aMessageOfTheUserSetsTheirCountThereToZeroUnlessAReadMayBeOlder() throws {
        var state = UnreadNotifier.State()
        // A read of every conversation is running: its snapshot may be older than the message, so the conversation is
        // read again after it.
        let everything = state.request(bob, ["c2"], now: .zero)
        #expect(state.readingWhole(bob))
        let pushNow = state.sent(bob, in: "c1", connected: true)
        #expect(pushNow && state.dirty[bob] == ["c1"] && state.ready == [bob])
        _ = state.apply(everything, whole([count("c1", 2), count("c2", 1)]), now: .zero)
        #expect(!state.readingWhole(bob) && state.ledgers[bob]?.total == 3)
        state.dirty[bob] = nil
        state.ready = []
        // Nothing running, not held: the ledger's count there goes, with no read.
        let again = state.sent(bob, in: "c1", connected: true)
        #expect(!again && state.dirty[bob] == nil)
        #expect(state.ledgers[bob]?.total == 1 && state.ledgers[bob]?.unread == ["c2": 1])
        // Held: read again at the interval's end.
        state.held.insert(bob)
        let held = state.sent(bob, in: "c2", connected: true)
        #expect(!held && state.dirty[bob] == ["c2"] && state.ledgers[bob]?.total == 1)
        // Away: the ledger goes.
        _ = state.sent(bob, in: "c2", connected: false)
        #expect(state.ledgers[bob] == nil)
    }

    @Test func aLedgerIsReadWholeAgainAfterItsLifetimeAndDroppedBySweeps() throws {
        var state = UnreadNotifier.State(ledgerLifetime: .seconds(60))
        _ = state.apply(state.request(bob, ["c1"], now: .zero), whole([count("c1", 1)]), now: .zero)
        // Between one lifetime and two (spread by the read's number: users read together expire apart).
        let young = state.request(bob, ["c1"], now: .seconds(59))
        let old = state.request(bob, ["c1"], now: .seconds(120))
        #expect(!young.everyConversation && old.everyConversation)
        #expect(state.hasLedger(bob, now: .seconds(59)) && !state.hasLedger(bob, now: .seconds(120)))
        let expiries = (0..<64).map { _ in
            let key = UnreadNotifier.UserKey(appId: "a", uid: "u")
            state.ledgers[key] = nil
            _ = state.apply(state.request(key, [], now: .zero), whole([]), now: .zero)
            return state.ledgers[key]!.expiresAt
        }
        #expect(Set(expiries).count == 64 && expiries.allSatisfy { $0 >= .seconds(60) && $0 < .seconds(120) })
        // The sweep that comes with pushes drops expired ledgers: the map holds users pushed lately.
        let other = UnreadNotifier.UserKey(appId: "a", uid: "carol")
        _ = state.apply(state.request(other, ["c9"], now: .seconds(100)), whole([count("c9", 1)]), now: .seconds(100))
        _ = state.spend(other, now: .seconds(125), interval: .seconds(1), burst: 5)
        #expect(state.ledgers[bob] == nil && state.ledgers[other] != nil)
    }
}
