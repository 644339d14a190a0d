import Foundation
import ParleyAPI

/// Who a message goes to.
public enum Receiver: Sendable, Hashable {
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
    /// Goes over the socket when connected, otherwise over HTTP; if the socket does not answer in time the same
    /// message is sent over HTTP with the same `clientMessageId`, and the server keeps one copy.
    ///
    /// - Throws: `ERR_NOT_LOGGED_IN`; `ERR_MESSAGE_EMPTY` or `ERR_MESSAGE_TOO_LARGE` before anything is sent;
    ///   `ERR_CONVERSATION_NOT_FOUND`, `ERR_NOT_A_PARTICIPANT`, `ERR_UID_NOT_FOUND` from the server.
    @discardableResult
    public func sendMessage(
        parts: [MessagePart], to receiver: Receiver, metadata: JSONValue? = nil, alert: String? = nil,
        clientMessageId: String = UUID().uuidString
    ) async throws -> Message {
        _ = try requireSession()
        if let violation = MessageLimits.default.violation(parts: parts, metadata: metadata, alert: alert) {
            throw ParleyError(violation, violation == .messageEmpty ? "The message is empty." : "The message is too large.")
        }
        let conversationId = try await conversationId(for: receiver)
        // The server ends the sender's typing indicator with the message.
        state.withLockedValue { _ = $0.typingSentAt.removeValue(forKey: conversationId) }
        let ref = UUID().uuidString
        let frame = SendFrame(
            ref: ref, conversationId: conversationId, clientMessageId: clientMessageId, parts: parts,
            metadata: metadata, alert: alert
        )
        if let message = try await sendOverSocket(frame) { return message }
        let body = SendMessageRequest(clientMessageId: clientMessageId, parts: parts, metadata: metadata, alert: alert)
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
