import Logging
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore

/// Publishes durable events to this node's connections, each conversation's in sequence order, and what follows from
/// them on this node (a sender's typing stops, unread counts of connected users change).
///
/// Only the ``CommandWriter``'s loop calls it, one batch at a time: the events this node commits, and the wake-ups
/// for events other nodes committed. With several nodes it remembers, per conversation, the last sequence number it
/// published; events that arrive after a gap (another node's commit whose wake-up is still on its way) first publish
/// the missing ones, read from the tables with their recipients, so a conversation's events reach this node's
/// connections in order, each once.
final class EventPublisher: Sendable {
    private let hub: Hub
    private let typing: TypingTracker
    private let unread: UnreadNotifier
    private let relay: Relay
    private let link: (any ClusterLink)?
    private let logger: Logger
    /// The last sequence number published, per conversation (only with a cluster link).
    private let published = NIOLockedValueBox([ConversationKey: Int64]())
    /// Remembered conversations; past this many the map starts again (gaps are then caught by the clients' resume).
    static let maxRemembered = 200_000
    /// Events read per query when catching up.
    static let pageSize = 500

    struct ConversationKey: Hashable, Sendable {
        var appId: String
        var conversationId: String
    }

    init(
        hub: Hub, typing: TypingTracker, unread: UnreadNotifier, relay: Relay, link: (any ClusterLink)?, logger: Logger
    ) {
        self.hub = hub
        self.typing = typing
        self.unread = unread
        self.relay = relay
        self.link = link
        self.logger = logger
    }

    /// Whether this node is the whole deployment (no cluster link): its own commits are all there is to publish, and
    /// ``publishLocally(_:)`` publishes them without waiting for anything.
    var isSingleNode: Bool { link == nil }

    /// Publishes the events of a command this node applied, on a single node (``isSingleNode``).
    func publishLocally(_ result: CommandResult) {
        precondition(link == nil, "EventPublisher.publishLocally: only a single node publishes without the tables")
        deliver(result.events.map { RoutedEvent(stored: $0, recipients: result.recipients) })
    }

    /// Publishes the events of a command this node applied.
    func publish(_ result: CommandResult) async {
        guard link != nil else {
            publishLocally(result)
            return
        }
        // Events without a sequence number (receipts) are not in the tables: they travel as signals.
        for stored in result.events where stored.event.seq == nil {
            relay.deliver(json: stored.json, appId: stored.event.appId, to: result.recipients)
            followUp(stored.event, recipients: result.recipients)
        }
        for range in CommittedRange.of(result.events) {
            let key = ConversationKey(appId: range.appId, conversationId: range.conversationId)
            if let last = lastPublished(key), last + 1 < range.fromSeq {
                await catchUp(key, after: last, through: range.fromSeq - 1)
            }
            let after = lastPublished(key) ?? 0
            let fresh = result.events.filter {
                $0.event.appId == range.appId && $0.event.conversationId == range.conversationId
                    && ($0.event.seq ?? 0) > after
            }
            deliver(fresh.map { RoutedEvent(stored: $0, recipients: result.recipients) })
            record(key, range.throughSeq)
        }
    }

    /// Runs `publish`, the publication of one batch the command writer stored; the unread counts read with the batch
    /// (``UnreadNotifier/dueWithBatch(_:)``) go out at its end, in the same flush as its events.
    func publishingBatch(_ unread: [(UnreadRequest, UnreadSummary)], _ publish: () async -> Void) async {
        await self.unread.publishingBatch(unread, publish)
    }

    /// ``publishingBatch(_:_:)`` for a synchronous `publish` (the command writer's thread, single node).
    func publishingBatch(_ unread: [(UnreadRequest, UnreadSummary)], _ publish: () -> Void) {
        self.unread.publishingBatch(unread, publish)
    }

    /// In the transaction that stores a batch: the users whose unread counts to read with it.
    func unreadDue(_ results: [Result<CommandResult, DomainError>]) -> [UnreadRequest] {
        unread.dueWithBatch(results)
    }

    /// Publishes what other nodes committed.
    func publishCommitted(_ ranges: [CommittedRange]) async {
        for range in ranges {
            let key = ConversationKey(appId: range.appId, conversationId: range.conversationId)
            let after = lastPublished(key) ?? range.fromSeq - 1
            if after < range.throughSeq { await catchUp(key, after: after, through: range.throughSeq) }
        }
    }

    /// Reads events `after < seq <= through` with their recipients and publishes them.
    private func catchUp(_ key: ConversationKey, after: Int64, through: Int64) async {
        guard let link else { return }
        var position = after
        while position < through {
            let page: [RoutedEvent]
            do {
                page = try await link.routedEvents(
                    appId: key.appId, conversationId: key.conversationId, afterSeq: position, throughSeq: through,
                    limit: Self.pageSize
                )
            } catch {
                // The clients see the gap by sequence number and fetch what is missing themselves.
                logger.warning(
                    "Events of another node could not be read",
                    metadata: ["conversation": "\(key.conversationId)", "error": "\(error)"]
                )
                return
            }
            guard let last = page.last?.stored.event.seq else { return }
            deliver(page)
            record(key, last)
            position = last
        }
    }

    /// What follows on this node from an event another node delivered as a signal (a receipt).
    func followUpElsewhere(_ event: Event, recipients: [String]) {
        followUp(event, recipients: recipients)
    }

    private func lastPublished(_ key: ConversationKey) -> Int64? {
        published.withLockedValue { $0[key] }
    }

    private func record(_ key: ConversationKey, _ seq: Int64) {
        published.withLockedValue { published in
            if published.count >= Self.maxRemembered, published[key] == nil {
                published.removeAll(keepingCapacity: true)
            }
            published[key] = max(published[key] ?? 0, seq)
        }
    }

    /// Delivers events in order. A run of events of one app with the same recipients (a command's events share its
    /// recipients) is delivered in one go: the recipients' connections are looked up once for the run.
    private func deliver(_ events: [RoutedEvent]) {
        var start = events.startIndex
        while start < events.endIndex {
            let first = events[start]
            var end = start + 1
            while end < events.endIndex, events[end].stored.event.appId == first.stored.event.appId,
                events[end].recipients == first.recipients
            {
                end += 1
            }
            let run = events[start..<end]
            hub.deliver(
                run.map { FrameEncoding.eventFrame(json: $0.stored.json) }, appId: first.stored.event.appId,
                to: first.recipients
            )
            for routed in run { followUp(routed.stored.event, recipients: routed.recipients) }
            start = end
        }
    }

    /// What follows from an event on this node: a sender stops typing; unread counts change (pushed to the users
    /// connected here; every node does this for its own users).
    private func followUp(_ event: Event, recipients: [String]) {
        if case .messageSent = event.payload, let conversationId = event.conversationId,
            let actor = event.context.createdBy
        {
            typing.messageSent(appId: event.appId, conversationId: conversationId, sender: actor)
        }
        unread.published(event, recipients: recipients)
    }
}
