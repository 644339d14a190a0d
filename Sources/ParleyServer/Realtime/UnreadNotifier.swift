import Logging
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore
import ServiceLifecycle

/// Pushes `unread.update` to a user's own connections when their unread counts change.
///
/// A count that goes out with the batch that changed it (below) costs a read in a warm transaction and a few bytes in
/// a write made anyway; a push of its own costs a read transaction, a wake-up and a socket write. So pushes with the
/// batch are taken from a budget per user, ``ServerConfiguration/unreadPushBurst`` in a row, earned back at one per
/// ``ServerConfiguration/unreadPushInterval`` (a token bucket, ``PushBudget``), and the user is held for an interval
/// only once it is spent; a push of its own (the notifier's task: a held user's changes, every push on a store without
/// ``UnreadWithBatch``) empties the budget and holds the user, and so does a batch that makes more than
/// ``maxUsersForBurst`` users due (a message to a large group: its members get one push each, as a burst of 1 would).
/// While held, changes are gathered and pushed together when the interval ends. A busy group thus costs each member at
/// most one push of its own per interval, and a member of a quiet conversation gets each count with the message that
/// changed it.
///
/// Pushes go out in batches, written with the hand-written encoder. On a store that reads unread counts with a batch of
/// commands (``UnreadWithBatch``, SQLite), the users a batch makes due are chosen in its transaction, their counts read
/// there, and pushed with the batch's events (``dueWithBatch(_:)``, ``publishingBatch(_:_:)``). Every other push is
/// made by one task (``run()``): the users due are read together (one read transaction on SQLite). The intervals are
/// ``FixedDelayTimers`` (one queue, one sleeping task, ends rounded to 10 ms); when one ends with changes waiting, the
/// user is pushed again. Recording a change costs a lock, not a task or a timer per user.
final class UnreadNotifier: Service {
    struct UserKey: Hashable, Sendable {
        var appId: String
        var uid: String
    }

    /// A user's push budget: `burst` intervals of credit at most, earned back as time passes; a push spends one
    /// interval. Kept in `Duration`s so that an interval's end always earns a whole push back.
    struct PushBudget {
        var credit: Duration
        var last: Duration

        /// Spends one push at `now` (the caller checked that the user is not held); returns whether the budget is
        /// spent, the user then to be held for an interval.
        mutating func spend(now: Duration, interval: Duration, burst: Int) -> Bool {
            if now > last {
                credit = min(credit + (now - last), interval * burst)
                last = now
            }
            credit = max(credit - interval, .zero)
            return credit < interval
        }

        /// Whether the budget is whole again at `now` (it then holds nothing worth keeping).
        func isFull(now: Duration, interval: Duration, burst: Int) -> Bool {
            credit + max(now - last, .zero) >= interval * burst
        }
    }

    struct State {
        /// Conversations whose counts changed and were not pushed yet, per user.
        var dirty: [UserKey: Set<String>] = [:]
        /// Users whose budget is spent, until their interval ends.
        var held: Set<UserKey> = []
        /// Users to push now.
        var ready: [UserKey] = []
        /// Budgets not whole, by user (dropped once whole, see ``sweep(now:interval:burst:)``).
        var budgets: [UserKey: PushBudget] = [:]
        var lastSweep: Duration = .zero

        /// A push to `key` (not held) at `now`: spends its budget, and holds the user when it is spent (the caller
        /// then starts the interval). Returns whether the user is now held.
        mutating func spend(_ key: UserKey, now: Duration, interval: Duration, burst: Int) -> Bool {
            sweep(now: now, interval: interval, burst: burst)
            var budget = budgets[key] ?? PushBudget(credit: interval * burst, last: now)
            let spent = budget.spend(now: now, interval: interval, burst: burst)
            budgets[key] = budget
            if spent { held.insert(key) }
            return spent
        }

        /// A push to `key` that empties its budget: the user is held (the caller starts the interval).
        mutating func hold(_ key: UserKey, now: Duration, interval: Duration, burst: Int) {
            sweep(now: now, interval: interval, burst: burst)
            budgets[key] = PushBudget(credit: .zero, last: now)
            held.insert(key)
        }

        /// Drops the budgets that are whole again (a missing budget is a whole one), at most once per 4 × `burst`
        /// intervals: the map holds the users pushed in the last few seconds, not every user ever pushed.
        private mutating func sweep(now: Duration, interval: Duration, burst: Int) {
            guard now - lastSweep >= interval * max(burst, 1) * 4 else { return }
            lastSweep = now
            budgets = budgets.filter { !$0.value.isFull(now: now, interval: interval, burst: burst) }
        }
    }

    private let store: any ParleyStore
    private let hub: Hub
    private let interval: Duration
    private let burst: Int
    private let logger: Logger
    private let time: ServerClock
    private let state = NIOLockedValueBox(State())
    /// Most users a batch may make due and still push from their budgets. Past it, each user it makes due is held at
    /// once: the first messages to a group of 1,000 read 1,000 counts once, not five times.
    private let maxUsersForBurst: Int
    private let wakeUp = WakeUpSignal()
    /// The running intervals.
    private let holds: FixedDelayTimers<UserKey>
    /// The store's inline reads (SQLite): the notifier's task reads counts on its own thread.
    private let inlineReads: (any InlineReads)?

