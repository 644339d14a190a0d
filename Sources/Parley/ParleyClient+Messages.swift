import Foundation
import ParleyAPI

/// Who a message goes to.
public enum Receiver: Sendable, Hashable, Codable {
    /// The direct conversation with this user (created on first use).
    case user(String)
    /// A conversation (group or direct) by id.
    case conversation(String)
}

extension ParleyClient {
    // MARK: Sending

    /// Sends a text message. See ``sendMessage(parts:to:metadata:alert:clientMessageId:)``.
    @discardableResult
    public func sendTextMessage(
        _ text: String, to receiver: Receiver, metadata: JSONValue? = nil, clientMessageId: String = UUID().uuidString
    ) async throws -> Message {
        try await sendMessage(parts: [.text(text)], to: receiver, metadata: metadata, clientMessageId: clientMessageId)
    }

    /// Sends a message and returns it as stored, with its sequence number.
    ///
    /// The message goes through the durable outbox (see ``queueMessage(parts:to:metadata:alert:clientMessageId:)``):
    /// while the device is offline or the server is down this waits, and the message is sent when they are back,
    /// even if the app restarts first. Cancelling the waiting task stops the wait, not the message.
    ///
    /// - Throws: `ERR_NOT_LOGGED_IN`; `ERR_MESSAGE_EMPTY` or `ERR_MESSAGE_TOO_LARGE` before anything is sent;
    ///   `ERR_CONVERSATION_NOT_FOUND`, `ERR_NOT_A_PARTICIPANT`, `ERR_UID_NOT_FOUND` from the server (the message
    ///   then leaves the outbox); `ERR_MESSAGE_CANCELLED` when the app cancelled it.
    @discardableResult
    public func sendMessage(
        parts: [MessagePart], to receiver: Receiver, metadata: JSONValue? = nil, alert: String? = nil,
        clientMessageId: String = UUID().uuidString
    ) async throws -> Message {
        let queued = try makeOutgoing(parts: parts, to: receiver, metadata: metadata, alert: alert, id: clientMessageId)
        return try await outbox.send(queued)
    }

    /// Queues a message in the durable outbox and returns at once; it is sent as soon as the socket (or HTTP) can
    /// reach the server, in the order queued, exactly once. Follow it with ``addOutboxListener(_:_:)`` or
    /// ``outboxUpdates()``; a refused message stays `failed` until ``retryMessage(clientMessageId:)`` or
    /// ``cancelMessage(clientMessageId:)``.
    ///
    /// - Throws: `ERR_NOT_LOGGED_IN`, `ERR_MESSAGE_EMPTY`, `ERR_MESSAGE_TOO_LARGE`, `ERR_STORAGE`.
    @discardableResult
    public func queueMessage(
        parts: [MessagePart], to receiver: Receiver, metadata: JSONValue? = nil, alert: String? = nil,
        clientMessageId: String = UUID().uuidString
    ) throws -> OutgoingMessage {
        let queued = try makeOutgoing(parts: parts, to: receiver, metadata: metadata, alert: alert, id: clientMessageId)
        try outbox.add(queued)
        return queued
    }

    /// The messages not yet sent (pending or failed), oldest first.
    public func outgoingMessages() -> [OutgoingMessage] { outbox.messages }

    /// Removes a pending or failed message from the outbox. Throws `ERR_OUTBOX_MESSAGE_SENDING` while it is being
    /// sent (the server may already have it), `ERR_OUTBOX_MESSAGE_NOT_FOUND` when it is not in the outbox.
    public func cancelMessage(clientMessageId: String) throws { try outbox.cancel(clientMessageId) }

    /// Sends a failed message again, after the messages queued so far.
    public func retryMessage(clientMessageId: String) throws { try outbox.retry(clientMessageId) }

    /// Adds a listener of outgoing messages' states (replacing one with the same id).
    public func addOutboxListener(_ id: String, _ listener: any OutboxListener) { outboxBroadcaster.add(id, listener) }

    public func removeOutboxListener(_ id: String) { outboxBroadcaster.remove(id) }

    /// Every state change of an outgoing message from now on.
    public func outboxUpdates() -> AsyncStream<OutgoingMessage> { outboxBroadcaster.stream() }

    private func makeOutgoing(
        parts: [MessagePart], to receiver: Receiver, metadata: JSONValue?, alert: String?, id: String
    ) throws -> OutgoingMessage {
        _ = try requireSession()
        if let violation = MessageLimits.default.violation(parts: parts, metadata: metadata, alert: alert) {
            throw ParleyError(violation, violation == .messageEmpty ? "The message is empty." : "The message is too large.")
        }
        guard !id.isEmpty else { throw ParleyError(.invalidArgument, "The client message id is empty.") }
        return OutgoingMessage(
            clientMessageId: id, receiver: receiver, parts: parts, metadata: metadata, alert: alert,
            createdAt: Int64((Date().timeIntervalSince1970 * 1000).rounded()), state: .pending, attempts: 0
        )
    }

