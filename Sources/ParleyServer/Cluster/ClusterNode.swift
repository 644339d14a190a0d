import Logging
import ParleyProtocol
import ParleyStore
import ServiceLifecycle

/// This node's part in a deployment of several nodes: runs the NATS link (``NATSCluster``) and applies what it hears
/// (other nodes' events, catch-ups, signals, users of nodes that are gone). Stops at graceful shutdown, after the
/// command writer has published what it stored, and says goodbye: the others keep this node's users for their
/// grace, then announce them offline.
struct ClusterNode: Service {
    let cluster: NATSCluster
    let store: any ClusterStore
    let writer: CommandWriter
    let publisher: EventPublisher
    let relay: Relay
    let presence: PresenceTracker
    let hub: Hub
    let readiness: Readiness
    let logger: Logger
    /// Membership changes read per user check (more: the user's sockets are closed so that their clients resume).
    static let maxSettledChanges = 10_000

    func run() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await notice in cluster.notices { await handle(notice) }
            }
            if let gapTimers = publisher.gapTimers {
                // Gaps waited for long enough are read in the command writer's loop, in order with its other work.
                group.addTask {
                    await cancelWhenGracefulShutdown { await gapTimers.run { writer.clusterWork(.fillGap($0)) } }
                }
            }
            group.addTask {
                try await cancelWhenGracefulShutdown {
                    try await cluster.run(connected: { readiness.markClusterConnected() })
                }
            }
            try await group.next()
            group.cancelAll()
        }
    }

    private func handle(_ notice: NATSCluster.Notice) async {
        switch notice {
        case .events(let conversation, let events):
            writer.clusterWork(.events(conversation, events))
        case .sync(let conversations):
            writer.clusterWork(.sync(conversations))
        case .settleUsers(let users):
            await settle(users)
        case .signal(let message):
            apply(message)
        case .usersGone(let users, let announce):
            presence.lostWithNode(users, announce: announce)
        }
    }

    private func apply(_ message: ClusterMessage) {
        switch message {
        case .deliver(_, let appId, let uids, let presenceOf, let except, let json):
            relay.apply(appId: appId, uids: uids, presenceOf: presenceOf, except: except, json: json)
            guard let event = try? WireCoding.decode(Event.self, from: json) else { return }
            if presenceOf != nil {
                presence.remoteChange(appId: appId, event)
            } else if event.conversationId != nil {
                publisher.followUpElsewhere(event, recipients: uids)
            }
        case .close(_, let appId, let uid, let tokenIds, let code, let reason):
            hub.close(
                appId: appId, uid: uid, tokenIds: tokenIds.map(Set.init), code: code,
                reason: ErrorCode(rawValue: reason))
        default:
            break
        }
    }

    /// Users who connected here before every node knew it: what they joined or left meanwhile (no node routed it
    /// here) is applied now, and the conversations they joined are caught up from the database.
    private func settle(_ users: [UserRef: Int64]) async {
        let read: MembershipChanges
        do {
            read = try await store.membershipChanges(users, limit: Self.maxSettledChanges)
        } catch {
            logger.warning("Cluster: newly connected users could not be checked; closing their sockets to resume")
            for user in users.keys { closeToResume(user) }
            return
        }
        var joined: [ConversationRef] = []
        for (user, changes) in read.changes {
            let key = UserKey(appId: user.appId, uid: user.uid)
            for change in changes {
                if change.joined {
                    cluster.joined(key, conversationId: change.conversationId, position: change.seq - 1)
                    joined.append(ConversationRef(appId: user.appId, conversationId: change.conversationId))
                } else {
                    cluster.left(key, conversationId: change.conversationId)
                }
            }
        }
        for user in read.incomplete { closeToResume(user) }
        if !joined.isEmpty { writer.clusterWork(.sync(joined)) }
    }

    private func closeToResume(_ user: UserRef) {
        hub.close(
            appId: user.appId, uid: user.uid, code: WebSocketCloseCode.serviceRestart, reason: .nodeResync)
    }
}
