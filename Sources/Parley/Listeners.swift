import Foundation
import NIOConcurrencyHelpers

/// Receives real-time events. Every method is optional; ``onEvent(_:)`` sees every event, before the method for
/// its kind.
///
/// Listeners are called on the settings' callback queue, one event at a time, in the order the events arrived.
/// Register any number with ``ParleyClient/addEventListener(_:_:)``.
///
/// ```swift
/// final class Inbox: ParleyEventListener {
///     func onMessageSent(_ message: Message, event: Event) { print("\(message.sender): \(message.text)") }
/// }
/// client.addEventListener("inbox", Inbox())
/// ```
public protocol ParleyEventListener: AnyObject, Sendable {
    /// Any event, including kinds this SDK version does not know.
    func onEvent(_ event: Event)
    /// `profile.update`: a user you share a conversation with (or you) changed their profile.
    func onProfileUpdate(_ user: User, event: Event)
    /// `conversation.create`: a conversation you are in was created.
    func onConversationCreate(_ conversation: Conversation, event: Event)
    /// `conversation.update`: a conversation's details changed.
    func onConversationUpdate(_ conversation: Conversation, event: Event)
    /// `conversation.delete`: a conversation was deleted (its owner can restore it).
    func onConversationDelete(_ conversation: Conversation, event: Event)
    /// `conversation.undelete`: a deleted conversation was restored.
    func onConversationUndelete(_ conversation: Conversation, event: Event)
    /// `conversation.participantAdded`: someone joined or was added (also the owner at creation).
    func onParticipantAdded(_ participant: Participant, event: Event)
    /// `conversation.participantUpdated`: a participant's role changed.
    func onParticipantUpdated(_ participant: Participant, event: Event)
    /// `conversation.participantRemoved`: a participant was removed or left (you, too, when it is you).
    func onParticipantRemoved(_ participant: Participant, event: Event)
    /// `conversation.participantBanned`: a user was banned from a group, or their ban changed. When they were in it,
    /// ``onParticipantRemoved(_:event:)`` came just before. You get it too when it is you (you are no longer in the
    /// group; `ConversationBan.until` says when you may join again).
    func onParticipantBanned(_ ban: ConversationBan, event: Event)
    /// `conversation.participantUnbanned`: a user's ban from a group was lifted (`ban` is the ban that was); they may
    /// join or be added again. You get it too when it is you.
    func onParticipantUnbanned(_ ban: ConversationBan, event: Event)
    /// `conversation.participantTyping`: someone started typing in `event.conversationId`.
    func onParticipantTyping(_ typing: TypingIndicator, event: Event)
    /// `conversation.participantTypingOff`: they stopped (or went silent, or disconnected).
    func onParticipantTypingOff(_ typing: TypingIndicator, event: Event)
    /// `conversationMessage.delivered`: a participant received the messages up to `receipt.seq`.
    func onMessageDelivered(_ receipt: Receipt, event: Event)
    /// `conversationMessage.read`: a participant read the messages up to `receipt.seq`.
    func onMessageRead(_ receipt: Receipt, event: Event)
    /// `conversationMessage.sent`: a new message, also delivered to the sender's own devices.
    func onMessageSent(_ message: Message, event: Event)
    /// `conversationMessage.update`: a message was edited; `message` is its new state.
    func onMessageEdited(_ message: Message, event: Event)
    /// `conversationMessage.delete`: a message was deleted; `message` is what remains (no content, `deletedAt` and
    /// `deletedBy` set).
    func onMessageDeleted(_ message: Message, event: Event)
    /// `conversationMessage.reactionAdded`: `reaction.uid` added `reaction.key` (now given `reaction.count` times).
    func onReactionAdded(_ reaction: MessageReaction, event: Event)
    /// `conversationMessage.reactionRemoved`: `reaction.uid` removed `reaction.key`.
    func onReactionRemoved(_ reaction: MessageReaction, event: Event)
    /// `conversationMessage.pinned`: a message was pinned to `event.conversationId` (by `event.context.createdBy`).
    func onMessagePinned(_ pin: MessagePin, event: Event)
    /// `conversationMessage.unpinned`: a message was unpinned; `pin` is the pin as it was.
    func onMessageUnpinned(_ pin: MessagePin, event: Event)
    /// `presence.update`: a user went online or offline.
    func onPresenceUpdate(_ presence: Presence, event: Event)
    /// `unread.update`: your unread counts changed (`conversations` lists the ones that did).
    func onUnreadUpdate(_ unread: UnreadSummary, event: Event)
    /// `parley.caughtUp`: after a (re)connect, every missed event has been delivered; what follows is live.
    func onCaughtUp(_ caughtUp: CaughtUpFrame, event: Event)
    /// `parley.resyncRequired`: what was missed in a conversation cannot be replayed (too old, too much):
    /// reload it (``ParleyClient/fetchMessages(conversationId:limit:cursor:)``).
    func onResyncRequired(_ resync: ResyncFrame, event: Event)
}