    /// Sends the outbox, one message at a time, until the client shuts down. A transient failure (no network,
    /// server down, timeout) keeps the message first in line and waits for the socket to connect or a backoff
    /// delay on the client's clock; a refusal marks it failed and moves on.
    func runOutbox() async {
        let tuning = settings.connectionTuning
        var delay = tuning.initialBackoff
        while !Task.isCancelled {
            guard let next = outbox.takeNext() else {
                await outbox.waitForSignal()
                continue
            }
            do {
                let message = try await sendOnce(next)
                outbox.finish(next.clientMessageId, with: .success(message))
                delay = tuning.initialBackoff
            } catch let error as ParleyError where error.isTransient {
                outbox.release(next.clientMessageId)
                logger.debug("Outbox: \(next.clientMessageId) not sent yet (\(error.code)); retrying")
                // A rate-limited send waits as long as the server asks (and is not woken early by a signal).
                if let retryAfter = error.retryAfter {
                    try? await clock.sleep(for: max(retryAfter, delay))
                } else {
                    await pauseOutbox(for: delay)
                }
                delay = min(delay * 2, tuning.maximumBackoff)
            } catch let error as ParleyError {
                outbox.finish(next.clientMessageId, with: .failure(error))
            } catch {
                outbox.release(next.clientMessageId)
                await pauseOutbox(for: delay)
            }
        }
    }

    /// Until the outbox is signalled (the socket connected, a message was queued or retried) or `delay` passes.
    private func pauseOutbox(for delay: Duration) async {
        let outbox = self.outbox
        let clock = self.clock
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await outbox.waitForSignal() }
            group.addTask { try? await clock.sleep(for: delay) }
            await group.next()
            group.cancelAll()
        }
    }

    /// One attempt: over the socket when it is connected, otherwise (or when it does not answer in time) over
    /// HTTP, always with the message's client id, so the server keeps one copy whatever happens.
    private func sendOnce(_ outgoing: OutgoingMessage) async throws -> Message {
        _ = try requireSession()
        let conversationId = try await conversationId(for: outgoing.receiver)
        // The server ends the sender's typing indicator with the message.
        state.withLockedValue { _ = $0.typingSentAt.removeValue(forKey: conversationId) }
        let frame = SendFrame(
            ref: UUID().uuidString, conversationId: conversationId, clientMessageId: outgoing.clientMessageId,
            parts: outgoing.parts, metadata: outgoing.metadata, alert: outgoing.alert
        )
        if let message = try await sendOverSocket(frame) { return message }
        let body = SendMessageRequest(
            clientMessageId: outgoing.clientMessageId, parts: outgoing.parts, metadata: outgoing.metadata,
            alert: outgoing.alert
        )
        return try await rest.call { api in
            switch try await api.sendMessage(path: .init(conversationId: conversationId), body: .json(body)) {
            case .created(let created): return try created.body.json
            case .ok(let existing): return try existing.body.json
            default: throw ParleyError(.unexpectedResponse, "Unexpected answer to sendMessage.")
            }
        }
    }

    /// Sends over the socket; nil when the socket is not connected or did not answer in time.
    private func sendOverSocket(_ frame: SendFrame) async throws -> Message? {
        requests.open(frame.ref)
        guard await driver.send(.send(frame)) else {
            requests.complete(frame.ref, with: .failure(ParleyError(.notConnected, "Not connected.")))
            _ = try? await requests.wait(frame.ref)
            return nil
        }
        let requests = self.requests
        let clock = self.clock
        let timeout = settings.connectionTuning.requestTimeout
        let timer = Task {
            guard (try? await clock.sleep(for: timeout)) != nil else { return }
            requests.complete(frame.ref, with: .failure(ParleyError(.timeout, "The server did not answer in time.")))
        }
        defer { timer.cancel() }
        do {
            let ack = try await requests.wait(frame.ref)
            guard let message = ack.message else {
                throw ParleyError(.unexpectedResponse, "The server's ack carries no message.")
            }
            return message
        } catch let error as ParleyError where error.code == .timeout || error.code == .notConnected {
            logger.info("Send over the socket got no answer (\(error.code)); sending over HTTP.")
            return nil
        }
    }

    /// A conversation's events `after < seq <= through`, page by page (fewer when the server has fewer).
    static func fetchEvents(rest: RESTClient, conversationId: String, after: Int64, through: Int64) async throws
        -> [Event]
    {
        var events: [Event] = []
        var position = after
        while position < through {
            let page = try await rest.call {
                try await $0.listEvents(
                    path: .init(conversationId: conversationId),
                    query: .init(after: position, limit: Int(min(200, through - position)))
                ).ok.body.json
            }
            let wanted = page.events.filter { ($0.seq ?? 0) <= through }
            events += wanted
            guard let last = page.events.last?.seq, last > position, page.nextCursor != nil else { break }
            position = last
        }
        return events
    }

    // MARK: History

    /// A page of a conversation's history, in ascending sequence order; pass the page's `nextCursor` to get the
    /// older page before it.
    public func fetchMessages(conversationId: String, limit: Int = 50, cursor: String? = nil) async throws
        -> MessagePage
    {
        _ = try requireSession()
        return try await rest.call {
            try await $0.listMessages(
                path: .init(conversationId: conversationId), query: .init(limit: limit, cursor: cursor)
            ).ok.body.json
        }
    }

    /// A page of the history with a user or of a conversation.
    public func fetchMessages(with receiver: Receiver, limit: Int = 50, cursor: String? = nil) async throws
        -> MessagePage
    {
        try await fetchMessages(conversationId: try await conversationId(for: receiver), limit: limit, cursor: cursor)
    }

    func conversationId(for receiver: Receiver) async throws -> String {
        switch receiver {
        case .conversation(let id):
            return id
        case .user(let uid):
            if let known = state.withLockedValue({ $0.directConversations[uid] }) { return known }
            return try await directConversation(with: uid).id
        }
    }
}
