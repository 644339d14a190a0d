import Foundation
import ParleyProtocol
import ParleyServer
import ParleyTesting
import Testing

/// `GET /v1/me/inbox` and `PUT|DELETE /v1/conversations/{id}/archive` over HTTP (docs/PROTOCOL.md, "The inbox"). The
/// stores' rules are in `InboxConformanceTests`.
@Suite(.timeLimit(.minutes(2))) struct InboxAPITests {
    struct Setup {
        let server: TestServer
        let tokens: [String: String]
        /// alice (owner) and bob.
        let group: String
        /// carol and alice.
        let direct: String
        /// carol (owner) and erin.
        let other: String

        func inbox(_ parameters: [String: String] = [:], as uid: String = "alice") async throws -> RESTAnswer {
            try await server.get("/v1/me/inbox", parameters, token: tokens[uid])
        }

        func page(_ parameters: [String: String] = [:], as uid: String = "alice") async throws -> InboxPage {
            let answer = try await inbox(parameters, as: uid)
            #expect(answer.status == 200, "\(String(decoding: answer.body, as: UTF8.self))")
            return try answer.decode(InboxPage.self)
        }

        func send(_ text: String, in conversation: String, as uid: String, mentions: [String]? = nil) async throws
            -> Message
        {
            try await server.request(
                "POST", "/v1/conversations/\(conversation)/messages", token: tokens[uid],
                body: SendMessageRequest(parts: [.text(text)], mentions: mentions)
            ).decode()
        }

        func archive(_ conversation: String, _ method: String = "PUT", as uid: String = "alice") async throws
            -> RESTAnswer
        {
            try await server.request("\(method)", "/v1/conversations/\(conversation)/archive", token: tokens[uid])
        }
    }

    func setup() async throws -> Setup {
        let server = try await TestServer.start()
        var tokens: [String: String] = [:]
        for uid in ["alice", "bob", "carol", "erin"] { tokens[uid] = try await server.login(uid) }
        let group = try await server.createConversation(token: tokens["alice"]!, with: ["bob"])
        let direct = try await server.createConversation(token: tokens["carol"]!, type: .direct, with: ["alice"])
        let other = try await server.createConversation(token: tokens["carol"]!, with: ["erin"])
        return Setup(server: server, tokens: tokens, group: group.id, direct: direct.id, other: other.id)
    }

    @Test func oneRequestGivesTheInboxFilteredSortedAndArchived() async throws {
        let setup = try await setup()
        _ = try await setup.send("hi @alice", in: setup.group, as: "bob", mentions: ["alice"])
        let last = try await setup.send("hello", in: setup.direct, as: "carol")
        _ = try await setup.send("not for alice", in: setup.other, as: "erin")

        let page = try await setup.page()
        #expect(page.entries.map(\.id) == [setup.direct, setup.group] && page.totalUnread == 2)
        #expect(page.entries[0].lastMessage?.id == last.id && page.entries[0].otherMember?.uid == "carol")
        #expect(page.entries[1].unreadMentions == 1 && page.entries[1].membership.role == .owner)
        #expect(try await setup.page(["type": "group"]).entries.map(\.id) == [setup.group])
        #expect(try await setup.page(["conversationId": setup.direct]).entries.map(\.id) == [setup.direct])
        #expect(try await setup.page(["conversationId": setup.other]).entries.isEmpty, "not alice's")
        #expect(try await setup.page(["mentionsOnly": "true"]).entries.map(\.id) == [setup.group])
        #expect(try await setup.page(["unreadOnly": "true", "sort": "unread"]).entries.count == 2)
        let first = try await setup.page(["limit": "1"])
        #expect(first.entries.map(\.id) == [setup.direct])
        let second = try await setup.page(["limit": "1", "cursor": try #require(first.nextCursor)])
        #expect(second.entries.map(\.id) == [setup.group])

        // Archived: out of the inbox, listed alone, back with the next message; the others see no change.
        #expect(try await setup.archive(setup.group).status == 204)
        #expect(try await setup.page().entries.map(\.id) == [setup.direct])
        #expect(try await setup.page(["archived": "true"]).entries.map(\.id) == [setup.group])
        #expect(try await setup.page(as: "bob").entries.map(\.id) == [setup.group])
        _ = try await setup.send("again", in: setup.group, as: "bob")
        #expect(try await setup.page().entries.map(\.id) == [setup.group, setup.direct])
        #expect(try await setup.archive(setup.direct).status == 204)
        #expect(try await setup.archive(setup.direct, "DELETE").status == 204)
        #expect(try await setup.page().entries.count == 2)
        try await setup.server.stop()
    }

    @Test func badInboxRequestsGetDocumentedCodes() async throws {
        let setup = try await setup()
        let cases: [[String: String]] = [
            ["limit": "0"], ["limit": "201"], ["limit": "-1"], ["cursor": "garbage"], ["cursor": "u1.2.3"],
            ["sort": "unread", "cursor": "a1.2"], ["sort": "sideways"], ["type": "triangle"], ["unreadOnly": "maybe"],
            ["archived": "2"], ["cursor": "a9223372036854775808.1"],
            ["conversationId": String(repeating: "c", count: 300)],
        ]
        for parameters in cases {
            let answer = try await setup.inbox(parameters)
            #expect(answer.status == 400 && answer.errorCode == .badRequest, "\(parameters): \(answer.status)")
        }
        let anonymous = try await setup.server.get("/v1/me/inbox", [:])
        #expect(anonymous.status == 401 && anonymous.errorCode == .authRequired)
        let server = try await setup.server.get("/v1/me/inbox", [:], apiKey: setup.server.app.restAPIKey)
        #expect(server.status == 401 && server.errorCode == .authRequired, "a user's inbox needs a user's token")

        // Archiving someone else's conversation, or none, is not found; without a token, refused.
        #expect(try await setup.archive(setup.other).status == 404)
        #expect(try await setup.archive("c_nope").status == 404)
        #expect(try await setup.archive(String(repeating: "c", count: 300)).status == 400)
        let unauthenticated = try await setup.server.request("PUT", "/v1/conversations/\(setup.group)/archive")
        #expect(unauthenticated.status == 401)
        try await setup.server.stop()
    }
}
