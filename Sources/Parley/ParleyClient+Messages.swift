import Foundation
import ParleyAPI
import ParleyAPIClient

/// Who a message goes to.
public enum Receiver: Sendable, Hashable, Codable {
    /// The direct conversation with this user (created on first use).
    case user(String)
    /// A conversation (group or direct) by id.
    case conversation(String)
}

extension ParleyClient {
    // MARK: Sending

    /// Sends a text message. See ``sendMessage(parts:to:metadata:alert:replyTo:mentions:clientMessageId:)``.
    @discardableResult
    public func sendTextMessage(
        _ text: String, to receiver: Receiver, metadata: JSONValue? = nil, replyTo: String? = nil,
        mentions: [String]? = nil, clientMessageId: String = TimeOrderedUUID.make().uuidString
    ) async throws -> Message {
        try await sendMessage(
            parts: [.text(text)], to: receiver, metadata: metadata, replyTo: replyTo, mentions: mentions,
            clientMessageId: clientMessageId
        )
    }

    /// Sends a message and returns it as stored, with its sequence number.
    ///
    /// The message goes through the durable outbox (see
    /// ``queueMessage(parts:to:metadata:alert:replyTo:mentions:silent:clientMessageId:)``): while the device is offline or
    /// the server is down this waits, and the message is sent when they are back, even if the app restarts first.
    /// Cancelling the waiting task stops the wait, not the message.
    ///
    /// - Parameters:
    ///   - parts: The content: text, data and file parts.
    ///   - receiver: A user (their direct conversation, created on first use) or a conversation.
    ///   - metadata: Custom data the app attaches to the message.
    ///   - alert: Text for the push notification; the message's text by default.
    ///   - replyTo: The id of the message this one replies to (the first message of a thread).
    ///   - mentions: uids the message mentions: they get a push even while their app is open elsewhere, and see it
    ///     in ``fetchUnreadMentions(limit:cursor:)`` until they read it. uids who are not participants are left out.
    ///   - clientMessageId: The message's own id: however often the send is retried, the server stores it once.
    /// - Throws: `ERR_NOT_LOGGED_IN`; `ERR_MESSAGE_EMPTY` or `ERR_MESSAGE_TOO_LARGE` before anything is sent;
    ///   `ERR_CONVERSATION_NOT_FOUND`, `ERR_NOT_A_PARTICIPANT`, `ERR_UID_NOT_FOUND`, `ERR_FORBIDDEN`,
    ///   `ERR_MESSAGE_NOT_FOUND` or `ERR_MESSAGE_DELETED` (the message replied to) from the server (the message then
    ///   leaves the outbox); `ERR_MESSAGE_CANCELLED` when the app cancelled it.
    @discardableResult
    public func sendMessage(
        parts: [MessagePart], to receiver: Receiver, metadata: JSONValue? = nil, alert: String? = nil,
        replyTo: String? = nil, mentions: [String]? = nil, clientMessageId: String = TimeOrderedUUID.make().uuidString
    ) async throws -> Message {
        let queued = try makeOutgoing(
            .send, parts: parts, to: receiver, metadata: metadata, alert: alert, replyTo: replyTo, mentions: mentions,
            id: clientMessageId
        )
        return try await expectMessage(try await outbox.perform(queued))
    }

    /// Sends a silent message: it is stored and delivered like any other, but raises nobody's unread count, records
    /// no unread mention and sends no push (a "sent silently" note, a bot's update). It arrives with `silent` true.
    /// Otherwise as ``sendMessage(parts:to:metadata:alert:replyTo:mentions:clientMessageId:)``.
    @discardableResult
    public func sendSilentMessage(
        parts: [MessagePart], to receiver: Receiver, metadata: JSONValue? = nil, replyTo: String? = nil,
        mentions: [String]? = nil, clientMessageId: String = TimeOrderedUUID.make().uuidString
    ) async throws -> Message {
        var queued = try makeOutgoing(
            .send, parts: parts, to: receiver, metadata: metadata, replyTo: replyTo, mentions: mentions,
            id: clientMessageId
        )
        queued.silent = true
        return try await expectMessage(try await outbox.perform(queued))
    }

