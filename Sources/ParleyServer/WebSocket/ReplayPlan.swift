import ParleyProtocol
import ParleyStore

/// What a reconnecting connection must be sent before it is live: which events of which conversations, which
/// conversations cannot be replayed, and the positions announced in `caughtUp`.
///
/// Pure: built from what the store said, read in this order:
/// 0. the `baseline` ``StreamPositions``, before the connection was registered with the hub;
/// 1. ``StreamPositions`` again, after it was registered (every event committed later is in its live queue),
/// 2. the user's ``MembershipChange``s since the client's `userSeq` (the baseline's for a client without one).
/// What committed between 0 and 1 in a conversation the client has no position in is replayed from the baseline,
/// so that a client that connects while events are being written misses none of them.
/// Every replayed range ends at a sequence number read in step 1 or 2; events after it commit later and arrive
/// live. The client drops a live event whose `seq` it already has, so the overlap is harmless.
struct ReplayPlan: Sendable, Hashable {
    /// Events `after < seq <= through` of a conversation, to send in order.
    struct Range: Sendable, Hashable {
        var conversationId: String
        var after: Int64
        var through: Int64
        var count: Int64 { through - after }
    }

    var ranges: [Range] = []
    var resyncs: [ResyncFrame] = []
    /// For `caughtUp`: the user's conversations and the position the client has in each once the plan is sent.
    var positions: [String: Int64] = [:]
    var userSeq: Int64 = 0

    /// - Parameters:
    ///   - request: the client's `resume`; nil for a client with no saved position (it starts at the baseline).
    ///   - maxEvents: the most events replayed for one conversation; past it the client gets a `resync`.
    init(
        request: ResumeRequest?, baseline: StreamPositions, positions current: StreamPositions,
        changes: [MembershipChange], maxEvents: Int64
    ) {
        let request = request ?? ResumeRequest(userSeq: baseline.userSeq, conversations: [:])
        userSeq = max(current.userSeq, changes.last?.userSeq ?? 0, request.userSeq)
        positions = current.conversations

        // Membership intervals of each conversation since the client's userSeq: (after, through?) with an
        // open end while the user is still a participant.
        var intervals: [String: [(after: Int64, through: Int64?)]] = [:]
        for (conversationId, seq) in request.conversations {
            intervals[conversationId] = [(seq, nil)]
        }
        for change in changes where change.userSeq > request.userSeq {
            var list = intervals[change.conversationId] ?? []
            let isOpen = list.last.map { $0.through == nil } ?? false
            if change.joined {
                if !isOpen { list.append((change.seq - 1, nil)) }
            } else if isOpen {
                list[list.count - 1].through = change.seq
            }
            intervals[change.conversationId] = list
        }
        for (conversationId, seq) in baseline.conversations
        where intervals[conversationId] == nil && current.conversations[conversationId] != nil {
            intervals[conversationId] = [(seq, nil)]
        }

        for conversationId in intervals.keys.sorted() {
            guard let list = intervals[conversationId] else { continue }
            // The end of a still-open interval: the conversation's last sequence number when positions were read,
            // or, for a conversation joined after that read, the join itself (what follows it is live).
            let lastJoin = changes.last { $0.conversationId == conversationId && $0.joined }
            let openEnd = current.conversations[conversationId] ?? lastJoin?.seq
            var ranges: [Range] = []
            for interval in list {
                guard let through = interval.through ?? openEnd else { continue }
                if interval.after > through {
                    // The client is ahead of the server: the server's data went back in time.
                    resyncs.append(
                        .init(conversationId: conversationId, reason: .resumePositionInvalid, lastSeq: through))
                    ranges = []
                    break
                }
                if through > interval.after {
                    ranges.append(Range(conversationId: conversationId, after: interval.after, through: through))
                }
            }
            if ranges.reduce(0, { $0 + $1.count }) > maxEvents, let last = ranges.last {
                resyncs.append(
                    .init(conversationId: conversationId, reason: .resumeTooFarBehind, lastSeq: last.through))
                ranges = []
            }
            self.ranges += ranges
            if current.conversations[conversationId] == nil, let open = list.last, open.through == nil, let lastJoin {
                positions[conversationId] = lastJoin.seq
            }
        }
    }
}
