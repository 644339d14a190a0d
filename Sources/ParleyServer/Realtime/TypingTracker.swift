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
    private let metrics: ServerMetrics
    private let time: ServerClock
    private let changes: AsyncStream<Change>
    private let sink: AsyncStream<Change>.Continuation
    /// What may stop an indicator; ``messageSent(appId:conversationId:sender:)`` and
    /// ``connectionClosed(_:)`` pass nothing to ``run()`` when there is nothing to stop.
    /// An indicator that is on: the connection that started it, and the users it came on for.
    private struct Indicator {
        var connection: String
        var audience: [String]
    }

    private struct Indicators {
        /// Active indicators; changed only by `run()`.
        var active: [Key: Indicator] = [:]
        /// `typing` changes with `isTyping` passed to `run()` and not handled yet, per key: while one is pending, the
        /// indicator may come on.
        var pendingOn: [Key: Int] = [:]
    }

    private let indicators = NIOLockedValueBox(Indicators())

    /// Indicators on now, and typing changes not handled yet (``ServerSnapshot``).
    var counts: (active: Int, pending: Int) {
        indicators.withLockedValue { ($0.active.count, $0.pendingOn.count) }
    }

    init(
        store: any ParleyStore, relay: Relay, timeout: Duration, time: ServerClock,
        metrics: ServerMetrics = .discarding, logger: Logger
    ) {
        self.metrics = metrics
        self.store = store
        self.relay = relay
        self.timeout = timeout
        self.timers = FixedDelayTimers(delay: timeout, timeline: time.timeline)
        self.time = time
        self.logger = logger
        (changes, sink) = AsyncStream.makeStream(of: Change.self)
    }

    func typing(conversationId: String, isTyping: Bool, on connection: ServerConnection) {
        metrics.typingEvents.increment()
        let key = Key(appId: connection.principal.appId, conversationId: conversationId, uid: connection.principal.uid)
        // Counted before it is passed on: a message sent after this sees that the indicator may be on.
        if isTyping { indicators.withLockedValue { $0.pendingOn[key, default: 0] += 1 } }
        sink.yield(.typing(key, connection, isTyping: isTyping))
    }

    /// A message was sent: the sender's indicator in the conversation stops. Called for every message (by the command
    /// writer), so it passes nothing on when the indicator is neither on nor about to come on: most messages are sent
    /// without one, and waking the tracker's task for each cost the writer 7% of its time.
    func messageSent(appId: String, conversationId: String, sender: String) {
        let key = Key(appId: appId, conversationId: conversationId, uid: sender)
        guard indicators.withLockedValue({ $0.active[key] != nil || $0.pendingOn[key] != nil }) else { return }
        sink.yield(.messageSent(key))
    }

    func connectionClosed(_ connection: ServerConnection) {
        guard indicators.withLockedValue({ !$0.active.isEmpty || !$0.pendingOn.isEmpty }) else { return }
        sink.yield(.connectionClosed(connection))
    }

    func run() async throws {
        await timers.runInOrder(changes, sink: sink, expired: { .expired($0) }, handle: { await handle($0) })
    }

    private func handle(_ change: Change) async {
        switch change {
        case .typing(let key, let connection, let isTyping):
            // Once handled (the indicator is on, or was refused), it is no longer pending.
            defer { if isTyping { handledOn(key) } }
            let isActive = indicators.withLockedValue { $0.active[key] != nil }
            if isTyping && isActive {
                scheduleExpiry(key)
                return
            }
            guard isTyping || isActive else { return }
            if !isTyping {
                stop(key)
                return
            }
            guard let participants = await participants(of: key), participants.contains(key.uid) else {
                connection.push(
                    FrameEncoding.frame(
                        .error(
                            ErrorFrame(
                                code: .conversationNotFound,
                                message: "No conversation \(key.conversationId) visible to you."))
                    )
                )
                return
            }
            // A muted participant does not type.
            if (try? await store.isMuted(
                appId: key.appId, conversationId: key.conversationId, uid: key.uid, now: time.epochMilliseconds()
            )) == true {
                let refusal = Safety.mutedRefusal(until: nil)
                connection.push(FrameEncoding.frame(.error(ErrorFrame(code: refusal.code, message: refusal.message))))
                return
            }
            let audience = participants.filter { $0 != key.uid }
            indicators.withLockedValue { $0.active[key] = Indicator(connection: connection.id, audience: audience) }
            scheduleExpiry(key)
            publish(key, on: true, to: audience)
        case .expired(let key), .messageSent(let key):
            stop(key)
        case .connectionClosed(let connection):
            let keys = indicators.withLockedValue {
                $0.active.filter { $0.value.connection == connection.id }.map(\.key)
            }
            for key in keys { stop(key) }
        }
    }

    /// The indicator goes off for those it came on for (a user blocked since, or a participant who left, included;
    /// one who joined since never saw it on).
    private func stop(_ key: Key) {
        guard let indicator = indicators.withLockedValue({ $0.active.removeValue(forKey: key) }) else { return }
        timers.cancel(key)
        publish(key, on: false, to: indicator.audience)
    }

    private func handledOn(_ key: Key) {
        indicators.withLockedValue { indicators in
            guard let pending = indicators.pendingOn[key] else { return }
            indicators.pendingOn[key] = pending > 1 ? pending - 1 : nil
        }
    }

    private func scheduleExpiry(_ key: Key) {
        timers.schedule(key)
    }

    /// The conversation's participants but those who blocked the typing user (they do not see them type); nil when
    /// there is no such conversation.
    private func participants(of key: Key) async -> [String]? {
        do {
            guard
                let participants = try await store.activeParticipants(
                    appId: key.appId, conversationId: key.conversationId)
            else { return nil }
            let blockers = Set(try await store.blockers(of: [UserRef(appId: key.appId, uid: key.uid)])[0])
            return blockers.isEmpty ? participants : participants.filter { !blockers.contains($0) }
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