    /// Callback form of ``sendMessage(parts:to:metadata:alert:replyTo:mentions:clientMessageId:)``.
    public func sendMessage(
        parts: [MessagePart], to receiver: Receiver, metadata: JSONValue? = nil, alert: String? = nil,
        replyTo: String? = nil, mentions: [String]? = nil, onSuccess: @escaping @Sendable (Message) -> Void,
        onError: @escaping @Sendable (ParleyError) -> Void
    ) {
        callback(
            {
                try await self.sendMessage(
                    parts: parts, to: receiver, metadata: metadata, alert: alert, replyTo: replyTo, mentions: mentions
                )
            }, onSuccess: onSuccess, onError: onError
        )
    }

    /// Queues a message in the durable outbox and returns at once; it is sent as soon as the socket (or HTTP) can
    /// reach the server, in the order queued, exactly once. Follow it with ``addOutboxListener(_:_:)`` or
    /// ``outboxUpdates()``; a refused message stays `failed` until ``retryMessage(clientMessageId:)`` or
    /// ``cancelMessage(clientMessageId:)``.
    ///
    /// `silent` sends it as ``sendSilentMessage(parts:to:metadata:replyTo:mentions:clientMessageId:)`` does.
    ///
    /// - Throws: `ERR_NOT_LOGGED_IN`, `ERR_MESSAGE_EMPTY`, `ERR_MESSAGE_TOO_LARGE`, `ERR_STORAGE`.
    @discardableResult
    public func queueMessage(
        parts: [MessagePart], to receiver: Receiver, metadata: JSONValue? = nil, alert: String? = nil,
        replyTo: String? = nil, mentions: [String]? = nil, silent: Bool = false,
        clientMessageId: String = TimeOrderedUUID.make().uuidString
    ) throws -> OutgoingMessage {
        var queued = try makeOutgoing(
            .send, parts: parts, to: receiver, metadata: metadata, alert: alert, replyTo: replyTo, mentions: mentions,
            id: clientMessageId
        )
        queued.silent = silent
        try outbox.add(queued)
        return queued
    }

    // MARK: Changing messages

    /// Edits a message (yours; others' where your role may): `parts` replaces its content, `metadata` and `mentions`
    /// replace its own when given. Everyone in the conversation gets `conversationMessage.update`. Goes through the
    /// outbox after what you queued before it; an edit that changes nothing returns the message as it is.
    ///
    /// - Parameters:
    ///   - message: The message's id, or ``MessageRef/queued(clientMessageId:)`` for one still in the outbox.
    ///   - conversationId: The message's conversation.
    ///   - parts: The new content.
    ///   - metadata: New custom data; nil keeps the message's.
    ///   - mentions: New mentions; nil keeps the message's.
    /// - Throws: `ERR_MESSAGE_EMPTY`, `ERR_MESSAGE_TOO_LARGE` before anything is sent; `ERR_MESSAGE_NOT_FOUND`,
    ///   `ERR_MESSAGE_DELETED`, `ERR_FORBIDDEN` from the server.
    @discardableResult
    public func editMessage(
        _ message: MessageRef, in conversationId: String, parts: [MessagePart], metadata: JSONValue? = nil,
        mentions: [String]? = nil
    ) async throws -> Message {
        let queued = try makeOutgoing(
            .edit(message), parts: parts, to: .conversation(conversationId), metadata: metadata, mentions: mentions
        )
        return try await expectMessage(try await outbox.perform(queued))
    }

    /// Edits a message's text; see ``editMessage(_:in:parts:metadata:mentions:)``.
    @discardableResult
    public func editTextMessage(_ messageId: String, in conversationId: String, text: String, mentions: [String]? = nil)
        async throws -> Message
    {
        try await editMessage(.id(messageId), in: conversationId, parts: [.text(text)], mentions: mentions)
    }

