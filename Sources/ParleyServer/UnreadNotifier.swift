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
/// read transaction on SQLite) and written with the hand-written encoder. Users whose interval is still running wait
/// in a queue ordered by the end of their interval (all intervals are equally long, so arrival order is end order);
/// the task sleeps until the first of them ends or new work arrives. Recording a change costs a lock, not a task or a
/// timer per user.
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
        /// When each hold ends (timeline time), in order.
        var holds = FIFO<(until: Duration, key: UserKey)>()
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

    init(store: any ParleyStore, hub: Hub, interval: Duration, time: ServerClock, logger: Logger) {
        self.store = store
        self.hub = hub
        self.interval = interval
        self.time = time
        self.logger = logger
    }

    /// The unread counts of `uids` in a conversation changed.
    func changed(appId: String, uids: some Sequence<String>, conversationId: String) {
        // Users with no live connection here read their counts when they come back.
        let connected = uids.filter { hub.hasConnections(appId: appId, uid: $0) }
        guard !connected.isEmpty else { return }
        let wake = state.withLockedValue { state -> Bool in
            var wake = false
            for uid in connected {
                let key = UserKey(appId: appId, uid: uid)
                let isNew = state.dirty[key] == nil
                state.dirty[key, default: []].insert(conversationId)
                if isNew && !state.held.contains(key) {
                    state.ready.append(key)
                    wake = true
                }
            }
            return wake
        }
        if wake { wakeUp.signal() }
    }

    func run() async throws {
        await cancelWhenGracefulShutdown { [self] in
            while !Task.isCancelled {
                let (batch, nextHoldEnd) = takeBatch(now: time.timeline.now())
                if !batch.isEmpty {
                    await push(batch)
                    continue
                }
                await wakeUp.wait(orUntil: nextHoldEnd, on: time.timeline)
            }
        }
    }

    /// Ends the holds that are over (their users are pushed now if they changed meanwhile), and takes the users to
    /// push now with their changed conversations, holding each for an interval. Returns when the next hold ends.
    private func takeBatch(now: Duration) -> ([(UserKey, [String])], Duration?) {
        state.withLockedValue { state in
            while let first = state.holds.first, first.until <= now {
                state.holds.removeFirst()
                state.held.remove(first.key)
                if state.dirty[first.key] != nil { state.ready.append(first.key) }
            }
            var batch: [(UserKey, [String])] = []
            for key in state.ready where !state.held.contains(key) {
                guard let conversations = state.dirty.removeValue(forKey: key) else { continue }
                state.held.insert(key)
                state.holds.append((now + interval, key))
                batch.append((key, conversations.sorted()))
            }
            state.ready.removeAll(keepingCapacity: true)
            return (batch, state.holds.first?.until)
        }
    }

    /// Reads the counts of a batch of users and pushes them to their connections here (every node computes the
    /// counts of its own users, see ``EventPublisher``).
    private func push(_ batch: [(UserKey, [String])]) async {
        let timestamp = time.epochMilliseconds()
        for (appId, users) in Dictionary(grouping: batch, by: { $0.0.appId }) {
            let summaries: [UnreadSummary]
            do {
                if let inline = store as? any InlineReads {
                    summaries = try inline.unread(appId: appId, users: users.map { ($0.0.uid, $0.1) })
                } else {
                    var read: [UnreadSummary] = []
                    for (key, conversations) in users {
                        read.append(try await store.unread(appId: appId, uid: key.uid, conversationIds: conversations))
                    }
                    summaries = read
                }
            } catch {
                logger.warning("Unread counts unavailable", metadata: ["error": "\(error)"])
                continue
            }
            for ((key, _), summary) in zip(users, summaries) {
                guard
                    let json = EphemeralEvents.json(
                        appId: appId, actor: nil, timestamp: timestamp, payload: .unreadUpdated(summary)
                    )
                else { continue }
                hub.deliver(FrameEncoding.eventFrame(json: json), appId: appId, to: [key.uid])
            }
        }
    }
}
