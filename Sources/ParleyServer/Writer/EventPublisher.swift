import Logging
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore

/// Publishes durable events to this node's connections, each conversation's in sequence order, and what follows from
/// them on this node (a sender's typing stops, unread counts of connected users change).
///
/// Only the ``CommandWriter``'s loop calls it, one batch at a time: the events this node commits, and, with several
/// nodes, the events other nodes committed (``NATSCluster``) and the catch-ups it asks for. With several nodes it
/// keeps, for each conversation the node follows, the last sequence number published here
/// (``ConversationPositions``): events after a gap (another node's commit that NATS has not brought yet, or lost)
/// first publish the missing ones, so a conversation's events reach this node's connections in order, each once. A gap
/// is first waited for (``gapGrace``, ``ReorderBuffer``): another node's commit just before this node's is usually on
/// its way on NATS. One still open when the wait ends is read from the database with its recipients. The events this
/// node commits then go to the other nodes on NATS.
final class EventPublisher: Sendable {
    private let hub: Hub
    private let typing: TypingTracker
    private let unread: UnreadNotifier
    private let relay: Relay
    private let cluster: NATSCluster?
    private let store: (any ClusterStore)?
    let positions: ConversationPositions
    private let metrics: ServerMetrics
    private let logger: Logger
    /// Events read per query when catching up.
    static let pageSize = 500
    /// How long events after a gap wait for the missing ones to arrive on NATS before those are read from the database.
    static let gapGrace: Duration = .milliseconds(50)
    private let reorder = NIOLockedValueBox(ReorderBuffer())
    /// The conversations whose gap is waited for, with several nodes (run by ``ClusterNode``, which hands each that
    /// runs out to the command writer's loop: ``fillGap(_:)``).
    let gapTimers: FixedDelayTimers<ConversationRef>?

    init(
        hub: Hub, typing: TypingTracker, unread: UnreadNotifier, relay: Relay, cluster: NATSCluster?,
        store: (any ClusterStore)?, positions: ConversationPositions, metrics: ServerMetrics = .discarding,
        timeline: Timeline = Timeline(ContinuousClock()), logger: Logger
    ) {
        self.gapTimers = cluster == nil ? nil : FixedDelayTimers(delay: Self.gapGrace, timeline: timeline)
        self.hub = hub
        self.typing = typing
        self.unread = unread
        self.relay = relay
        self.cluster = cluster
        self.store = store
        self.positions = positions
        self.metrics = metrics
        self.logger = logger
    }

    /// Whether this node is the whole deployment: its own commits are all there is to publish, and
    /// ``publish(_:into:)`` publishes them without waiting for anything.
    var isSingleNode: Bool { cluster == nil }

    /// Publishes the events of a command this node applied into the batch's delivery, then, with several nodes, sends
    /// them to the other nodes. On a single node it never suspends.
    func publish(_ result: CommandResult, into delivery: inout BatchDelivery) async {
        guard let cluster else {
            deliver(result.events.map { RoutedEvent(stored: $0, recipients: result.recipients) }, into: &delivery)
            return
        }
        // Events without a sequence number (receipts) are not in the tables: they travel as signals.
        for stored in result.events where stored.event.seq == nil {
            relay.deliver(
                json: stored.json, appId: stored.event.appId, to: result.recipients, into: &delivery.wakeUps)
            followUp(EventFacts(stored.event), recipients: result.recipients, into: &delivery)
        }
        for (conversation, events) in Self.byConversation(result.events) {
            let routed = events.map { RoutedEvent(stored: $0, recipients: result.recipients) }
            await publishInOrder(conversation, routed, into: &delivery)
            cluster.publish(
                conversation,
                [
                    ClusterEventGroup(
                        recipients: result.recipients, events: routed.map { ClusterEvent($0.facts, json: $0.json) })
                ],
                alsoTo: Self.newlyConcerned(events, recipients: result.recipients)
            )
        }
    }

    /// Publishes events of a conversation another node committed.
    func publishRemote(_ conversation: ConversationRef, _ events: [RoutedEvent]) async {
        var delivery = BatchDelivery()
        await publishInOrder(conversation, events, into: &delivery)
        finish(&delivery)
    }

