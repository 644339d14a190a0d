import ParleyAPI
import ParleyAPIServer
import ParleyProtocol
import ParleyStore

extension APIHandler {
    // MARK: Search

    /// `GET /v1/search/messages`: a user's search over the conversations they are in, or the app's server's over the
    /// whole app (``MessageSearch``).
    func searchMessages(_ input: Operations.SearchMessages.Input) async throws -> Operations.SearchMessages.Output {
        let caller = try await authenticator.caller(credentials)
        let parameters = input.query
        let limit = try Self.pageSize(parameters.limit)
        try InputRules.text(parameters.q, "q")
        let query = try SearchQuery.parse(parameters.q ?? "")
        let hasFile = parameters.hasFile ?? false
        guard !query.terms.isEmpty || hasFile else {
            throw DomainError(
                .badRequest, "Search for at least one word (`q`), or for messages with files (`hasFile=true`)."
            )
        }
        if let sender = parameters.sender { try InputRules.uid(sender) }
        try InputRules.position(parameters.sentBefore, "sentBefore")
        try InputRules.position(parameters.sentAfter, "sentAfter")
        if let conversationId = parameters.conversationId {
            try InputRules.identifier(conversationId, "conversationId")
            _ = try await visibleConversation(caller, conversationId: conversationId)
        }
        let viewer: String?
        if case .user(let principal) = caller { viewer = principal.uid } else { viewer = nil }
        let page = try await store.searchMessages(
            MessageSearchRequest(
                appId: caller.appId, viewer: viewer, query: query, conversationId: parameters.conversationId,
                sender: parameters.sender, hasFile: hasFile, sentBefore: parameters.sentBefore,
                sentAfter: parameters.sentAfter, order: parameters.order == .relevance ? .relevance : .newest,
                cursor: parameters.cursor, limit: limit
            )
        )
        let results = page.messages.map {
            MessageSearchResult(message: $0, snippet: MessageSearch.snippet(of: $0, for: query))
        }
        return .ok(.init(body: .json(MessageSearchResults(results: results, nextCursor: page.nextCursor))))
    }
}
