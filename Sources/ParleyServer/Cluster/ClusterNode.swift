import Logging
import ParleyProtocol
import ParleyStore
import ServiceLifecycle

/// This node's part in a deployment of several nodes: runs the cluster link and applies what it hears (other nodes'
/// commits, signals, users of dead nodes), and sends this node's signals. Stops at graceful shutdown, which
/// deregisters the node: the others then announce its users offline.
struct ClusterNode: Service {
    let link: any ClusterLink
    let writer: CommandWriter
    let publisher: EventPublisher
    let relay: Relay
    let presence: PresenceTracker
    let hub: Hub
    let logger: Logger

    func run() async throws {
        logger.info("Cluster node \(link.nodeId): delivering to and from the other nodes of this database")
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await relay.sendSignals() }
            do {
                try await cancelWhenGracefulShutdown {
                    try await link.run { notice in await handle(notice) }
                }
            } catch is CancellationError {
            } catch {
                logger.error("Cluster link stopped", metadata: ["error": "\(error)"])
            }
            relay.finish()
        }
    }

    private func handle(_ notice: ClusterNotice) async {
        switch notice {
        case .committed(let ranges):
            writer.committedElsewhere(ranges)
        case .signal(let signal):
            relay.apply(signal)
            guard case .deliver(let appId, let uids, let presenceOf, _, let json) = signal,
                let event = try? WireCoding.decode(Event.self, from: Array(json.utf8))
            else { return }
            if presenceOf != nil {
                presence.remoteChange(appId: appId, event)
            } else if event.conversationId != nil {
                publisher.followUpElsewhere(event, recipients: uids)
            }
        case .wentOffline(let users):
            presence.lostWithNode(users)
        case .resumedAfterGap:
            // Commits announced while the channel was down never reached this node: its clients resume elsewhere or
            // here, from the tables, and miss nothing.
            logger.warning("Cluster: notifications were missed; closing this node's sockets so that clients resume")
            hub.closeAll(code: WebSocketCloseCode.serviceRestart, reason: .nodeResync)
        case .rejoined:
            presence.reregister()
        }
    }
}
