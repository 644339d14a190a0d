import Foundation
import NIOConcurrencyHelpers
import Parley

extension ParleyClient {
    /// Waits until the connection status satisfies `matches` (checked at once, then at every change).
    public func waitForStatus(_ matches: @Sendable (ConnectionStatus) -> Bool) async -> ConnectionStatus {
        let updates = connectionStatusUpdates()
        let now = connectionStatus
        if matches(now) { return now }
        for await status in updates where matches(status) { return status }
        return connectionStatus
    }

    /// Waits until connected.
    public func waitUntilConnected() async {
        _ = await waitForStatus { $0 == .connected }
    }
}

/// Test settings: a server, a fresh storage directory, and the callback queue of the test's choice.
public func testSettings(
    server: TestServer, storage: TemporaryDirectory? = nil, autoConnect: Bool = true,
    tuning: ConnectionTuning = ConnectionTuning()
) throws -> AppSettings {
    try testSettings(serverURL: server.baseURL, storage: storage, autoConnect: autoConnect, tuning: tuning)
}

/// Settings for a client of the server at `serverURL` (a node, or a proxy in front of nodes).
public func testSettings(
    serverURL: URL, storage: TemporaryDirectory? = nil, autoConnect: Bool = true,
    tuning: ConnectionTuning = ConnectionTuning()
) throws -> AppSettings {
    AppSettings.Builder()
        .serverURL(serverURL)
        .storageDirectory(try (storage ?? TemporaryDirectory(prefix: "parley-sdk")).url)
        .autoEstablishSocketConnection(autoConnect)
        .connectionTuning(tuning)
        .build()
}

/// A listener that records what it receives, in order, and lets a test await it.
public final class RecordingListener: ParleyEventListener, ConnectionListener {
    private let events = NIOLockedValueBox<[Event]>([])
    private let statuses = NIOLockedValueBox<[ConnectionStatus]>([])
    private let eventStream: AsyncStream<Event>
    private let eventSink: AsyncStream<Event>.Continuation

    public init() {
        (eventStream, eventSink) = AsyncStream.makeStream(of: Event.self)
    }

    public func onEvent(_ event: Event) {
        events.withLockedValue { $0.append(event) }
        eventSink.yield(event)
    }

    public func onStatusChanged(_ status: ConnectionStatus) {
        statuses.withLockedValue { $0.append(status) }
    }

    public var receivedEvents: [Event] { events.withLockedValue { $0 } }
    public var receivedStatuses: [ConnectionStatus] { statuses.withLockedValue { $0 } }

    /// The per-kind methods called, in order: the event's id and the method's name (`onMessageSent` ...).
    public var kindCalls: [(eventId: String, method: String)] { calls.withLockedValue { $0 } }
    private let calls = NIOLockedValueBox<[(eventId: String, method: String)]>([])

    private func called(_ method: String, _ event: Event) {
        calls.withLockedValue { $0.append((event.id, method)) }
    }

    public func onProfileUpdate(_ user: User, event: Event) { called("onProfileUpdate", event) }
    public func onConversationCreate(_ conversation: Conversation, event: Event) {
        called("onConversationCreate", event)
    }
    public func onConversationUpdate(_ conversation: Conversation, event: Event) {
        called("onConversationUpdate", event)
    }
    public func onConversationDelete(_ conversation: Conversation, event: Event) {
        called("onConversationDelete", event)
    }
    public func onConversationUndelete(_ conversation: Conversation, event: Event) {
        called("onConversationUndelete", event)
    }
    public func onParticipantAdded(_ participant: Participant, event: Event) { called("onParticipantAdded", event) }
    public func onParticipantUpdated(_ participant: Participant, event: Event) {
        called("onParticipantUpdated", event)
    }
    public func onParticipantRemoved(_ participant: Participant, event: Event) {
        called("onParticipantRemoved", event)
    }
    public func onParticipantBanned(_ ban: ConversationBan, event: Event) { called("onParticipantBanned", event) }
    public func onParticipantUnbanned(_ ban: ConversationBan, event: Event) { called("onParticipantUnbanned", event) }
    public func onParticipantTyping(_ typing: TypingIndicator, event: Event) { called("onParticipantTyping", event) }
    public func onParticipantTypingOff(_ typing: TypingIndicator, event: Event) {
        called("onParticipantTypingOff", event)
    }
    public func onMessageDelivered(_ receipt: Receipt, event: Event) { called("onMessageDelivered", event) }
    public func onMessageRead(_ receipt: Receipt, event: Event) { called("onMessageRead", event) }
    public func onMessageSent(_ message: Message, event: Event) { called("onMessageSent", event) }
    public func onMessageEdited(_ message: Message, event: Event) { called("onMessageEdited", event) }
    public func onMessageDeleted(_ message: Message, event: Event) { called("onMessageDeleted", event) }
    public func onReactionAdded(_ reaction: MessageReaction, event: Event) { called("onReactionAdded", event) }
    public func onReactionRemoved(_ reaction: MessageReaction, event: Event) { called("onReactionRemoved", event) }
    public func onMessagePinned(_ pin: MessagePin, event: Event) { called("onMessagePinned", event) }
    public func onMessageUnpinned(_ pin: MessagePin, event: Event) { called("onMessageUnpinned", event) }
    public func onPresenceUpdate(_ presence: Presence, event: Event) { called("onPresenceUpdate", event) }
    public func onUnreadUpdate(_ unread: UnreadSummary, event: Event) { called("onUnreadUpdate", event) }
    public func onCaughtUp(_ caughtUp: CaughtUpFrame, event: Event) { called("onCaughtUp", event) }
    public func onResyncRequired(_ resync: ResyncFrame, event: Event) { called("onResyncRequired", event) }

    /// The per-kind method each event name calls (``ParleyEventListener``'s documentation).
    public static let methodOfEvent: [EventName: String] = [
        .profileUpdate: "onProfileUpdate", .conversationCreate: "onConversationCreate",
        .conversationUpdate: "onConversationUpdate", .conversationDelete: "onConversationDelete",
        .conversationUndelete: "onConversationUndelete", .participantAdded: "onParticipantAdded",
        .participantUpdated: "onParticipantUpdated", .participantRemoved: "onParticipantRemoved",
        .participantBanned: "onParticipantBanned", .participantUnbanned: "onParticipantUnbanned",
        .participantTyping: "onParticipantTyping", .participantTypingOff: "onParticipantTypingOff",
        .messageDelivered: "onMessageDelivered", .messageRead: "onMessageRead", .messageSent: "onMessageSent",
        .messageUpdate: "onMessageEdited", .messageDelete: "onMessageDeleted", .reactionAdded: "onReactionAdded",
        .reactionRemoved: "onReactionRemoved", .presenceUpdate: "onPresenceUpdate", .unreadUpdate: "onUnreadUpdate",
        .caughtUp: "onCaughtUp", .resyncRequired: "onResyncRequired", .messagePinned: "onMessagePinned",
        .messageUnpinned: "onMessageUnpinned",
    ]

    /// Whether every event received so far called its kind's method, once, in order (unknown kinds call none).
    public var everyEventCalledItsMethod: Bool {
        let expected = receivedEvents.compactMap { event in
            Self.methodOfEvent[event.name].map { (event.id, $0) }
        }
        let calls = kindCalls
        return expected.count == calls.count
            && zip(expected, calls).allSatisfy { $0.0 == $1.eventId && $0.1 == $1.method }
    }

    /// Waits for the next event satisfying `matches`.
    public func next(where matches: (Event) -> Bool = { _ in true }) async -> Event? {
        for await event in eventStream where matches(event) { return event }
        return nil
    }
}
