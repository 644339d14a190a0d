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
    /// `conversationMessage.sent`: a new message, also delivered to the sender's own devices.
    func onMessageSent(_ message: Message, event: Event)
    /// `conversation.create`: a conversation you are in was created.
    func onConversationCreate(_ conversation: Conversation, event: Event)
    /// `conversation.participantAdded`: someone joined or was added (also the owner at creation).
    func onParticipantAdded(_ participant: Participant, event: Event)
}

extension ParleyEventListener {
    public func onEvent(_ event: Event) {}
    public func onMessageSent(_ message: Message, event: Event) {}
    public func onConversationCreate(_ conversation: Conversation, event: Event) {}
    public func onParticipantAdded(_ participant: Participant, event: Event) {}
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
        case .messageSent(let message): onMessageSent(message, event: event)
        case .conversationCreated(let conversation): onConversationCreate(conversation, event: event)
        case .participantAdded(let participant): onParticipantAdded(participant, event: event)
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
