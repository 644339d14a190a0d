import Foundation
import ParleyProtocol
import ParleyServer
import ParleyTesting
import Testing

/// `GET /v1/search/users` over HTTP (docs/PROTOCOL.md, "Finding users"): who finds whom under the app's setting, and
/// the answers to bad searches. The stores' rules are in `UserDirectoryConformanceTests`.
@Suite(.timeLimit(.minutes(2))) struct UserDirectoryAPITests {
    struct Setup {
        let server: TestServer
        let tokens: [String: String]

        func search(_ parameters: [String: String], as uid: String? = "alice", apiKey: Bool = false) async throws
            -> RESTAnswer
        {
            try await server.get(
                "/v1/search/users", parameters, token: uid.flatMap { tokens[$0] },
                apiKey: apiKey ? server.app.restAPIKey : nil
            )
        }

        /// The uids found.
        func found(_ q: String, as uid: String? = "alice", apiKey: Bool = false) async throws -> [String] {
            let answer = try await search(["q": q], as: uid, apiKey: apiKey)
            #expect(answer.status == 200, "\(String(decoding: answer.body, as: UTF8.self))")
            return try answer.decode(UserList.self).users.map(\.uid)
        }

        func setDirectory(_ visibility: String) async throws -> RESTAnswer {
            try await server.request(
                "PATCH", "/v1/app", apiKey: server.app.restAPIKey, body: ["userDirectory": visibility]
            )
        }
    }

    /// alice and bob share a group; carol and dave share nothing with alice. Names set by each user.
    func setup() async throws -> Setup {
        let server = try await TestServer.start()
        var tokens: [String: String] = [:]
        let names = ["alice": "Alice Martin", "bob": "Bob Marley", "carol": "Carol Mårtensson", "dave": "Dave Marsh"]
        for (uid, name) in names {
            tokens[uid] = try await server.login(uid)
            let renamed = try await server.request(
                "PATCH", "/v1/users/\(uid)", token: tokens[uid], body: UpdateUserRequest(name: name)
            )
            #expect(renamed.status == 200)
        }
        _ = try await server.createConversation(token: tokens["alice"]!, with: ["bob"])
        return Setup(server: server, tokens: tokens)
    }

    @Test func usersFindWhomTheAppsSettingLetsThemFind() async throws {
        let setup = try await setup()
        #expect(try await setup.found("mar") == ["bob", "dave", "carol"], "by word: marley, marsh, martensson")
        #expect(try await setup.found("MART") == ["carol"], "folded; never the caller")
        #expect(try await setup.found("mar", as: nil, apiKey: true) == ["bob", "dave", "carol", "alice"])

        // Contacts only: alice finds bob (their group), not carol or dave; the server still finds everyone.
        let changed = try await setup.setDirectory("contacts")
        #expect(changed.status == 200)
        #expect(try changed.decode(AppOverview.self).userDirectory == .contacts)
        #expect(try await setup.found("mar") == ["bob"])
        #expect(try await setup.found("mar", as: "carol").isEmpty)
        #expect(try await setup.found("mar", as: nil, apiKey: true).count == 4)
        let overview = try await setup.server.request("GET", "/v1/app", apiKey: setup.server.app.restAPIKey)
        #expect(try overview.decode(AppOverview.self).userDirectory == .contacts)

        // Blocks hide both ways, whatever the setting.
        #expect(try await setup.setDirectory("everyone").status == 200)
        let blocked = try await setup.server.request(
            "PUT", "/v1/me/blocks/dave", token: setup.tokens["alice"]
        )
        #expect(blocked.status == 200 || blocked.status == 201)
        #expect(try await setup.found("mar") == ["bob", "carol"])
        #expect(try await setup.found("mar", as: "dave") == ["bob", "carol"])

        // A renamed user is found by the new name at once.
        _ = try await setup.server.request(
            "PATCH", "/v1/users/carol", token: setup.tokens["carol"], body: UpdateUserRequest(name: "Carol Quinn")
        )
        #expect(try await setup.found("quin") == ["carol"])
        #expect(try await setup.found("mart").isEmpty)
        try await setup.server.stop()
    }

    @Test func pagesFollowTheCursor() async throws {
        let setup = try await setup()
        var seen: [String] = []
        var cursor: String?
        repeat {
            var parameters = ["q": "mar", "limit": "1"]
            parameters["cursor"] = cursor
            let page = try await setup.search(parameters, as: nil, apiKey: true).decode(UserList.self)
            #expect(page.users.count <= 1)
            seen += page.users.map(\.uid)
            cursor = page.nextCursor
        } while cursor != nil && seen.count < 10
        #expect(seen == ["bob", "dave", "carol", "alice"])
        try await setup.server.stop()
    }

    @Test func badSearchesGetDocumentedCodes() async throws {
        let setup = try await setup()
        let cases: [([String: String], Int, ErrorCode)] = [
            ([:], 400, .badRequest),
            (["q": ""], 400, .badRequest),
            (["q": " _-.@%*' "], 400, .badRequest),
            (["q": String(repeating: "x", count: 65)], 400, .fieldTooLarge),
            (["q": (1...9).map { "w\($0)" }.joined(separator: " ")], 400, .fieldTooLarge),
            (["q": "a\u{0}b"], 400, .badRequest),
            (["q": "mar", "limit": "0"], 400, .badRequest),
            (["q": "mar", "limit": "201"], 400, .badRequest),
            (["q": "mar", "limit": "-5"], 400, .badRequest),
            (["q": "mar", "cursor": "garbage"], 400, .badRequest),
            (["q": "mar", "cursor": "p1.2.3"], 400, .badRequest),
            (["q": "mar", "cursor": "u" + String(repeating: "A", count: 600)], 400, .badRequest),
            (["q": "mar", "cursor": "u" + Data("marley\nnot a uid".utf8).base64EncodedString()], 400, .badRequest),
            (["q": "mar", "cursor": "u" + Data("0\nmarley\nnot a uid".utf8).base64EncodedString()], 400, .badRequest),
            (["q": "mar", "cursor": "u" + Data("1\nmarley\nbob".utf8).base64EncodedString()], 400, .badRequest),
            (["q": "mar", "cursor": "u" + Data("9\nmarley\nbob".utf8).base64EncodedString()], 400, .badRequest),
        ]
        for (parameters, status, code) in cases {
            let answer = try await setup.search(parameters)
            #expect(answer.status == status && answer.errorCode == code, "\(parameters): \(answer.status)")
        }
        #expect(try await setup.search(["q": "mar"], as: nil).errorCode == .authRequired)
        let wrongToken = try await setup.server.request("GET", "/v1/search/users?q=mar", token: "nope")
        #expect(wrongToken.status == 401)
        // SQL's and LIKE's specials are separators.
        for text in ["mar%", "m_r", "'; DROP TABLE users; --", "mar\\", "ma*"] {
            let answer = try await setup.search(["q": text])
            #expect(answer.status == 200, "\(text): \(answer.status)")
        }
        #expect(try await setup.found("mar%") == ["bob", "dave", "carol"])
        let wrongSetting = try await setup.setDirectory("nobody")
        #expect(wrongSetting.status == 400 && wrongSetting.errorCode == .badRequest)
        try await setup.server.stop()
    }
}
