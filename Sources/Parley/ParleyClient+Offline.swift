import Foundation
import ParleyAPI
import ParleyAPIClient

// The inbox from the server, and what the device keeps of it to show offline (AppSettings.offlineMessageLimit).

extension ParleyClient {
    /// Your conversations, most recently active first, each with its newest message, your unread and mention counts
    /// and the other member of a direct conversation: an inbox screen's rows, read from the server in one request
    /// (archived conversations left out). The device keeps them (``storedConversations()``).
    ///
    /// - Parameter limit: How many conversations (the most recently active).
    public func inbox(limit: Int = 50) async throws -> [ConversationSummary] {
        let page = try await inboxPage(limit: limit)
        let summaries = page.entries.map(ConversationSummary.init)
        offline.replaceConversations(summaries)
        return summaries
    }

    /// A page of your inbox in one request (`GET /v1/me/inbox`): the conversations `filter` lists, in `sort` order,
    /// each an `InboxEntry` (last message, unread and mention counts, your membership, the other member of a direct
    /// conversation, whether you archived it), and your unread total over every conversation. Pass `nextCursor` back,
    /// with the same filter and sort, for the next page.
    ///
    /// ```swift
    /// let page = try await client.inboxPage(filter: InboxFilter(unreadOnly: true), sort: .activity, limit: 30)
    /// badge = page.totalUnread
    /// ```
    public func inboxPage(
        filter: InboxFilter = .init(), sort: InboxSort = .activity, limit: Int = 50, cursor: String? = nil
    ) async throws -> InboxPage {
        _ = try requireSession()
        let query = Operations.GetInbox.Input.Query(
            unreadOnly: filter.unreadOnly ? true : nil, _type: filter.type,
            mentionsOnly: filter.mentionsOnly ? true : nil,
            archived: filter.archived ? true : nil, conversationId: filter.conversationId, sort: sort, limit: limit,
            cursor: cursor
        )
        return try await rest.call { try await $0.getInbox(query: query).ok.body.json }
    }

    /// Archives a conversation for you: it leaves your inbox (``inboxPage(filter:sort:limit:cursor:)`` lists it with
    /// `InboxFilter(archived: true)`) until a message is sent in it after now. Others see no change.
    public func archiveConversation(id: String) async throws {
        _ = try requireSession()
        _ = try await rest.call { try await $0.archiveConversation(path: .init(conversationId: id)).noContent }
    }

    /// Brings an archived conversation back to your inbox.
    public func unarchiveConversation(id: String) async throws {
        _ = try requireSession()
        _ = try await rest.call { try await $0.unarchiveConversation(path: .init(conversationId: id)).noContent }
    }

    /// One conversation's inbox row, read from the server (a conversation the inbox did not show yet). The device
    /// keeps it with the others.
    public func conversationSummary(id: String) async throws -> ConversationSummary {
        let page = try await inboxPage(filter: InboxFilter(conversationId: id), limit: 1)
        guard let entry = page.entries.first else {
            throw ParleyError(.conversationNotFound, "No conversation \(id) in your inbox.", status: 404)
        }
        let summary = ConversationSummary(entry)
        offline.add(summary)
        return summary
    }

    /// The conversations the device kept from the last ``inbox(limit:)`` and every event since, most recently active
    /// first: what an inbox shows before (or without) the network. Empty when nobody is logged in, and after
    /// `logout()`.
    public func storedConversations() -> [ConversationSummary] {
        offline.conversations
    }

    /// A conversation's newest messages as the device kept them (at most ``AppSettings/offlineMessageLimit``),
    /// ascending, in their latest known state: from the pages message lists read and every event since. Empty when
    /// the device has none, and after a `parley.resyncRequired` for the conversation until a page is read again.
    public func storedMessages(conversationId: String) -> [Message] {
        offline.messages(conversationId: conversationId)
    }
}
