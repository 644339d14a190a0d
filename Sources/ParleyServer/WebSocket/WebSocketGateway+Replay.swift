import NIOCore
import NIOWebSocket
import ParleyProtocol
import ParleyStore

extension WebSocketGateway {
    /// What a registered connection must be sent before it is live (per its `resume`), from the stream positions and
    /// membership changes read now and the `baseline` positions read before it was registered: see ``ReplayPlan`` for
    /// why nothing falls between the two.
    func replayPlan(principal: UserPrincipal, resume: ResumeRequest?, baseline: StreamPositions) async throws -> ReplayPlan {
        let positions = try await store.streamPositions(appId: principal.appId, uid: principal.uid)
        let changes = try await store.membershipChanges(
            appId: principal.appId, uid: principal.uid, afterUserSeq: resume?.userSeq ?? baseline.userSeq,
            limit: configuration.maxReplayedMembershipChanges
        )
        return replayPlan(resume: resume, baseline: baseline, state: CatchUpState(positions: positions, changes: changes))
    }

    /// ``replayPlan(principal:resume:baseline:)`` with the store's inline reads, on the caller's thread.
    func replayPlan(
        principal: UserPrincipal, resume: ResumeRequest?, baseline: StreamPositions, inline: any InlineConnectionReads
    ) throws -> ReplayPlan {
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
            + [FrameEncoding.frame(.caughtUp(CaughtUpFrame(userSeq: plan.userSeq, conversations: plan.positions, replayed: 0)))]
    }

    /// Sends a registered connection what it missed, then `caughtUp`, through the channel (after `hello`, before its
    /// live queue is written), one page at a time: each page is flushed and written to the socket before the next is
    /// read. Returns the number of events replayed.
    @discardableResult
    func replay(_ plan: ReplayPlan, principal: UserPrincipal, channel: any Channel) async throws -> Int {
        func send(_ frame: ServerFrame) async throws {
            try await channel.writeAndFlush(Self.textFrame(FrameEncoding.frame(frame)))
        }
        for resync in plan.resyncs { try await send(.resync(resync)) }

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
                    try await send(
                        .resync(.init(conversationId: range.conversationId, reason: .historyTrimmed, lastSeq: range.through))
                    )
                    break
                }
                for stored in page.dropLast() {
                    channel.write(Self.textFrame(FrameEncoding.eventFrame(json: stored.json)), promise: nil)
                }
                try await channel.writeAndFlush(Self.textFrame(FrameEncoding.eventFrame(json: page[page.count - 1].json)))
                replayed += page.count
                after = last
            }
        }
        try await send(.caughtUp(CaughtUpFrame(userSeq: plan.userSeq, conversations: plan.positions, replayed: replayed)))
        return replayed
    }

    static let replayPageSize = 200
}