    /// Callback form of ``editMessage(_:in:parts:metadata:mentions:)``.
    public func editMessage(
        _ message: MessageRef, in conversationId: String, parts: [MessagePart], metadata: JSONValue? = nil,
        mentions: [String]? = nil, onSuccess: @escaping @Sendable (Message) -> Void,
        onError: @escaping @Sendable (ParleyError) -> Void
    ) {
        callback(
            {
                try await self.editMessage(
                    message, in: conversationId, parts: parts, metadata: metadata, mentions: mentions)
            },
            onSuccess: onSuccess, onError: onError
        )
    }

    /// Deletes a message (yours; others' where your role may): its content is gone for everyone, and
    /// `conversationMessage.delete` carries what remains. Deleting it again returns the same.
    ///
    /// - Throws: `ERR_MESSAGE_NOT_FOUND`, `ERR_FORBIDDEN` from the server.
    @discardableResult
    public func deleteMessage(_ message: MessageRef, in conversationId: String) async throws -> Message {
        let queued = try makeOutgoing(.delete(message), parts: [], to: .conversation(conversationId))
        return try await expectMessage(try await outbox.perform(queued))
    }

    /// ``deleteMessage(_:in:)`` by message id.
    @discardableResult
    public func deleteMessage(_ messageId: String, in conversationId: String) async throws -> Message {
        try await deleteMessage(.id(messageId), in: conversationId)
    }

    /// Callback form of ``deleteMessage(_:in:)-(MessageRef,String)``.
    public func deleteMessage(
        _ message: MessageRef, in conversationId: String, onSuccess: @escaping @Sendable (Message) -> Void,
        onError: @escaping @Sendable (ParleyError) -> Void
    ) {
        callback({ try await self.deleteMessage(message, in: conversationId) }, onSuccess: onSuccess, onError: onError)
    }

    /// Adds your reaction `key` (an emoji or a short key) to a message; adding it again changes nothing. Everyone
    /// gets `conversationMessage.reactionAdded`. Returns the message's reactions.
    ///
    /// - Throws: `ERR_BAD_REQUEST` (an invalid key), `ERR_MESSAGE_NOT_FOUND`, `ERR_MESSAGE_DELETED`,
    ///   `ERR_REACTION_LIMIT`.
    @discardableResult
    public func addReaction(_ key: String, to message: MessageRef, in conversationId: String) async throws
        -> ReactionList
    {
        try await react(key, message, conversationId, add: true)
    }

    /// Removes your reaction `key` from a message; removing one you did not give changes nothing.
    @discardableResult
    public func removeReaction(_ key: String, from message: MessageRef, in conversationId: String) async throws
        -> ReactionList
    {
        try await react(key, message, conversationId, add: false)
    }

    /// Callback form of ``addReaction(_:to:in:)``.
    public func addReaction(
        _ key: String, to message: MessageRef, in conversationId: String,
        onSuccess: @escaping @Sendable (ReactionList) -> Void, onError: @escaping @Sendable (ParleyError) -> Void
    ) {
        callback(
            { try await self.addReaction(key, to: message, in: conversationId) }, onSuccess: onSuccess, onError: onError
        )
    }

    /// Callback form of ``removeReaction(_:from:in:)``.
    public func removeReaction(
        _ key: String, from message: MessageRef, in conversationId: String,
        onSuccess: @escaping @Sendable (ReactionList) -> Void, onError: @escaping @Sendable (ParleyError) -> Void
    ) {
        callback(
            { try await self.removeReaction(key, from: message, in: conversationId) }, onSuccess: onSuccess,
            onError: onError
        )
    }

