import ParleyAPI
import ParleyAPIClient
import ParleyProtocol

/// What a message search looks for beside its words (docs/PROTOCOL.md, "Search").
public struct MessageSearchFilter: Sendable, Hashable {
    /// Only in this conversation.
    public var conversationId: String?
    /// Only messages this user sent.
    public var sender: String?
    /// Only messages with a file.
    public var withFilesOnly: Bool
    /// Only messages sent before this time (epoch ms, exclusive).
    public var sentBefore: Int64?
    /// Only messages sent at or after this time (epoch ms).
    public var sentAfter: Int64?

    /// A filter; the default finds everything the words find.
    public init(
        conversationId: String? = nil, sender: String? = nil, withFilesOnly: Bool = false, sentBefore: Int64? = nil,
        sentAfter: Int64? = nil
    ) {
        self.conversationId = conversationId
        self.sender = sender
        self.withFilesOnly = withFilesOnly
        self.sentBefore = sentBefore
        self.sentAfter = sentAfter
    }

    func query(_ text: String, order: MessageSearchOrder, limit: Int, cursor: String?)
        -> Operations.SearchMessages.Input.Query
    {
        .init(
            q: text.isEmpty ? nil : text, conversationId: conversationId, sender: sender,
            hasFile: withFilesOnly ? true : nil, sentBefore: sentBefore, sentAfter: sentAfter,
            order: .init(rawValue: order.rawValue), limit: limit, cursor: cursor
        )
    }
}

extension ParleyClient {
    /// Finds messages by their words in the conversations you are in: every word must be in a message (case and
    /// accents do not matter), a quoted phrase's words in that order, and the last word you typed is matched as a
    /// prefix (`meet` finds "meeting") unless it ends with a space. Deleted messages and the messages of users you
    /// block are never found; the words an edit replaced stop finding the message within the index's lag. Pass the
    /// answer's `nextCursor` for the next page.
    ///
    /// ```swift
    /// let found = try await client.searchMessages("quarterly report", filter: .init(conversationId: groupId))
    /// for result in found.results { print(result.snippet?.text ?? result.message.text) }
    /// ```
    ///
    /// A message is found within about a quarter of a second of being sent (docs/PROTOCOL.md, "Search").
    public func searchMessages(
        _ text: String, filter: MessageSearchFilter = .init(), order: MessageSearchOrder = .newest, limit: Int = 50,
        cursor: String? = nil
    ) async throws -> MessageSearchResults {
        _ = try requireSession()
        return try await rest.call {
            try await $0.searchMessages(query: filter.query(text, order: order, limit: limit, cursor: cursor)).ok.body
                .json
        }
    }
}

extension ParleyAdmin {
    /// Finds messages by their words in every conversation of the app that is not deleted (see
    /// ``ParleyClient/searchMessages(_:filter:order:limit:cursor:)`` for what is found).
    public func searchMessages(
        _ text: String, filter: MessageSearchFilter = .init(), order: MessageSearchOrder = .newest, limit: Int = 50,
        cursor: String? = nil
    ) async throws -> MessageSearchResults {
        try await rest.call {
            try await $0.searchMessages(query: filter.query(text, order: order, limit: limit, cursor: cursor)).ok.body
                .json
        }
    }
}

extension ParleyClient {
    /// Finds users by the beginnings of the words of their name or uid, for a "new chat" picker: every word you type
    /// must begin one of theirs (`zo ad` finds "Zoë Adams"; case and accents do not matter). You are never in the
    /// results, nor the users you block or who block you; when the app's directory is `contacts`, only the users who
    /// share a conversation with you. Pass the answer's `nextCursor` for the next page.
    ///
    /// ```swift
    /// let people = try await client.searchUsers("ann")
    /// for user in people.users { print(user.uid, user.name) }
    /// ```
    public func searchUsers(_ text: String, limit: Int = 20, cursor: String? = nil) async throws -> UserList {
        _ = try requireSession()
        return try await rest.call {
            try await $0.searchUsers(query: .init(q: text, limit: limit, cursor: cursor)).ok.body.json
        }
    }
}

extension ParleyAdmin {
    /// Finds any user of the app by the beginnings of the words of their name or uid (see
    /// ``ParleyClient/searchUsers(_:limit:cursor:)``).
    public func searchUsers(_ text: String, limit: Int = 20, cursor: String? = nil) async throws -> UserList {
        try await rest.call {
            try await $0.searchUsers(query: .init(q: text, limit: limit, cursor: cursor)).ok.body.json
        }
    }

    /// Sets whom the app's users find by searching for users: everyone, or only the users who share a conversation
    /// with them.
    @discardableResult
    public func setUserDirectory(_ visibility: UserDirectoryVisibility) async throws -> AppOverview {
        let body = UpdateAppSettingsRequest(userDirectory: visibility)
        return try await rest.call { try await $0.updateAppSettings(body: .json(body)).ok.body.json }
    }
}
