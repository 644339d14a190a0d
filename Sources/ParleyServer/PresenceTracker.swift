import Logging
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore
import ServiceLifecycle

/// Online/offline state of users, from their live connections.
///
/// A user is online from their first connection; when their last connection closes they stay online for
/// ``ServerConfiguration/presenceGrace`` and only then go offline, so a client that reconnects quickly does not make
/// presence flap. Changes (`presence.update`) go to the users who share a conversation with them and to the
/// connections that subscribed to every user's presence. Handled one at a time, in order, by ``run()``.
final class PresenceTracker: Service {
    struct UserKey: Hashable, Sendable {
        var appId: String
        var uid: String
    }

    private enum Change: Sendable {
        case connected(UserKey)
        case expired(UserKey)
    }

    private struct State {
        var connections: [UserKey: Int] = [:]
        var online: Set<UserKey> = []
        var lastSeen: [UserKey: Int64] = [:]
    }

    private let store: any ParleyStore
    private let hub: Hub
    private let grace: Duration
    private let timers: KeyedTimers<UserKey>
    private let logger: Logger
    private let time: ServerClock
    private let state = NIOLockedValueBox(State())
    private let changes: AsyncStream<Change>
    private let sink: AsyncStream<Change>.Continuation

    init(store: any ParleyStore, hub: Hub, grace: Duration, time: ServerClock, logger: Logger) {
        self.store = store
        self.hub = hub
        self.grace = grace
        self.timers = KeyedTimers(timeline: time.timeline)
        self.time = time
        self.logger = logger
        (changes, sink) = AsyncStream.makeStream(of: Change.self)
    }

    func connected(_ connection: ServerConnection) {
        let key = UserKey(appId: connection.principal.appId, uid: connection.principal.uid)
        state.withLockedValue { $0.connections[key, default: 0] += 1 }
        sink.yield(.connected(key))
    }

    func disconnected(_ connection: ServerConnection) {
        let key = UserKey(appId: connection.principal.appId, uid: connection.principal.uid)
        let last = state.withLockedValue { state -> Bool in
            let remaining = (state.connections[key] ?? 1) - 1
            state.connections[key] = remaining > 0 ? remaining : nil
            return remaining <= 0
        }
        guard last else { return }
        let sink = self.sink
        timers.schedule(key, at: timers.timeline.now() + grace) { sink.yield(.expired(key)) }
    }

    /// A user's presence now.
    func presence(appId: String, uid: String) -> Presence {
        let key = UserKey(appId: appId, uid: uid)
        return state.withLockedValue { state in
            let online = state.online.contains(key) || state.connections[key] != nil
            return Presence(uid: uid, online: online, lastSeenAt: online ? nil : state.lastSeen[key])
        }
    }

    func run() async throws {
        await withGracefulShutdownHandler {
            for await change in changes {
                await handle(change)
            }
        } onGracefulShutdown: {
            self.sink.finish()
        }
        timers.cancelAll()
    }

    private func handle(_ change: Change) async {
        switch change {
        case .connected(let key):
            // Back within the grace period: no offline, no new online.
            timers.cancel(key)
            let cameOnline = state.withLockedValue { state in state.online.insert(key).inserted }
            if cameOnline { await publish(Presence(uid: key.uid, online: true), of: key) }
        case .expired(let key):
            let now = time.epochMilliseconds()
            let wentOffline = state.withLockedValue { state -> Bool in
                guard state.connections[key] == nil, state.online.remove(key) != nil else { return false }
                state.lastSeen[key] = now
                return true
            }
            if wentOffline { await publish(Presence(uid: key.uid, online: false, lastSeenAt: now), of: key) }
        }
    }

    private func publish(_ presence: Presence, of key: UserKey) async {
        let contacts: [String]
        do {
            contacts = try await store.contacts(appId: key.appId, uid: key.uid)
        } catch {
            logger.warning("Presence: contacts unavailable", metadata: ["error": "\(error)"])
            contacts = []
        }
        guard
            let frame = EphemeralEvents.frame(
                appId: key.appId, actor: key.uid, timestamp: time.epochMilliseconds(), payload: .presenceUpdated(presence)
            )
        else { return }
        var reached = Set<ObjectIdentifier>()
        for connection in contacts.flatMap({ hub.connections(appId: key.appId, uid: $0) })
            + hub.presenceSubscribers(appId: key.appId)
        where connection.principal.uid != key.uid && reached.insert(ObjectIdentifier(connection)).inserted {
            connection.outbound.push(frame)
        }
    }
}
