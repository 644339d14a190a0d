import Logging
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore
import ServiceLifecycle

/// Typing indicators: ephemeral, never stored.
///
/// A `typing` frame with `isTyping: true` starts an indicator (`conversation.participantTyping` to the other
/// participants) or, while it is on, only extends it. It stops (`participantTypingOff`) when the client says so,
/// when the user sends a message, when the user stays silent for ``ServerConfiguration/typingTimeout``, or when the
/// connection that started it closes. Changes are handled one at a time, in order, by ``run()``.
final class TypingTracker: Service {
    struct Key: Hashable, Sendable {
        var appId: String
        var conversationId: String
        var uid: String
    }

    private enum Change: Sendable {
        case typing(Key, ServerConnection, isTyping: Bool)
        case expired(Key)
        case messageSent(Key)
        case connectionClosed(ServerConnection)
    }

    private let store: any ParleyStore
    private let relay: Relay
    private let timeout: Duration
    private let timers: FixedDelayTimers<Key>
    private let logger: Logger
    private let time: ServerClock
    private let changes: AsyncStream<Change>
    private let sink: AsyncStream<Change>.Continuation
    /// Active indicators and the connection that started each; only `run()` touches it after start.
    private let active = NIOLockedValueBox([Key: String]())

    init(store: any ParleyStore, relay: Relay, timeout: Duration, time: ServerClock, logger: Logger) {
        self.store = store
        self.relay = relay
        self.timeout = timeout
        self.timers = FixedDelayTimers(delay: timeout, timeline: time.timeline)
        self.time = time
        self.logger = logger
        (changes, sink) = AsyncStream.makeStream(of: Change.self)
    }

    func typing(conversationId: String, isTyping: Bool, on connection: ServerConnection) {
        let key = Key(appId: connection.principal.appId, conversationId: conversationId, uid: connection.principal.uid)
        sink.yield(.typing(key, connection, isTyping: isTyping))
    }

    func messageSent(appId: String, conversationId: String, sender: String) {
        sink.yield(.messageSent(Key(appId: appId, conversationId: conversationId, uid: sender)))
    }

    func connectionClosed(_ connection: ServerConnection) {
        sink.yield(.connectionClosed(connection))
    }

    func run() async throws {
        await timers.runInOrder(changes, sink: sink, expired: { .expired($0) }) { await handle($0) }
    }

    private func handle(_ change: Change) async {
        switch change {
        case .typing(let key, let connection, let isTyping):
            let isActive = active.withLockedValue { $0[key] != nil }
            if isTyping && isActive {
                scheduleExpiry(key)
                return
            }
            guard isTyping || isActive else { return }
            guard let participants = await participants(of: key), participants.contains(key.uid) else {
                connection.push(
                    FrameEncoding.frame(
                        .error(ErrorFrame(code: .conversationNotFound, message: "No conversation \(key.conversationId) visible to you."))
                    )
                )
                return
            }
            if isTyping {
                active.withLockedValue { $0[key] = connection.id }
                scheduleExpiry(key)
                publish(key, on: true, to: participants)
            } else {
                await stop(key, knownParticipants: participants)
            }
        case .expired(let key), .messageSent(let key):
            await stop(key, knownParticipants: nil)
        case .connectionClosed(let connection):
            let keys = active.withLockedValue { active in active.filter { $0.value == connection.id }.map(\.key) }
            for key in keys { await stop(key, knownParticipants: nil) }
        }
    }

    private func stop(_ key: Key, knownParticipants: [String]?) async {
        guard active.withLockedValue({ $0.removeValue(forKey: key) }) != nil else { return }
        timers.cancel(key)
        var participants = knownParticipants
        if participants == nil { participants = await self.participants(of: key) }
        if let participants { publish(key, on: false, to: participants) }
    }

    private func scheduleExpiry(_ key: Key) {
        timers.schedule(key)
    }

    private func participants(of key: Key) async -> [String]? {
        do {
            return try await store.activeParticipants(appId: key.appId, conversationId: key.conversationId)
        } catch {
            logger.warning("Typing: participants unavailable", metadata: ["error": "\(error)"])
            return nil
        }
    }

    private func publish(_ key: Key, on: Bool, to participants: [String]) {
        let indicator = TypingIndicator(uid: key.uid)
        relay.deliver(
            appId: key.appId, conversationId: key.conversationId, actor: key.uid, timestamp: time.epochMilliseconds(),
            payload: on ? .participantTyping(indicator) : .participantTypingOff(indicator),
            to: participants.filter { $0 != key.uid }
        )
    }
}
