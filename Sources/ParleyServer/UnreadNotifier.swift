import Logging
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore

/// Pushes `unread.update` to a user's own connections when their unread counts change.
///
/// The first change is pushed at once; further changes within ``ServerConfiguration/unreadPushInterval`` are
/// gathered and pushed together when it ends, so a busy group costs each member at most one update per interval.
final class UnreadNotifier: Sendable {
    struct UserKey: Hashable, Sendable {
        var appId: String
        var uid: String
    }

    private let store: any ParleyStore
    private let hub: Hub
    private let interval: Duration
    private let timers: KeyedTimers<UserKey>
    private let logger: Logger
    private let time: ServerClock
    /// Conversations whose counts changed since the last push, per user.
    private let dirty = NIOLockedValueBox([UserKey: Set<String>]())

    init(store: any ParleyStore, hub: Hub, interval: Duration, time: ServerClock, logger: Logger) {
        self.store = store
        self.hub = hub
        self.interval = interval
        self.timers = KeyedTimers(timeline: time.timeline)
        self.time = time
        self.logger = logger
    }

    /// The unread counts of `uids` in a conversation changed.
    func changed(appId: String, uids: some Sequence<String>, conversationId: String) {
        for uid in uids {
            let key = UserKey(appId: appId, uid: uid)
            // Users with no live connection read their counts when they come back.
            guard !hub.connections(appId: appId, uid: uid).isEmpty else { continue }
            dirty.withLockedValue { _ = $0[key, default: []].insert(conversationId) }
            if !timers.isScheduled(key) { flush(key) }
        }
    }

    /// Pushes what changed now, then holds further pushes for one interval.
    private func flush(_ key: UserKey) {
        guard let conversations = dirty.withLockedValue({ $0.removeValue(forKey: key) }) else { return }
        timers.schedule(key, at: timers.timeline.now() + interval) { [weak self] in self?.flush(key) }
        Task {
            do {
                let summary = try await store.unread(
                    appId: key.appId, uid: key.uid, conversationIds: Array(conversations)
                )
                // Only this node's connections: every node computes the counts of its own users (see EventPublisher).
                guard
                    let json = EphemeralEvents.json(
                        appId: key.appId, actor: nil, timestamp: time.epochMilliseconds(), payload: .unreadUpdated(summary)
                    )
                else { return }
                hub.deliver(FrameEncoding.eventFrame(json: json), appId: key.appId, to: [key.uid])
            } catch {
                logger.warning("Unread counts unavailable", metadata: ["error": "\(error)"])
            }
        }
    }

    func cancelAll() { timers.cancelAll() }
}