    /// - Parameters:
    ///   - interval: How long a user whose budget is spent waits for the next push; a push is earned back per interval.
    ///   - burst: Pushes a user may get in a row (at least 1; 1: one push per interval).
    ///   - maxUsersForBurst: Past this many users made due by one batch, each is held at once.
    init(
        store: any ParleyStore, hub: Hub, interval: Duration, burst: Int = 1, maxUsersForBurst: Int = 256,
        time: ServerClock, logger: Logger
    ) {
        self.store = store
        self.hub = hub
        self.interval = interval
        self.burst = max(burst, 1)
        self.maxUsersForBurst = maxUsersForBurst
        self.time = time
        self.logger = logger
        self.holds = FixedDelayTimers(delay: interval, timeline: time.timeline)
        self.inlineReads = store as? any InlineReads
    }

    /// Users whose counts went out with the batch being published on this task (see ``publishingBatch(_:_:)``).
    @TaskLocal private static var pushedWithBatch: Set<UserKey> = []

    /// In the transaction that stores a batch (``UnreadWithBatch``): the users whose counts the batch changes and who
    /// are due now (connected here, budget not spent, no push pending). The push is taken from their budget now, and
    /// their counts are read in the transaction and go out with the batch's events (``publishingBatch(_:_:)``).
    /// Users who are held or pending are left to ``changed(appId:uids:conversationId:)`` when the batch is published,
    /// after its commit, as with any store.
    func dueWithBatch(_ results: [Result<CommandResult, DomainError>]) -> [UnreadRequest] {
        var affected: [(UserKey, String)] = []
        for case .success(let outcome) in results {
            for stored in outcome.events {
                let event = stored.event
                guard let (conversationId, uids) = Self.affected(by: event, recipients: outcome.recipients) else {
                    continue
                }
                affected += uids.map { (UserKey(appId: event.appId, uid: $0), conversationId) }
            }
        }
        guard !affected.isEmpty else { return [] }
        // Most users of a busy group are held: the hub is asked only about the others.
        let candidates = state.withLockedValue { state -> Set<UserKey> in
            var candidates = Set<UserKey>()
            for (key, _) in affected where !state.held.contains(key) && state.dirty[key] == nil {
                candidates.insert(key)
            }
            return candidates
        }
        let connected = candidates.filter { hub.hasConnections(appId: $0.appId, uid: $0.uid) }
        guard !connected.isEmpty else { return [] }
        let now = time.timeline.now()
        let bursting = connected.count <= maxUsersForBurst
        let (taken, held) = state.withLockedValue { state -> ([UserKey: Set<String>], [UserKey]) in
            var taken: [UserKey: Set<String>] = [:]
            var held: [UserKey] = []
            for (key, conversationId) in affected where connected.contains(key) {
                if taken[key] == nil {
                    guard !state.held.contains(key), state.dirty[key] == nil else { continue }
                    if bursting {
                        if state.spend(key, now: now, interval: interval, burst: burst) { held.append(key) }
                    } else {
                        state.hold(key, now: now, interval: interval, burst: burst)
                        held.append(key)
                    }
                }
                taken[key, default: []].insert(conversationId)
            }
            return (taken, held)
        }
        for key in held { holds.schedule(key) }
        return taken.map { UnreadRequest(appId: $0.key.appId, uid: $0.key.uid, conversationIds: $0.value.sorted()) }
    }

    /// Runs `publish`, the publication of a batch the command writer stored, then pushes the counts read with it
    /// (``dueWithBatch(_:)``): they go out in the same flush as the events that changed them. The events' changes for
    /// those users are not recorded again.
    func publishingBatch(_ unread: [(UnreadRequest, UnreadSummary)], _ publish: () async -> Void) async {
        guard !unread.isEmpty else { return await publish() }
        await Self.$pushedWithBatch.withValue(Self.users(unread)) { await publish() }
        deliverWithBatch(unread)
    }

    /// ``publishingBatch(_:_:)`` for a synchronous `publish` (the command writer's thread).
    func publishingBatch(_ unread: [(UnreadRequest, UnreadSummary)], _ publish: () -> Void) {
        guard !unread.isEmpty else { return publish() }
        Self.$pushedWithBatch.withValue(Self.users(unread)) { publish() }
        deliverWithBatch(unread)
    }

    private static func users(_ unread: [(UnreadRequest, UnreadSummary)]) -> Set<UserKey> {
        Set(unread.map { UserKey(appId: $0.0.appId, uid: $0.0.uid) })
    }

    private func deliverWithBatch(_ unread: [(UnreadRequest, UnreadSummary)]) {
        let timestamp = time.epochMilliseconds()
        for (appId, pairs) in Dictionary(grouping: unread, by: { $0.0.appId }) {
            deliver(pairs.map { ($0.0.uid, $0.1) }, appId: appId, timestamp: timestamp)
        }
    }

