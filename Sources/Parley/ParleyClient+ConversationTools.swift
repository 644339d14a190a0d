import ParleyAPI
import ParleyAPIClient
import ParleyProtocol

extension ParleyClient {
    /// Pins a message to its conversation; pinning a pinned message changes nothing. Everyone in the conversation
    /// gets `conversationMessage.pinned`. In a group your role needs `canPinMessages` (by default the owner and
    /// admins); in a direct conversation either of you may. Returns the pin.
    ///
    /// - Throws: `ERR_FORBIDDEN`, `ERR_MESSAGE_NOT_FOUND`, `ERR_MESSAGE_DELETED`, `ERR_PIN_LIMIT` (50 pinned
    ///   messages), `ERR_MUTED`, `ERR_BLOCKED`.
    @discardableResult
    public func pinMessage(_ messageId: String, in conversationId: String) async throws -> MessagePin {
        _ = try requireSession()
        return try await rest.call {
            try await $0.pinMessage(path: .init(conversationId: conversationId, messageId: messageId)).ok.body.json
        }
    }

    /// Unpins a message (whoever pinned it); unpinning one that is not pinned changes nothing. Everyone gets
    /// `conversationMessage.unpinned`.
    public func unpinMessage(_ messageId: String, in conversationId: String) async throws {
        _ = try requireSession()
        _ = try await rest.call {
            try await $0.unpinMessage(path: .init(conversationId: conversationId, messageId: messageId)).noContent
        }
    }

    /// The conversation's pinned messages, the most recently pinned first (at most 50), each with its
    /// `Message.pin`; the page's `lastSeq` says which events it includes.
    public func fetchPinnedMessages(in conversationId: String) async throws -> MessagePage {
        _ = try requireSession()
        return try await rest.call {
            try await $0.listPins(path: .init(conversationId: conversationId)).ok.body.json
        }
    }
}

extension ParleyAdmin {
    /// Pins a message of any conversation of the app (the pin has no `pinnedBy`).
    @discardableResult
    public func pinMessage(_ messageId: String, in conversationId: String) async throws -> MessagePin {
        try await rest.call {
            try await $0.pinMessage(path: .init(conversationId: conversationId, messageId: messageId)).ok.body.json
        }
    }

    /// Unpins a message of any conversation of the app.
    public func unpinMessage(_ messageId: String, in conversationId: String) async throws {
        _ = try await rest.call {
            try await $0.unpinMessage(path: .init(conversationId: conversationId, messageId: messageId)).noContent
        }
    }

    /// The pinned messages of any conversation of the app, the most recently pinned first.
    public func fetchPinnedMessages(in conversationId: String) async throws -> MessagePage {
        try await rest.call { try await $0.listPins(path: .init(conversationId: conversationId)).ok.body.json }
    }
}

extension ParleyAdmin {
    /// Sends a system message of the app to any conversation of the app that is not deleted: it needs no
    /// participant, has an empty `sender` and `system` true, and counts as unread for every participant (unless
    /// `silent`). `clientMessageId` makes a retry store it once.
    ///
    /// - Throws: `ERR_CONVERSATION_NOT_FOUND`, `ERR_MESSAGE_EMPTY`, `ERR_MESSAGE_TOO_LARGE`, `ERR_BAD_REQUEST` (a
    ///   file part: the app's server uploads none).
    @discardableResult
    public func sendSystemMessage(
        parts: [MessagePart], to conversationId: String, metadata: JSONValue? = nil, alert: String? = nil,
        mentions: [String]? = nil, silent: Bool = false, clientMessageId: String? = nil
    ) async throws -> Message {
        let body = SendMessageRequest(
            clientMessageId: clientMessageId, parts: parts, metadata: metadata, alert: alert, mentions: mentions,
            silent: silent ? true : nil
        )
        return try await rest.call { api in
            switch try await api.sendMessage(path: .init(conversationId: conversationId), body: .json(body)) {
            case .created(let created): return try created.body.json
            case .ok(let existing): return try existing.body.json
            default: throw ParleyError(.unexpectedResponse, "Unexpected answer to sendMessage.")
            }
        }
    }
}