    /// Queues an edit, a deletion or a reaction and returns at once (like ``queueMessage(parts:to:metadata:alert:replyTo:mentions:silent:clientMessageId:)``).
    @discardableResult
    public func queueChange(
        _ action: OutgoingMessage.Action, in conversationId: String, parts: [MessagePart] = [],
        metadata: JSONValue? = nil, mentions: [String]? = nil
    ) throws -> OutgoingMessage {
        if case .send = action { throw ParleyError(.invalidArgument, "Queue a message with queueMessage.") }
        let queued = try makeOutgoing(
            action, parts: parts, to: .conversation(conversationId), metadata: metadata, mentions: mentions
        )
        try outbox.add(queued)
        return queued
    }

    private func react(_ key: String, _ message: MessageRef, _ conversationId: String, add: Bool) async throws
        -> ReactionList
    {
        let queued = try makeOutgoing(
            .react(message, key: key, add: add), parts: [], to: .conversation(conversationId)
        )
        guard let reactions = try await outbox.perform(queued).reactions else {
            throw ParleyError(.unexpectedResponse, "The server's answer to a reaction carries no reactions.")
        }
        return reactions
    }

    private func expectMessage(_ outcome: OutboxOutcome) async throws -> Message {
        guard let message = outcome.message else {
            throw ParleyError(.unexpectedResponse, "The server's answer carries no message.")
        }
        return message
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

    /// Removes the outbox listener with this id.
    public func removeOutboxListener(_ id: String) { outboxBroadcaster.remove(id) }

    /// Every state change of an outgoing message from now on.
    public func outboxUpdates() -> AsyncStream<OutgoingMessage> { outboxBroadcaster.stream() }

    func makeOutgoing(
        _ action: OutgoingMessage.Action, parts: [MessagePart], to receiver: Receiver, metadata: JSONValue? = nil,
        alert: String? = nil, replyTo: String? = nil, mentions: [String]? = nil,
        id: String = TimeOrderedUUID.make().uuidString
    ) throws -> OutgoingMessage {
        _ = try requireSession()
        switch action {
        case .send, .edit:
            if let violation = MessageLimits.default.violation(parts: parts, metadata: metadata, alert: alert) {
                throw ParleyError(
                    violation, violation == .messageEmpty ? "The message is empty." : "The message is too large."
                )
            }
        case .react(_, let key, _):
            // The server's rule (docs/PROTOCOL.md, "Reactions"), checked before the change is queued.
            let invalid = key.unicodeScalars.contains {
                $0.properties.isWhitespace || $0.value < 0x20 || (0x7F...0x9F).contains($0.value)
            }
            guard !key.isEmpty, key.utf8.count <= 64, !invalid else {
                throw ParleyError(
                    .invalidArgument, "A reaction key is 1-64 bytes without whitespace or control characters.")
            }
        case .delete:
            break
        }
        guard !id.isEmpty else { throw ParleyError(.invalidArgument, "The client message id is empty.") }
        return OutgoingMessage(
            clientMessageId: id, receiver: receiver, action: action, parts: parts, metadata: metadata, alert: alert,
            replyTo: replyTo, mentions: mentions, createdAt: Int64((Date().timeIntervalSince1970 * 1000).rounded())
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
                let outcome = try await performOnce(next)
                outbox.finish(next.clientMessageId, with: .success(outcome))
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
            } catch let error as ParleyError where error.code == .messageCancelled {
                // The app cancelled the entry while its file was being uploaded: it has left the outbox.
                outbox.release(next.clientMessageId)
            } catch let error as ParleyError {
                outbox.finish(next.clientMessageId, with: .failure(error))
            } catch  where !Task.isCancelled && !outbox.contains(next.clientMessageId) {
                // The same, seen as the upload's cancellation.
                outbox.release(next.clientMessageId)
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
    /// HTTP. A send always carries the message's client id, so the server keeps one copy whatever happens; an edit,
    /// a deletion or a reaction repeated changes nothing.
    private func performOnce(_ outgoing: OutgoingMessage) async throws -> OutboxOutcome {
        _ = try requireSession()
        let conversationId = try await conversationId(for: outgoing.receiver)
        let ref = UUID().uuidString
        switch outgoing.action {
        case .send:
            if outgoing.file != nil { return try await sendWithFile(outgoing, to: conversationId) }
            return try await sendOutgoing(outgoing, to: conversationId)
        case .edit(let target):
            let messageId = try resolve(target)
            let frame = EditFrame(
                ref: ref, conversationId: conversationId, messageId: messageId, parts: outgoing.parts,
                metadata: outgoing.metadata, mentions: outgoing.mentions
            )
            if let ack = try await overSocket(.edit(frame), ref: ref) { return .message(try Self.message(in: ack)) }
            let body = EditMessageRequest(
                parts: outgoing.parts, metadata: outgoing.metadata, mentions: outgoing.mentions)
            return .message(
                try await rest.call {
                    try await $0.editMessage(
                        path: .init(conversationId: conversationId, messageId: messageId), body: .json(body)
                    ).ok.body.json
                }
            )
        case .delete(let target):
            let messageId = try resolve(target)
            let frame = DeleteFrame(ref: ref, conversationId: conversationId, messageId: messageId)
            if let ack = try await overSocket(.delete(frame), ref: ref) { return .message(try Self.message(in: ack)) }
            return .message(
                try await rest.call {
                    try await $0.deleteMessage(path: .init(conversationId: conversationId, messageId: messageId)).ok
                        .body.json
                }
            )
        case .react(let target, let key, let add):
            let messageId = try resolve(target)
            let frame = ReactionFrame(
                ref: ref, conversationId: conversationId, messageId: messageId, key: key, remove: add ? nil : true
            )
            if let ack = try await overSocket(.reaction(frame), ref: ref) {
                guard let reactions = ack.reactions else {
                    throw ParleyError(.unexpectedResponse, "The server's ack carries no reactions.")
                }
                return .reactions(reactions)
            }
            let path = Operations.AddReaction.Input.Path(conversationId: conversationId, messageId: messageId, key: key)
            return .reactions(
                try await rest.call { api in
                    if add { return try await api.addReaction(path: path).ok.body.json }
                    return try await api.removeReaction(
                        path: .init(conversationId: conversationId, messageId: messageId, key: key)
                    ).ok.body.json
                }
            )
        }
    }

    /// Sends a new message once (over the socket when it is connected, otherwise over HTTP), with its client id.
    func sendOutgoing(_ outgoing: OutgoingMessage, to conversationId: String) async throws -> OutboxOutcome {
        let ref = UUID().uuidString
        // The server ends the sender's typing indicator with the message.
        state.withLockedValue { _ = $0.typingSentAt.removeValue(forKey: conversationId) }
        let frame = SendFrame(
            ref: ref, conversationId: conversationId, clientMessageId: outgoing.clientMessageId,
            parts: outgoing.partsToSend(), metadata: outgoing.metadata, alert: outgoing.alert,
            replyTo: outgoing.replyTo,
            mentions: outgoing.mentions, silent: outgoing.silent ? true : nil
        )
        if let ack = try await overSocket(.send(frame), ref: ref) { return .message(try Self.message(in: ack)) }
        let body = SendMessageRequest(
            clientMessageId: outgoing.clientMessageId, parts: outgoing.partsToSend(), metadata: outgoing.metadata,
            alert: outgoing.alert, replyTo: outgoing.replyTo, mentions: outgoing.mentions,
            silent: outgoing.silent ? true : nil
        )
        return .message(
            try await rest.call { api in
                switch try await api.sendMessage(path: .init(conversationId: conversationId), body: .json(body)) {
                case .created(let created): return try created.body.json
                case .ok(let existing): return try existing.body.json
                default: throw ParleyError(.unexpectedResponse, "Unexpected answer to sendMessage.")
                }
            }
        )
    }

    /// The server id of the message an edit, a deletion or a reaction applies to.
    private func resolve(_ target: MessageRef) throws -> String {
        guard let messageId = outbox.messageId(for: target) else {
            throw ParleyError(.messageNotFound, "Message \(target) was not sent: there is nothing to change.")
        }
        return messageId
    }

    private static func message(in ack: AckFrame) throws -> Message {
        guard let message = ack.message else {
            throw ParleyError(.unexpectedResponse, "The server's ack carries no message.")
        }
        return message
    }

    /// Sends a frame that the server acknowledges; nil when the socket is not connected or did not answer in time.
    private func overSocket(_ frame: ClientFrame, ref: String) async throws -> AckFrame? {
        requests.open(ref)
        guard await driver.send(frame) else {
            requests.complete(ref, with: .failure(ParleyError(.notConnected, "Not connected.")))
            _ = try? await requests.wait(ref)
            return nil
        }
        let requests = self.requests
        let clock = self.clock
        let timeout = settings.connectionTuning.requestTimeout
        let timer = Task {
            guard (try? await clock.sleep(for: timeout)) != nil else { return }
            requests.complete(ref, with: .failure(ParleyError(.timeout, "The server did not answer in time.")))
        }
        defer { timer.cancel() }
        do {
            return try await requests.wait(ref)
        } catch let error as ParleyError where error.code == .timeout || error.code == .notConnected {
            logger.info("A frame got no answer over the socket (\(error.code)); sending over HTTP.")
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

    /// One message in its latest state, with its thread summary and reactions.
    public func fetchMessage(_ messageId: String, in conversationId: String) async throws -> Message {
        _ = try requireSession()
        return try await rest.call {
            try await $0.getMessage(path: .init(conversationId: conversationId, messageId: messageId)).ok.body.json
        }
    }

    /// A page of a thread (the replies to `messageId`), in ascending sequence order, with the thread's first message
    /// as `parent`; pass `nextCursor` to get the older page.
    public func fetchReplies(to messageId: String, in conversationId: String, limit: Int = 50, cursor: String? = nil)
        async throws -> MessagePage
    {
        _ = try requireSession()
        return try await rest.call {
            try await $0.listReplies(
                path: .init(conversationId: conversationId, messageId: messageId),
                query: .init(limit: limit, cursor: cursor)
            ).ok.body.json
        }
    }

    /// The messages that mention you and that you have not read yet, newest first, across your conversations. A
    /// mention leaves the list when you mark its conversation read past it.
    public func fetchUnreadMentions(limit: Int = 50, cursor: String? = nil) async throws -> MessagePage {
        _ = try requireSession()
        return try await rest.call {
            try await $0.listMentions(query: .init(limit: limit, cursor: cursor)).ok.body.json
        }
    }

    /// A page of a conversation's history, in ascending sequence order; pass the page's `nextCursor` to get the
    /// older page before it.
    public func fetchMessages(conversationId: String, limit: Int = 50, cursor: String? = nil) async throws
        -> MessagePage
    {
        try await history(conversationId, .init(limit: limit, cursor: cursor))
    }

    /// A page of a conversation's history opened at message `seq` (a push's or a mention's): about half of `limit` at
    /// or before it and the rest after it, in ascending order. `nextCursor` leads to the older page
    /// (``fetchMessages(conversationId:limit:cursor:)``), `newerCursor` to the newer one
    /// (``fetchMessages(conversationId:after:limit:)``).
    public func fetchMessages(conversationId: String, around seq: Int64, limit: Int = 50) async throws -> MessagePage {
        try await history(conversationId, .init(limit: limit, around: seq))
    }

    /// The messages after position `seq` (a page's `newerCursor`), oldest first, with the `newerCursor` of the next
    /// page while there are more.
    public func fetchMessages(conversationId: String, after seq: Int64, limit: Int = 50) async throws -> MessagePage {
        try await history(conversationId, .init(limit: limit, after: seq))
    }

    private func history(_ conversationId: String, _ query: Operations.ListMessages.Input.Query) async throws
        -> MessagePage
    {
        _ = try requireSession()
        return try await rest.call {
            try await $0.listMessages(path: .init(conversationId: conversationId), query: query).ok.body.json
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
