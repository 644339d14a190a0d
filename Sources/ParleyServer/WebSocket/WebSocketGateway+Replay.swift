import NIOCore
import NIOWebSocket
import ParleyProtocol
import ParleyStore

extension WebSocketGateway {
    /// Sends a new connection what it missed (per its `resume`), then `caughtUp`. Call after the connection is
    /// registered with the hub and before its live queue is written, with the `baseline` positions read before it
    /// was registered: see ``ReplayPlan`` for why nothing falls between the two. Frames are written through the
    /// channel (after `hello`), one page at a time: each page is flushed and written to the socket before the next is
    /// read. Returns the number of events replayed.
    @discardableResult
    func catchUp(
        principal: UserPrincipal, resume: ResumeRequest?, baseline: StreamPositions, channel: any Channel
    ) async throws -> Int {
        let positions = try await store.streamPositions(appId: principal.appId, uid: principal.uid)
        let changes = try await store.membershipChanges(
            appId: principal.appId, uid: principal.uid, afterUserSeq: resume?.userSeq ?? baseline.userSeq,
            limit: configuration.maxReplayedMembershipChanges
        )
        let plan = ReplayPlan(
            request: resume, baseline: baseline, positions: positions, changes: changes,
            maxEvents: Int64(configuration.maxReplayedEventsPerConversation)
        )
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
