import NIOCore
import ParleyProtocol
import ParleyStore

extension WebSocketGateway {
    /// What a registered connection must be sent before it is live (per its `resume`), from the stream positions and
    /// membership changes read now and the `baseline` positions read before it was registered: see ``ReplayPlan`` for
    /// why nothing falls between the two.
    func replayPlan(principal: UserPrincipal, resume: ResumeRequest?, baseline: StreamPositions) async throws
        -> ReplayPlan
    {
        let positions = try await store.streamPositions(appId: principal.appId, uid: principal.uid)
        let changes = try await store.membershipChanges(
            appId: principal.appId, uid: principal.uid, afterUserSeq: resume?.userSeq ?? baseline.userSeq,
            limit: configuration.maxReplayedMembershipChanges
        )
        let plan = replayPlan(
            resume: resume, baseline: baseline, state: CatchUpState(positions: positions, changes: changes))
        cluster?.connectionCaughtUp(
            UserKey(appId: principal.appId, uid: principal.uid), positions: positions.conversations,
            userSeq: positions.userSeq)
        return plan
    }

    /// ``replayPlan(principal:resume:baseline:)`` with the store's inline reads, on the caller's thread.
    ///
    /// When the writer stored nothing between `quietMark` (taken before the baseline was read) and now (the
    /// connection is registered), the store is as the baseline found it: the positions are the baseline's and there
    /// is no membership change after it, so nothing is read again. A client that resumes from an older `userSeq`
    /// still has its changes read.
    func replayPlan(
        principal: UserPrincipal, resume: ResumeRequest?, baseline: StreamPositions, quietMark: WriteEpoch.Mark?,
        inline: any InlineReads
    ) throws -> ReplayPlan {
        if let quietMark, (resume?.userSeq ?? baseline.userSeq) >= baseline.userSeq,
            writer.epoch.unchanged(since: quietMark)
        {
            return replayPlan(resume: resume, baseline: baseline, state: CatchUpState(positions: baseline, changes: []))
        }
        let state = try inline.catchUpState(
            appId: principal.appId, uid: principal.uid, afterUserSeq: resume?.userSeq ?? baseline.userSeq,
            limit: configuration.maxReplayedMembershipChanges
        )
        return replayPlan(resume: resume, baseline: baseline, state: state)
    }

    private func replayPlan(resume: ResumeRequest?, baseline: StreamPositions, state: CatchUpState) -> ReplayPlan {
        ReplayPlan(
            request: resume, baseline: baseline, positions: state.positions, changes: state.changes,
            maxEvents: Int64(configuration.maxReplayedEventsPerConversation)
        )
    }

    /// The frames of a plan that replays no event: its `resync`s, then `caughtUp`.
    static func framesWithoutReplay(_ plan: ReplayPlan) -> [ByteBuffer] {
        plan.resyncs.map { FrameEncoding.frame(.resync($0)) }
            + [
                FrameEncoding.frame(
                    .caughtUp(CaughtUpFrame(userSeq: plan.userSeq, conversations: plan.positions, replayed: 0)))
            ]
    }

    /// Sends a registered connection what it missed, then `caughtUp` (after `hello`, before its live queue is
    /// written), one page at a time through `send`, which returns once the frames are written to the socket, before the
    /// next page is read. Returns the number of events replayed.
    @discardableResult
    func replay(
        _ plan: ReplayPlan, principal: UserPrincipal, send: @Sendable ([ByteBuffer]) async throws -> Void
    ) async throws -> Int {
        if !plan.resyncs.isEmpty { try await send(plan.resyncs.map { FrameEncoding.frame(.resync($0)) }) }
        let oldest = time.epochMilliseconds() - Int64(configuration.resumeWindow.components.seconds) * 1000
        var replayed = 0
        for range in plan.ranges {
            var after = range.after
            while after < range.through {
                let page = try await store.events(
                    appId: principal.appId, conversationId: range.conversationId, afterSeq: after,
                    limit: Int(min(Int64(Self.replayPageSize), range.through - after))
                )
                guard let last = page.last?.event.seq else { break }
                if after == range.after, let first = page.first, first.event.timestamp < oldest {
                    // Older than the server replays: the client reloads the conversation instead.
                    let resync = ResyncFrame(
                        conversationId: range.conversationId, reason: .historyTrimmed, lastSeq: range.through)
                    try await send([FrameEncoding.frame(.resync(resync))])
                    break
                }
                try await send(page.map { FrameEncoding.eventFrame(json: $0.json) })
                replayed += page.count
                after = last
            }
        }
        let caughtUp = CaughtUpFrame(userSeq: plan.userSeq, conversations: plan.positions, replayed: replayed)
        try await send([FrameEncoding.frame(.caughtUp(caughtUp))])
        return replayed
    }

    static let replayPageSize = 200
}
