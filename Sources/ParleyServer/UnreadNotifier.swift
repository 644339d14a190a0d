import Logging
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore
import ServiceLifecycle

/// Pushes `unread.update` to a user's own connections when their unread counts change.
///
/// The first change is pushed at once; further changes within ``ServerConfiguration/unreadPushInterval`` are
/// gathered and pushed together when it ends, so a busy group costs each member at most one update per interval.
///
/// One task (``run()``) does every push, in batches: the users whose counts must go out now are read together (one
/// read transaction on SQLite) and written with the hand-written encoder. The intervals are ``FixedDelayTimers`` (one
/// queue, one sleeping task, ends rounded to 10 ms); when one ends with changes waiting, the user is pushed again.
/// Recording a change costs a lock, not a task or a timer per user.
final class UnreadNotifier: Service {
    struct UserKey: Hashable, Sendable {
        var appId: String
        var uid: String
    }

    private struct State {
        /// Conversations whose counts changed and were not pushed yet, per user.
        var dirty: [UserKey: Set<String>] = [:]
        /// Users pushed less than an interval ago.
        var held: Set<UserKey> = []
        /// Users to push now.
        var ready: [UserKey] = []
    }

    private let store: any ParleyStore
    private let hub: Hub
    private let interval: Duration
    private let logger: Logger
    private let time: ServerClock
    private let state = NIOLockedValueBox(State())
    private let wakeUp = WakeUpSignal()
    /// The running intervals.
    private let holds: FixedDelayTimers<UserKey>
    /// The store's inline reads (SQLite): counts are then read on the publishing task, at the end of each batch.
    private let inlineReads: (any InlineReads)?

    init(store: any ParleyStore, hub: Hub, interval: Duration, time: ServerClock, logger: Logger) {
        self.store = store
        self.hub = hub
        self.interval = interval
        self.time = time
        self.logger = logger
        self.holds = FixedDelayTimers(delay: interval, timeline: time.timeline)
        self.inlineReads = store as? any InlineReads
    }

    /// The notifier collecting the batch being published on this task (see ``collectingBatch(_:)``).
    @TaskLocal private static var collecting: ObjectIdentifier?

    /// Runs `publish` (the publication of one batch the command writer stored), then, on a store with inline reads,
    /// pushes at once the users whose counts it changed: their updates then go out in the same flush as the events
    /// that caused them. Without inline reads the notifier's task pushes them, as for any other change.
    func collectingBatch(_ publish: () async -> Void) async {
        guard let inlineReads else { return await publish() }
        await Self.$collecting.withValue(ObjectIdentifier(self)) { await publish() }
        push(takeBatch(), with: inlineReads)
    }

    /// The unread counts of `uids` in a conversation changed.
    ///
    /// The users due now are pushed by the notifier's task, or at the end of the batch being collected
    /// (``collectingBatch(_:)``).
    func changed(appId: String, uids: some Sequence<String>, conversationId: String) {
        // Users with no live connection here read their counts when they come back.
        let connected = uids.filter { hub.hasConnections(appId: appId, uid: $0) }
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
        if ready && Self.collecting != ObjectIdentifier(self) { wakeUp.signal() }
    }

    /// Pushes `batch` now, on this task.
    private func push(_ batch: [(UserKey, [String])], with inlineReads: any InlineReads) {
        guard !batch.isEmpty else { return }
        let timestamp = time.epochMilliseconds()
        for (appId, users) in Self.byApp(batch) {
            do {
                let summaries = try inlineReads.unread(appId: appId, users: users)
                deliver(zip(users.map(\.uid), summaries), appId: appId, timestamp: timestamp)
            } catch {
                logger.warning("Unread counts unavailable", metadata: ["error": "\(error)"])
            }
        }
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

    /// Takes the users to push now with their changed conversations, holding each for an interval.
    private func takeBatch() -> [(UserKey, [String])] {
        let batch = state.withLockedValue { state -> [(UserKey, [String])] in
            var batch: [(UserKey, [String])] = []
            for key in state.ready where !state.held.contains(key) {
                guard let conversations = state.dirty.removeValue(forKey: key) else { continue }
                state.held.insert(key)
                batch.append((key, conversations.sorted()))
            }
            state.ready.removeAll(keepingCapacity: true)
            return batch
        }
        for (key, _) in batch { holds.schedule(key) }
        return batch
    }

    /// Reads the counts of a batch of users and pushes them to their connections here (every node computes the
    /// counts of its own users, see ``EventPublisher``).
    private func push(_ batch: [(UserKey, [String])]) async {
        if let inlineReads { return push(batch, with: inlineReads) }
        let timestamp = time.epochMilliseconds()
        for (appId, users) in Self.byApp(batch) {
            do {
                var summaries: [UnreadSummary] = []
                for (uid, conversations) in users {
                    summaries.append(try await store.unread(appId: appId, uid: uid, conversationIds: conversations))
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