    /// Reads the last sequence number of `conversations` (nil: every one followed) and publishes what this node has
    /// not published of them.
    func sync(_ conversations: [ConversationRef]?) async {
        guard let store else { return }
        let followed = conversations.map { $0.filter { positions.position($0) != nil } } ?? positions.followed
        guard !followed.isEmpty else { return }
        let last: [ConversationRef: Int64]
        do {
            last = try await store.lastSeqs(followed)
        } catch {
            logger.warning(
                "Catching up: the conversations' positions could not be read", metadata: ["error": "\(error)"])
            return
        }
        var delivery = BatchDelivery()
        for conversation in followed {
            guard let through = last[conversation], let position = positions.position(conversation) else { continue }
            if through > position { await catchUp(conversation, after: position, through: through, into: &delivery) }
            // What waited behind a gap this filled.
            if reorder.withLockedValue({ $0.held[conversation] != nil }) {
                await publishInOrder(conversation, [], into: &delivery)
            }
        }
        finish(&delivery)
    }

    /// A gap of `conversation` waited for ``gapGrace`` (``gapTimers``): what is still missing is read from the
    /// database, then what waited behind it is published.
    func fillGap(_ conversation: ConversationRef) async {
        guard positions.position(conversation) != nil else {
            _ = reorder.withLockedValue { $0.takeAll(conversation) }
            return
        }
        var delivery = BatchDelivery()
        await publishInOrder(conversation, [], waiting: false, into: &delivery)
        finish(&delivery)
    }

    /// Ends a batch's publication: the unread counts its events moved are pushed (those of users due now; the others
    /// wait for their interval or a read), then every writer the batch reached is woken, once.
    func finish(_ delivery: inout BatchDelivery) {
        if delivery.unreadDue { unread.pushDue(into: &delivery.wakeUps) }
        delivery.wakeUps.run()
    }

    /// The unread counts read with a batch (``UnreadNotifier/dueWithBatch(_:)``), after its events: they go out in
    /// the same flush.
    func deliverCounts(_ unread: [(UnreadRequest, UnreadSummary)], into delivery: inout BatchDelivery) {
        self.unread.deliverWithBatch(unread, into: &delivery.wakeUps)
    }

    /// In the transaction that stores a batch: the users whose unread counts to read with it.
    func unreadDue(_ results: [Result<CommandResult, DomainError>]) -> [UnreadRequest] {
        unread.dueWithBatch(results)
    }

    /// What follows on this node from an event another node delivered as a signal (a receipt).
    func followUpElsewhere(_ event: Event, recipients: [String]) {
        var delivery = BatchDelivery()
        followUp(EventFacts(event), recipients: recipients, into: &delivery)
        finish(&delivery)
    }

    /// Publishes a conversation's events (ascending) after the last one published here: what this node published
    /// already is left out, and events after a gap wait for the missing ones (``ReorderBuffer``) until ``gapGrace``
    /// has passed; then (`waiting` false) the gap is read from the database first.
    private func publishInOrder(
        _ conversation: ConversationRef, _ events: [RoutedEvent], waiting: Bool = true,
        into delivery: inout BatchDelivery
    ) async {
        guard var position = positions.position(conversation) else {
            deliver(events, into: &delivery)
            return
        }
        var adding = events
        while true {
            let (ready, gapBefore, hadHeld) = reorder.withLockedValue { [adding] buffer in
                let hadHeld = buffer.held[conversation] != nil
                let (ready, gapBefore) = buffer.take(conversation, after: position, adding: adding)
                return (ready, gapBefore, hadHeld)
            }
            adding = []
            deliver(ready, into: &delivery)
            guard let gapBefore else {
                // A gap waited for is filled: its timer goes (no timer otherwise, and no lock taken for one).
                if hadHeld { gapTimers?.cancel(conversation) }
                return
            }
            if waiting, let gapTimers {
                if !gapTimers.isScheduled(conversation) { gapTimers.schedule(conversation) }
                return
            }
            let after = positions.position(conversation) ?? position
            await catchUp(conversation, after: after, through: gapBefore - 1, into: &delivery)
            guard let caughtUp = positions.position(conversation), caughtUp >= gapBefore - 1 else {
                // Not read (the database is unavailable, or the conversation is no longer followed here): what waits
                // is published past the gap, as clients find a gap by sequence number and resume over it.
                deliver(reorder.withLockedValue { $0.takeAll(conversation) }, into: &delivery)
                gapTimers?.cancel(conversation)
                return
            }
            position = caughtUp
        }
    }

