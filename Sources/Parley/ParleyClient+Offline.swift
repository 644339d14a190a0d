import Foundation

// The inbox from the server, and what the device keeps of it to show offline (AppSettings.offlineMessageLimit).

extension ParleyClient {
    /// Your conversations, most recently active first, each with its newest message and your unread count: an inbox
    /// screen's rows, read from the server. The device keeps them (``storedConversations()``).
    ///
    /// - Parameter limit: How many conversations (the most recently active).
    public func inbox(limit: Int = 50) async throws -> [ConversationSummary] {
        let list = try await conversations(limit: limit)
        let unread = try await unreadCounts()
        var summaries: [ConversationSummary] = []
        for conversation in list.conversations {
            summaries.append(try await summary(of: conversation, unread: unread))
        }
        summaries = ConversationSummary.byActivity(summaries)
        offline.replaceConversations(summaries)
        return summaries
    }

    /// One conversation's inbox row, read from the server (a conversation the inbox did not show yet). The device
    /// keeps it with the others.
    public func conversationSummary(id: String) async throws -> ConversationSummary {
        let conversation = try await self.conversation(id: id)
        let summary = try await summary(of: conversation, unread: try await unreadCounts())
        offline.add(summary)
        return summary
    }

    private func summary(of conversation: Conversation, unread: UnreadSummary) async throws -> ConversationSummary {
        let last = try await fetchMessages(conversationId: conversation.id, limit: 1).messages.last
        let count = unread.conversations.first { $0.conversationId == conversation.id }?.unread ?? 0
        return ConversationSummary(conversation: conversation, lastMessage: last, unread: count)
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
