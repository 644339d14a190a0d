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
            var components = URLComponents()
            components.queryItems = parameters.sorted { $0.key < $1.key }.map {
                URLQueryItem(name: $0.key, value: $0.value)
            }
            let query = components.percentEncodedQuery.map { "?" + $0.replacingOccurrences(of: "+", with: "%2B") } ?? ""
            return try await server.request(
                "GET", "/v1/search/messages" + query, token: uid.flatMap { tokens[$0] },
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
