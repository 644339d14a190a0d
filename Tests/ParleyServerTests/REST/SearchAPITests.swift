import Foundation
import ParleyProtocol
import ParleyServer
import ParleyTesting
import Testing

/// `GET /v1/search/messages` over HTTP (docs/PROTOCOL.md, "Search"): who finds what, the snippet, and the answers to
/// bad searches. The stores' rules are in `SearchConformanceTests`.
@Suite(.timeLimit(.minutes(2))) struct SearchAPITests {
    struct Setup {
        let server: TestServer
        let tokens: [String: String]
        /// alice (owner) and bob.
        let group: String
        /// carol (owner) and erin.
        let other: String

        func search(_ parameters: [String: String], as uid: String? = "alice", apiKey: Bool = false) async throws
            -> RESTAnswer
        {
            try await server.get(
                "/v1/search/messages", parameters, token: uid.flatMap { tokens[$0] },
                apiKey: apiKey ? server.app.restAPIKey : nil
            )
        }

        /// The results, once everything stored is filed (the indexer files after the commit).
        func found(_ parameters: [String: String], as uid: String? = "alice", apiKey: Bool = false) async throws
            -> MessageSearchResults
        {
            #expect(await server.application.fileSearchIndex())
            let answer = try await search(parameters, as: uid, apiKey: apiKey)
            #expect(answer.status == 200, "\(String(decoding: answer.body, as: UTF8.self))")
            return try answer.decode(MessageSearchResults.self)
        }

        func send(_ text: String, in conversation: String, as uid: String) async throws -> Message {
            try await server.request(
                "POST", "/v1/conversations/\(conversation)/messages", token: tokens[uid],
                body: SendMessageRequest(parts: [.text(text)])
            ).decode()
        }
    }

    func setup() async throws -> Setup {
        let server = try await TestServer.start()
        var tokens: [String: String] = [:]
        for uid in ["alice", "bob", "carol", "erin"] { tokens[uid] = try await server.login(uid) }
        let group = try await server.createConversation(token: tokens["alice"]!, with: ["bob"])
        let other = try await server.createConversation(token: tokens["carol"]!, with: ["erin"])
        return Setup(server: server, tokens: tokens, group: group.id, other: other.id)
    }

    @Test func aUserFindsTheirConversationsMessagesAndTheAppsServerFindsAll() async throws {
        let setup = try await setup()
        let mine = try await setup.send("The quarterly Café report is ready", in: setup.group, as: "bob")
        let theirs = try await setup.send("quarterly budget", in: setup.other, as: "erin")

        let alice = try await setup.found(["q": "QUARTERLY cafe"])
        #expect(alice.results.map(\.message.id) == [mine.id])
        #expect(alice.nextCursor == nil)
        let snippet = try #require(alice.results.first?.snippet)
        #expect(snippet.text == "The quarterly Café report is ready")
        #expect(snippet.matches == [TextRange(start: 4, length: 9), TextRange(start: 14, length: 4)])
        #expect(try await setup.found(["q": "quarterly"], as: "erin").results.map(\.message.id) == [theirs.id])
        let all = try await setup.found(["q": "quarter"], as: nil, apiKey: true)
        #expect(all.results.map(\.message.id) == [theirs.id, mine.id])

        // Another's conversation is not found, as a filter or otherwise.
        let foreign = try await setup.search(["q": "quarterly", "conversationId": setup.other])
        #expect(foreign.status == 404 && foreign.errorCode == .conversationNotFound)
        let within = try await setup.found(["q": "quarterly", "conversationId": setup.group])
        #expect(within.results.map(\.message.id) == [mine.id])

        // A deletion takes the message out of search at once.
        let deleted = try await setup.server.request(
            "DELETE", "/v1/conversations/\(setup.group)/messages/\(mine.id)", token: setup.tokens["bob"])
        #expect(deleted.status == 200)
        let after = try await setup.search(["q": "quarterly"])
        #expect(try after.decode(MessageSearchResults.self).results.isEmpty)
        try await setup.server.stop()
    }

    /// A search that runs out of the server's time is stopped: 503 `ERR_SEARCH_TIMEOUT` (the stores' bounds are in
    /// `SearchConformanceTests`; a deadline already passed stops any search).
    @Test func aSearchPastTheServersTimeLimitAnswers503() async throws {
        let server = try await TestServer.start { $0.searchTimeLimit = .nanoseconds(1) }
        let alice = try await server.login("alice")
        let group = try await server.createConversation(token: alice, with: [])
        for index in 0..<20 {
            _ = try await server.request(
                "POST", "/v1/conversations/\(group.id)/messages", token: alice,
                body: SendMessageRequest(parts: [.text("common \(index)")]))
        }
        #expect(await server.application.fileSearchIndex())
        let answer = try await server.get("/v1/search/messages", ["q": "common"], token: alice)
        #expect(answer.status == 503 && answer.errorCode == .searchTimeout, "\(answer.status)")
        try await server.stop()
    }

    @Test func badSearchesGetDocumentedCodes() async throws {
        let setup = try await setup()
        _ = try await setup.send("hello world", in: setup.group, as: "bob")
        let cases: [([String: String], Int, ErrorCode)] = [
            ([:], 400, .badRequest),
            (["q": "  \"\" ()  "], 400, .badRequest),
            (["q": String(repeating: "x", count: 257)], 400, .fieldTooLarge),
            (["q": (1...17).map { "w\($0)" }.joined(separator: " ")], 400, .fieldTooLarge),
            (["q": "a\u{0}b"], 400, .badRequest),
            (["q": "hello", "limit": "0"], 400, .badRequest),
            (["q": "hello", "limit": "201"], 400, .badRequest),
            (["q": "hello", "limit": "-5"], 400, .badRequest),
            (["q": "hello", "cursor": "garbage"], 400, .badRequest),
            (["q": "hello", "cursor": "r50"], 400, .badRequest),
            (["q": "hello", "order": "relevance", "cursor": "p12"], 400, .badRequest),
            (["q": "hello", "order": "sideways"], 400, .badRequest),
            (["q": "hello", "sender": "not a uid"], 400, .invalidUID),
            (["q": "hello", "sentBefore": "-1"], 400, .badRequest),
            (["q": "hello", "hasFile": "maybe"], 400, .badRequest),
            (["q": "hello", "conversationId": "c_nope"], 404, .conversationNotFound),
        ]
        for (parameters, status, code) in cases {
            let answer = try await setup.search(parameters)
            #expect(answer.status == status && answer.errorCode == code, "\(parameters): \(answer.status)")
        }
        #expect(try await setup.search(["q": "hello"], as: nil).errorCode == .authRequired)
        // The engines' operators and quotes are words or separators, never an error.
        for text in [
            "hello OR world", "\"hello", "hello*", "NEAR(hello world)", "world:hello", "'; DROP TABLE", "-(hello",
            "&|!<->hello",
        ] {
            let answer = try await setup.search(["q": text])
            #expect(answer.status == 200, "\(text): \(answer.status)")
        }
        #expect(try await setup.found(["q": "\"hello world"]).results.count == 1)
        try await setup.server.stop()
    }
}