    /// What a published event changes: the conversation and the users whose unread counts in it moved.
    static func affected(by event: Event, recipients: [String]) -> (conversationId: String, uids: [String])? {
        guard let conversationId = event.conversationId else { return nil }
        switch event.payload {
        case .messageSent:
            let actor = event.context.createdBy
            return (conversationId, recipients.filter { $0 != actor })
        case .messageDeleted(let message):
            // It may have been unread for anyone but its sender.
            return (conversationId, recipients.filter { $0 != message.sender })
        case .messageRead(let receipt):
            return (conversationId, [receipt.uid])
        case .conversationDeleted, .conversationUndeleted:
            return (conversationId, recipients)
        case .participantRemoved(let participant):
            return (conversationId, [participant.uid])
        default:
            return nil
        }
    }

    /// A published event: records the unread counts it changed.
    func published(_ event: Event, recipients: [String]) {
        guard let (conversationId, uids) = Self.affected(by: event, recipients: recipients) else { return }
        changed(appId: event.appId, uids: uids, conversationId: conversationId)
    }

    /// The unread counts of `uids` in a conversation changed: the users due now are pushed by the notifier's task.
    func changed(appId: String, uids: some Sequence<String>, conversationId: String) {
        let pushed = Self.pushedWithBatch
        // Users with no live connection here read their counts when they come back.
        let connected = uids.filter {
            !pushed.contains(UserKey(appId: appId, uid: $0)) && hub.hasConnections(appId: appId, uid: $0)
        }
        guard !connected.isEmpty else { return }
        let ready = state.withLockedValue { state -> Bool in
            var ready = false
            for uid in connected {
                let key = UserKey(appId: appId, uid: uid)
                let isNew = state.dirty[key] == nil
                state.dirty[key, default: []].insert(conversationId)
                if isNew && !state.held.contains(key) {
                    state.ready.append(key)
                    ready = true
                }
            }
            return ready
        }
        if ready { wakeUp.signal() }
    }

    func run() async throws {
        await cancelWhenGracefulShutdown { [self] in
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.holds.run { self.holdEnded($0) } }
                while !Task.isCancelled {
                    let batch = takeBatch()
                    if batch.isEmpty {
                        await wakeUp.wait(orUntil: nil, on: time.timeline)
                    } else {
                        await push(batch)
                    }
                }
                group.cancelAll()
            }
        }
    }

    /// A user's interval ended: changes made meanwhile are pushed now.
    private func holdEnded(_ key: UserKey) {
        let wake = state.withLockedValue { state -> Bool in
            state.held.remove(key)
            guard state.dirty[key] != nil else { return false }
            state.ready.append(key)
            return true
        }
        if wake { wakeUp.signal() }
    }

    /// Takes the users to push now with their changed conversations: pushes of their own, each empties the user's
    /// budget and holds them for an interval.
    private func takeBatch() -> [(UserKey, [String])] {
        let now = time.timeline.now()
        let (batch, held) = state.withLockedValue { state -> ([(UserKey, [String])], [UserKey]) in
            var batch: [(UserKey, [String])] = []
            var held: [UserKey] = []
            for key in state.ready where !state.held.contains(key) {
                guard let conversations = state.dirty.removeValue(forKey: key) else { continue }
                state.hold(key, now: now, interval: interval, burst: burst)
                held.append(key)
                batch.append((key, conversations.sorted()))
            }
            state.ready.removeAll(keepingCapacity: true)
            return (batch, held)
        }
        for key in held { holds.schedule(key) }
        return batch
    }

    /// Reads the counts of a batch of users and pushes them to their connections here (every node computes the
    /// counts of its own users, see ``EventPublisher``).
    private func push(_ batch: [(UserKey, [String])]) async {
        let timestamp = time.epochMilliseconds()
        for (appId, users) in Self.byApp(batch) {
            do {
                var summaries: [UnreadSummary] = []
                if let inlineReads {
                    summaries = try inlineReads.unread(appId: appId, users: users)
                } else {
                    for (uid, conversations) in users {
                        summaries.append(try await store.unread(appId: appId, uid: uid, conversationIds: conversations))
                    }
                }
                deliver(zip(users.map(\.uid), summaries), appId: appId, timestamp: timestamp)
            } catch {
                logger.warning("Unread counts unavailable", metadata: ["error": "\(error)"])
            }
        }
    }

    private static func byApp(_ batch: [(UserKey, [String])]) -> [String: [(uid: String, conversationIds: [String]?)]] {
        Dictionary(grouping: batch, by: { $0.0.appId }).mapValues { users in users.map { ($0.0.uid, $0.1) } }
    }

    private func deliver(_ summaries: some Sequence<(String, UnreadSummary)>, appId: String, timestamp: Int64) {
        for (uid, summary) in summaries {
            guard
                let json = EphemeralEvents.json(
                    appId: appId, actor: nil, timestamp: timestamp, payload: .unreadUpdated(summary)
                )
            else { continue }
            hub.deliver(FrameEncoding.eventFrame(json: json), appId: appId, to: [uid])
        }
    }
}
