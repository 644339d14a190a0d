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
                cursor: parameters.cursor, limit: limit, timeLimit: configuration.searchTimeLimit
            )
        )
        let results = page.messages.map {
            MessageSearchResult(message: $0, snippet: MessageSearch.snippet(of: $0, for: query))
        }
        return .ok(.init(body: .json(MessageSearchResults(results: results, nextCursor: page.nextCursor))))
    }
}

extension APIHandler {
    /// `GET /v1/search/users`: users found by the beginnings of their words (``UserDirectory``); a user finds whom the
    /// app's ``AppRecord/userDirectory`` lets them find, the app's server every user.
    func searchUsers(_ input: Operations.SearchUsers.Input) async throws -> Operations.SearchUsers.Output {
        let caller = try await authenticator.caller(credentials)
        let limit = try Self.pageSize(input.query.limit)
        try InputRules.text(input.query.q, "q")
        let prefixes = try UserDirectory.prefixes(of: input.query.q)
        let after = try input.query.cursor.map(UserSearchCursor.init(parsing:))
        var viewer: String?
        var visibility = UserDirectoryVisibility.everyone
        if case .user(let principal) = caller {
            guard let app = try await store.app(id: caller.appId) else { throw Self.invalidApp(caller.appId) }
            (viewer, visibility) = (principal.uid, app.userDirectory)
        }
        // The leading word: the cursor's, or the rarest (a few index entries counted for each word).
        let lead: Int
        if let after {
            guard after.lead < prefixes.count else { throw DomainError(.badRequest, "Invalid cursor.") }
            lead = after.lead
        } else if prefixes.count > 1 {
            lead = UserDirectory.lead(
                counts: try await store.userWordCounts(
                    appId: caller.appId, prefixes: prefixes, cap: UserDirectory.leadProbe))
        } else {
            lead = 0
        }
        let page = try await store.searchUsers(
            UserSearchRequest(
                appId: caller.appId, prefixes: prefixes, lead: lead, viewer: viewer, visibility: visibility,
                after: after, limit: limit
            )
        )
        return .ok(.init(body: .json(UserList(users: page.users, nextCursor: page.nextCursor))))
    }
}