    /// Reads events `after < seq <= through` with their recipients and publishes them.
    private func catchUp(
        _ conversation: ConversationRef, after: Int64, through: Int64, into delivery: inout BatchDelivery
    ) async {
        guard let store else { return }
        var position = after
        while position < through {
            let page: [RoutedEvent]
            do {
                page = try await store.routedEvents(
                    appId: conversation.appId, conversationId: conversation.conversationId, afterSeq: position,
                    throughSeq: through, limit: Self.pageSize
                )
            } catch {
                // The next sync (the sweep, at the latest) tries again; clients also see the gap by sequence number.
                logger.warning(
                    "Events of another node could not be read",
                    metadata: ["conversation": "\(conversation.conversationId)", "error": "\(error)"]
                )
                return
            }
            guard let last = page.last?.facts.seq else { return }
            metrics.clusterEventsRead.increment(by: page.count)
            deliver(page, into: &delivery)
            position = last
        }
    }

    /// Delivers events in order. A run of events of one app with the same recipients (a command's events share its
    /// recipients) is delivered in one go: the recipients' connections are looked up once for the run.
    private func deliver(_ events: [RoutedEvent], into delivery: inout BatchDelivery) {
        var start = events.startIndex
        while start < events.endIndex {
            let first = events[start]
            var end = start + 1
            while end < events.endIndex, events[end].facts.appId == first.facts.appId,
                events[end].recipients == first.recipients
            {
                end += 1
            }
            let run = events[start..<end]
            hub.deliver(
                run.map { FrameEncoding.eventFrame(json: $0.json) }, appId: first.facts.appId,
                to: first.recipients, into: &delivery.wakeUps
            )
            for routed in run {
                followUp(routed.facts, recipients: routed.recipients, into: &delivery)
                if let cluster { follow(routed, cluster) }
            }
            start = end
        }
    }

    /// With several nodes: records the event's position, and what it changes in the conversations this node follows.
    private func follow(_ routed: RoutedEvent, _ cluster: NATSCluster) {
        let facts = routed.facts
        guard let conversationId = facts.conversationId, let seq = facts.seq else { return }
        positions.advance(ConversationRef(appId: facts.appId, conversationId: conversationId), to: seq)
        switch facts.kind {
        case .participantAdded(let uid):
            cluster.joined(UserKey(appId: facts.appId, uid: uid), conversationId: conversationId, position: seq)
        case .conversationCreated:
            for uid in routed.recipients {
                cluster.joined(UserKey(appId: facts.appId, uid: uid), conversationId: conversationId, position: seq)
            }
        case .participantRemoved(let uid):
            cluster.left(UserKey(appId: facts.appId, uid: uid), conversationId: conversationId)
        default:
            break
        }
    }

    /// What follows from an event on this node: a sender stops typing; unread counts change (pushed to the users
    /// connected here when the batch ends, ``finish(_:)``; every node does this for its own users), but for the users
    /// counted with the batch.
    private func followUp(_ facts: EventFacts, recipients: [String], into delivery: inout BatchDelivery) {
        if case .messageSent = facts.kind, let conversationId = facts.conversationId, let actor = facts.actor {
            typing.messageSent(appId: facts.appId, conversationId: conversationId, sender: actor)
        }
        if unread.published(facts, recipients: recipients, countedWithBatch: delivery.countedWithBatch) {
            delivery.unreadDue = true
        }
    }

    /// The stored events (with a sequence number) of each conversation, in the order the conversations first appear.
    static func byConversation(_ events: [StoredEvent]) -> [(ConversationRef, [StoredEvent])] {
        var groups: [(ConversationRef, [StoredEvent])] = []
        for stored in events {
            guard let conversationId = stored.event.conversationId, stored.event.seq != nil else { continue }
            let key = ConversationRef(appId: stored.event.appId, conversationId: conversationId)
            if let index = groups.firstIndex(where: { $0.0 == key }) {
                groups[index].1.append(stored)
            } else {
                groups.append((key, [stored]))
            }
        }
        return groups
    }

    /// Users that events make participants, ban or unban: their nodes may not follow the conversation yet.
    static func newlyConcerned(_ events: [StoredEvent], recipients: [String]) -> [String] {
        var users: [String] = []
        for stored in events {
            switch stored.event.payload {
            case .conversationCreated: users += recipients
            case .participantAdded(let participant): users.append(participant.uid)
            case .participantBanned(let ban), .participantUnbanned(let ban): users.append(ban.uid)
            default: break
            }
        }
        return users
    }
}