extension ParleyEventListener {
    public func onEvent(_ event: Event) {}
    public func onProfileUpdate(_ user: User, event: Event) {}
    public func onConversationCreate(_ conversation: Conversation, event: Event) {}
    public func onConversationUpdate(_ conversation: Conversation, event: Event) {}
    public func onConversationDelete(_ conversation: Conversation, event: Event) {}
    public func onConversationUndelete(_ conversation: Conversation, event: Event) {}
    public func onParticipantAdded(_ participant: Participant, event: Event) {}
    public func onParticipantUpdated(_ participant: Participant, event: Event) {}
    public func onParticipantRemoved(_ participant: Participant, event: Event) {}
    public func onParticipantBanned(_ ban: ConversationBan, event: Event) {}
    public func onParticipantUnbanned(_ ban: ConversationBan, event: Event) {}
    public func onParticipantTyping(_ typing: TypingIndicator, event: Event) {}
    public func onParticipantTypingOff(_ typing: TypingIndicator, event: Event) {}
    public func onMessageDelivered(_ receipt: Receipt, event: Event) {}
    public func onMessageRead(_ receipt: Receipt, event: Event) {}
    public func onMessageSent(_ message: Message, event: Event) {}
    public func onMessageEdited(_ message: Message, event: Event) {}
    public func onMessageDeleted(_ message: Message, event: Event) {}
    public func onReactionAdded(_ reaction: MessageReaction, event: Event) {}
    public func onReactionRemoved(_ reaction: MessageReaction, event: Event) {}
    public func onMessagePinned(_ pin: MessagePin, event: Event) {}
    public func onMessageUnpinned(_ pin: MessagePin, event: Event) {}
    public func onPresenceUpdate(_ presence: Presence, event: Event) {}
    public func onUnreadUpdate(_ unread: UnreadSummary, event: Event) {}
    public func onCaughtUp(_ caughtUp: CaughtUpFrame, event: Event) {}
    public func onResyncRequired(_ resync: ResyncFrame, event: Event) {}
}

/// Receives changes of the connection status. Every method is optional.
public protocol ConnectionListener: AnyObject, Sendable {
    /// Every change, with the full status.
    func onStatusChanged(_ status: ConnectionStatus)
    /// The SDK is opening the socket.
    func onConnecting()
    /// The socket is connected.
    func onConnected()
    /// The socket is closed and the SDK is not trying (see ``ConnectionStatus/disconnected``).
    func onDisconnected()
    /// The connection failed or was lost; `error` says why (`ERR_WEBSOCKET_ERROR`, `ERR_NO_INTERNET`,
    /// `ERR_AUTH_TOKEN_INVALID` ...).
    func onConnectionError(_ error: ParleyError)
}

extension ConnectionListener {
    public func onStatusChanged(_ status: ConnectionStatus) {}
    public func onConnecting() {}
    public func onConnected() {}
    public func onDisconnected() {}
    public func onConnectionError(_ error: ParleyError) {}
}

/// A set of listeners keyed by id, in the order they were added, plus `AsyncStream` subscribers; delivers each
/// value to all of them.
final class Broadcaster<Listener: Sendable, Value: Sendable>: Sendable {
    private struct State {
        var listeners: [(id: String, listener: Listener)] = []
        var streams: [UUID: AsyncStream<Value>.Continuation] = [:]
    }

    private let state = NIOLockedValueBox(State())
    private let queue: DispatchQueue
    private let deliver: @Sendable (Listener, Value) -> Void

    init(queue: DispatchQueue, deliver: @escaping @Sendable (Listener, Value) -> Void) {
        self.queue = queue
        self.deliver = deliver
    }

