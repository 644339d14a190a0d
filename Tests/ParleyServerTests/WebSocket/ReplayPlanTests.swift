import ParleyProtocol
import ParleyStore
import Testing

@testable import ParleyServer

/// The replay plan of a reconnecting connection, case by case (pure: no server).
@Suite struct ReplayPlanTests {
    typealias Range = ReplayPlan.Range

    /// `before` defaults to `now`: nothing committed while the connection registered.
    func plan(
        _ request: ResumeRequest?, now: [String: Int64], before: [String: Int64]? = nil, userSeq: Int64 = 0,
        changes: [MembershipChange] = [], maxEvents: Int64 = 1000
    ) -> ReplayPlan {
        ReplayPlan(
            request: request, baseline: StreamPositions(userSeq: userSeq, conversations: before ?? now),
            positions: StreamPositions(userSeq: userSeq, conversations: now), changes: changes, maxEvents: maxEvents
        )
    }

    @Test func aClientWithoutPositionsGetsNothingReplayedAndTheCurrentPositions() {
        let plan = plan(nil, now: ["c1": 7, "c2": 3], userSeq: 2)
        #expect(plan.ranges.isEmpty && plan.resyncs.isEmpty)
        #expect(plan.positions == ["c1": 7, "c2": 3] && plan.userSeq == 2)
    }

    @Test func whatCommitsWhileAClientConnectsIsReplayedFromBeforeItRegistered() {
        let fresh = plan(nil, now: ["c1": 7, "c2": 3], before: ["c1": 5, "c2": 3])
        #expect(fresh.ranges == [Range(conversationId: "c1", after: 5, through: 7)])
        // A resuming client keeps its own position where it has one.
        let resuming = plan(
            ResumeRequest(userSeq: 0, conversations: ["c1": 2]), now: ["c1": 7, "c2": 4], before: ["c1": 5, "c2": 3])
        #expect(
            resuming.ranges == [
                Range(conversationId: "c1", after: 2, through: 7), Range(conversationId: "c2", after: 3, through: 4),
            ])
    }

    @Test func aFreshClientGetsTheConversationsItJoinsWhileConnecting() {
        let changes = [MembershipChange(userSeq: 3, conversationId: "c9", joined: true, seq: 2)]
        let plan = ReplayPlan(
            request: nil, baseline: StreamPositions(userSeq: 2, conversations: [:]),
            positions: StreamPositions(userSeq: 3, conversations: ["c9": 3]), changes: changes, maxEvents: 100
        )
        #expect(plan.ranges == [Range(conversationId: "c9", after: 1, through: 3)] && plan.userSeq == 3)
    }

    @Test func eachKnownConversationIsReplayedFromTheClientsPosition() {
        let plan = plan(
            ResumeRequest(userSeq: 2, conversations: ["c1": 4, "c2": 3]), now: ["c1": 7, "c2": 3], userSeq: 2)
        #expect(plan.ranges == [Range(conversationId: "c1", after: 4, through: 7)])
        #expect(plan.positions == ["c1": 7, "c2": 3])
    }

    @Test func aConversationJoinedWhileAwayIsReplayedFromTheJoin() {
        let changes = [MembershipChange(userSeq: 3, conversationId: "c9", joined: true, seq: 5)]
        let plan = plan(
            ResumeRequest(userSeq: 2, conversations: ["c1": 7]), now: ["c1": 7, "c9": 8], userSeq: 3, changes: changes)
        #expect(plan.ranges == [Range(conversationId: "c9", after: 4, through: 8)])
        #expect(plan.positions == ["c1": 7, "c9": 8] && plan.userSeq == 3)
    }

    @Test func aConversationLeftWhileAwayIsReplayedUpToTheDepartureOnly() {
        let changes = [MembershipChange(userSeq: 3, conversationId: "c1", joined: false, seq: 9)]
        let plan = plan(ResumeRequest(userSeq: 2, conversations: ["c1": 6]), now: [:], userSeq: 3, changes: changes)
        #expect(plan.ranges == [Range(conversationId: "c1", after: 6, through: 9)])
        #expect(plan.positions.isEmpty)
    }

    @Test func whatHappenedBetweenLeavingAndRejoiningStaysHidden() {
        let changes = [
            MembershipChange(userSeq: 3, conversationId: "c1", joined: false, seq: 9),
            MembershipChange(userSeq: 4, conversationId: "c1", joined: true, seq: 20),
        ]
        let plan = plan(
            ResumeRequest(userSeq: 2, conversations: ["c1": 6]), now: ["c1": 22], userSeq: 4, changes: changes)
        #expect(
            plan.ranges == [
                Range(conversationId: "c1", after: 6, through: 9), Range(conversationId: "c1", after: 19, through: 22),
            ]
        )
    }

    @Test func aJoinCommittedAfterThePositionsWereReadIsReplayedUpToTheJoin() {
        // Positions were read first and do not have c5 yet; the membership read that followed does.
        let changes = [MembershipChange(userSeq: 3, conversationId: "c5", joined: true, seq: 4)]
        let plan = plan(ResumeRequest(userSeq: 2, conversations: [:]), now: [:], userSeq: 2, changes: changes)
        #expect(plan.ranges == [Range(conversationId: "c5", after: 3, through: 4)])
        #expect(plan.positions == ["c5": 4] && plan.userSeq == 3)
    }

    @Test func aConversationTheClientNeverKnewStartsAtItsCurrentEnd() {
        let plan = plan(ResumeRequest(userSeq: 5, conversations: [:]), now: ["old": 40], userSeq: 5)
        #expect(plan.ranges.isEmpty && plan.positions == ["old": 40])
    }

    @Test func aConversationLeftBeforeTheClientsPositionIsDropped() {
        let plan = plan(ResumeRequest(userSeq: 5, conversations: ["gone": 3]), now: [:], userSeq: 5)
        #expect(plan.ranges.isEmpty && plan.resyncs.isEmpty && plan.positions.isEmpty)
    }

    @Test func tooManyMissedEventsGetAResyncInsteadOfAReplay() {
        let plan = plan(
            ResumeRequest(userSeq: 0, conversations: ["c1": 10, "c2": 1]), now: ["c1": 20, "c2": 5], maxEvents: 9)
        #expect(plan.ranges == [Range(conversationId: "c2", after: 1, through: 5)])
        #expect(plan.resyncs == [ResyncFrame(conversationId: "c1", reason: .resumeTooFarBehind, lastSeq: 20)])
        #expect(plan.positions == ["c1": 20, "c2": 5])
    }

    @Test func aClientAheadOfTheServerIsToldToResync() {
        let plan = plan(ResumeRequest(userSeq: 0, conversations: ["c1": 30]), now: ["c1": 12])
        #expect(plan.ranges.isEmpty)
        #expect(plan.resyncs == [ResyncFrame(conversationId: "c1", reason: .resumePositionInvalid, lastSeq: 12)])
        #expect(plan.positions == ["c1": 12])
    }

    @Test func changesTheClientAlreadySawAreIgnored() {
        let changes = [MembershipChange(userSeq: 1, conversationId: "c1", joined: true, seq: 2)]
        let plan = plan(
            ResumeRequest(userSeq: 1, conversations: ["c1": 8]), now: ["c1": 8], userSeq: 1, changes: changes)
        #expect(plan.ranges.isEmpty && plan.positions == ["c1": 8])
    }
}
