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