    /// Adds a listener, replacing one with the same id.
    func add(_ id: String, _ listener: Listener) {
        state.withLockedValue { state in
            if let index = state.listeners.firstIndex(where: { $0.id == id }) {
                state.listeners[index].listener = listener
            } else {
                state.listeners.append((id, listener))
            }
        }
    }

    func remove(_ id: String) {
        state.withLockedValue { $0.listeners.removeAll { $0.id == id } }
    }

    /// A new stream of every value from now on, until the consumer stops iterating.
    func stream(bufferingPolicy: AsyncStream<Value>.Continuation.BufferingPolicy = .unbounded) -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream.makeStream(of: Value.self, bufferingPolicy: bufferingPolicy)
        let key = UUID()
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLockedValue { $0.streams.removeValue(forKey: key) }
        }
        state.withLockedValue { $0.streams[key] = continuation }
        return stream
    }

    /// Delivers `value` to the listeners registered now, on the callback queue, and to the streams.
    ///
    /// The listeners' delivery is queued first: once a stream has seen a value, a block queued on the callback
    /// queue runs after the listeners have seen it too.
    func publish(_ value: Value) {
        let (listeners, streams) = state.withLockedValue { ($0.listeners.map(\.listener), Array($0.streams.values)) }
        if !listeners.isEmpty {
            let deliver = self.deliver
            queue.async {
                for listener in listeners { deliver(listener, value) }
            }
        }
        for stream in streams { stream.yield(value) }
    }

    /// Ends every stream.
    func finish() {
        let streams = state.withLockedValue { state -> [AsyncStream<Value>.Continuation] in
            defer { state.streams = [:] }
            return Array(state.streams.values)
        }
        for stream in streams { stream.finish() }
    }
}

extension ParleyEventListener {
    /// Calls ``onEvent(_:)`` and the method of the event's kind.
    func dispatch(_ event: Event) {
        onEvent(event)
        switch event.payload {
        case .profileUpdated(let user): onProfileUpdate(user, event: event)
        case .conversationCreated(let conversation): onConversationCreate(conversation, event: event)
        case .conversationUpdated(let conversation): onConversationUpdate(conversation, event: event)
        case .conversationDeleted(let conversation): onConversationDelete(conversation, event: event)
        case .conversationUndeleted(let conversation): onConversationUndelete(conversation, event: event)
        case .participantAdded(let participant): onParticipantAdded(participant, event: event)
        case .participantUpdated(let participant): onParticipantUpdated(participant, event: event)
        case .participantRemoved(let participant): onParticipantRemoved(participant, event: event)
        case .participantBanned(let ban): onParticipantBanned(ban, event: event)
        case .participantUnbanned(let ban): onParticipantUnbanned(ban, event: event)
        case .participantTyping(let typing): onParticipantTyping(typing, event: event)
        case .participantTypingOff(let typing): onParticipantTypingOff(typing, event: event)
        case .messageDelivered(let receipt): onMessageDelivered(receipt, event: event)
        case .messageRead(let receipt): onMessageRead(receipt, event: event)
        case .messageSent(let message): onMessageSent(message, event: event)
        case .messageUpdated(let message): onMessageEdited(message, event: event)
        case .messageDeleted(let message): onMessageDeleted(message, event: event)
        case .reactionAdded(let reaction): onReactionAdded(reaction, event: event)
        case .reactionRemoved(let reaction): onReactionRemoved(reaction, event: event)
        case .messagePinned(let pin): onMessagePinned(pin, event: event)
        case .messageUnpinned(let pin): onMessageUnpinned(pin, event: event)
        case .presenceUpdated(let presence): onPresenceUpdate(presence, event: event)
        case .unreadUpdated(let unread): onUnreadUpdate(unread, event: event)
        case .caughtUp(let caughtUp): onCaughtUp(caughtUp, event: event)
        case .resyncRequired(let resync): onResyncRequired(resync, event: event)
        case .unknown: break
        }
    }
}

extension ConnectionListener {
    /// Calls ``onStatusChanged(_:)`` and the method of the new status.
    func dispatch(_ status: ConnectionStatus) {
        onStatusChanged(status)
        switch status {
        case .connecting: onConnecting()
        case .connected: onConnected()
        case .disconnected: onDisconnected()
        case .reconnecting(_, _, let error), .failed(let error): onConnectionError(error)
        case .waitingForNetwork: onConnectionError(ParleyError(.noInternet, "The device is offline."))
        }
    }
}