/// History opened at a message (`around`) and read forward (`after`): docs/PROTOCOL.md, "Pagination".
extension SearchAPITests {
    @Test func historyOpensAroundAMessageAndPagesBothWays() async throws {
        let setup = try await setup()
        var sent: [Message] = []
        for index in 1...9 { sent.append(try await setup.send("m\(index)", in: setup.group, as: "bob")) }
        let path = "/v1/conversations/\(setup.group)/messages"
        let token = setup.tokens["alice"]
        let around = try await setup.server.request("GET", path + "?around=\(sent[4].seq)&limit=4", token: token)
            .decode(MessagePage.self)
        #expect(around.messages.map(\.text) == ["m4", "m5", "m6", "m7"])
        #expect(around.lastSeq == sent[8].seq)
        let older = try await setup.server.request(
            "GET", path + "?cursor=\(try #require(around.nextCursor))&limit=10", token: token
        ).decode(MessagePage.self)
        #expect(older.messages.map(\.text).suffix(3) == ["m1", "m2", "m3"])
        let newer = try await setup.server.request(
            "GET", path + "?after=\(try #require(around.newerCursor))&limit=2", token: token
        ).decode(MessagePage.self)
        #expect(newer.messages.map(\.text) == ["m8", "m9"] && newer.newerCursor != nil && newer.nextCursor == nil)
        let end = try await setup.server.request(
            "GET", path + "?after=\(try #require(newer.newerCursor))", token: token
        ).decode(MessagePage.self)
        #expect(end.messages.isEmpty && end.newerCursor == nil)
        // The newest message: everything before it, nothing after.
        let last = try await setup.server.request("GET", path + "?around=\(sent[8].seq)&limit=6", token: token)
            .decode(MessagePage.self)
        #expect(last.messages.map(\.text) == ["m4", "m5", "m6", "m7", "m8", "m9"] && last.newerCursor == nil)

        for query in [
            "around=0", "around=-3", "after=-1", "around=5&after=5", "around=5&cursor=9", "around=x",
            "around=9223372036854775807",
        ] {
            let answer = try await setup.server.request("GET", path + "?" + query, token: token)
            #expect(answer.status == 400 && answer.errorCode == .badRequest, "\(query): \(answer.status)")
        }
        let outsider = try await setup.server.request("GET", path + "?around=3", token: setup.tokens["erin"])
        #expect(outsider.status == 404 && outsider.errorCode == .conversationNotFound)
        try await setup.server.stop()
    }
}
