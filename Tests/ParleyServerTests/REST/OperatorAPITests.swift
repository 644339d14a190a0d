import Foundation
import ParleyProtocol
import ParleyServer
import ParleyStore
import ParleyTesting
import Testing

/// What the app's operator does with the REST API key (docs/PROTOCOL.md, "The app's operator"), and CORS for browsers
/// (docs/PROTOCOL.md, "Browsers"), against the real server.
@Suite(.timeLimit(.minutes(2))) struct OperatorAPITests {
    @Test func theOperatorSeesTheAppItsUsersConversationsAndMessages() async throws {
        let server = try await TestServer.start()
        let key = server.app.restAPIKey
        let alice = try await server.login("alice")
        _ = try await server.login("bob")
        let carol = try await server.login("carol")
        let group = try await server.createConversation(token: alice, with: ["bob"])
        let sent = try await server.request(
            "POST", "/v1/conversations/\(group.id)/messages", token: alice,
            body: SendMessageRequest(parts: [.text("hello")])
        )
        #expect(sent.status == 201)
        let socket = WebSocketProbe(url: server.webSocketURL, token: alice)
        _ = try await socket.nextFrame()

        let overview = await server.snapshot { $0.liveConnections == 1 }
        #expect(overview.liveConnections == 1)
        let app: AppOverview = try await server.request("GET", "/v1/app", apiKey: key).decode()
        #expect(app.appId == server.app.appId && app.allowedOrigins == [])
        #expect(app.stats.users == 3 && app.stats.conversations == 1, "\(app.stats)")
        #expect(app.stats.liveConnections == 1 && app.stats.connectedUsers == 1, "\(app.stats)")

        let page: UserList = try await server.request("GET", "/v1/users?limit=2", apiKey: key).decode()
        #expect(page.users.map(\.uid) == ["alice", "bob"] && page.nextCursor == "bob")
        let rest: UserList = try await server.request("GET", "/v1/users?limit=2&cursor=bob", apiKey: key).decode()
        #expect(rest.users.map(\.uid) == ["carol"] && rest.nextCursor == nil)

        // Every conversation of the app, with its participants and messages, though the operator is in none.
        let conversations: ConversationList = try await server.request("GET", "/v1/conversations", apiKey: key).decode()
        #expect(conversations.conversations.map(\.id) == [group.id])
        #expect(try await server.request("GET", "/v1/conversations/\(group.id)", apiKey: key).status == 200)
        let participants: ParticipantList = try await server.request(
            "GET", "/v1/conversations/\(group.id)/participants", apiKey: key
        ).decode()
        #expect(Set(participants.participants.map(\.uid)) == ["alice", "bob"])
        let history: MessagePage = try await server.request(
            "GET", "/v1/conversations/\(group.id)/messages", apiKey: key
        ).decode()
        #expect(history.messages.map(\.parts) == [[.text("hello")]])
        let one: Message = try await server.request(
            "GET", "/v1/conversations/\(group.id)/messages/\(history.messages[0].id)", apiKey: key
        ).decode()
        #expect(one == history.messages[0])
        // A user still sees only their own.
        let carols: ConversationList = try await server.request("GET", "/v1/conversations", token: carol).decode()
        #expect(carols.conversations.isEmpty)
        #expect(try await server.request("GET", "/v1/conversations/\(group.id)/messages", token: carol).status == 404)
        await socket.close()
        try await server.stop()
    }

    @Test func operatorCallsNeedThisAppsKey() async throws {
        let server = try await TestServer.start()
        let alice = try await server.login("alice")
        _ = try await server.login("bob")
        let group = try await server.createConversation(token: alice, with: ["bob"])
        let other = try await AppProvisioning.createApp(in: server.store, name: "Other")
        for (method, path) in [
            ("GET", "/v1/app"), ("PATCH", "/v1/app"), ("POST", "/v1/app/keys"), ("GET", "/v1/users"),
        ] {
            let body: UpdateAppSettingsRequest? = method == "PATCH" ? UpdateAppSettingsRequest(allowedOrigins: []) : nil
            let none = try await server.request(method, path, body: body)
            #expect(none.status == 401 && none.errorCode == .authRequired, "\(method) \(path)")
            // A user's token is not the server's key.
            let user = try await server.request(method, path, token: alice, body: body)
            #expect(user.status == 401, "\(method) \(path)")
            let forged = try await server.request(method, path, apiKey: "rk_forged", body: body)
            #expect(forged.status == 401 && forged.errorCode == .apiKeyInvalid, "\(method) \(path)")
        }
        // Another app's key sees none of this app's conversations or users.
        for path in [
            "/v1/conversations/\(group.id)", "/v1/conversations/\(group.id)/messages",
            "/v1/conversations/\(group.id)/participants", "/v1/conversations/\(group.id)/messages/m_1",
        ] {
            let answer = try await server.request("GET", path, apiKey: other.restAPIKey)
            #expect(answer.status == 404 && answer.errorCode == .conversationNotFound, "\(path)")
        }
        let theirs: ConversationList = try await server.request("GET", "/v1/conversations", apiKey: other.restAPIKey)
            .decode()
        #expect(theirs.conversations.isEmpty)
        let users: UserList = try await server.request("GET", "/v1/users", apiKey: other.restAPIKey).decode()
        #expect(users.users.isEmpty)
        // Bad pages.
        for query in ["limit=0", "limit=201", "cursor=a%00b", "limit=x"] {
            let answer = try await server.request("GET", "/v1/users?\(query)", apiKey: server.app.restAPIKey)
            #expect(answer.status == 400, "\(query)")
        }
        for query in ["cursor=x", "cursor=-1", "cursor=0"] {
            let answer = try await server.request("GET", "/v1/conversations?\(query)", apiKey: server.app.restAPIKey)
            #expect(answer.status == 400, "\(query)")
        }
        try await server.stop()
    }

    @Test func rotatingTheKeysEndsTheOldOnesAtOnce() async throws {
        let server = try await TestServer.start()
        let token = try await server.login("alice")
        let keys: AppKeys = try await server.request("POST", "/v1/app/keys", apiKey: server.app.restAPIKey).decode()
        #expect(keys.appId == server.app.appId)
        #expect(keys.restAPIKey != server.app.restAPIKey && keys.authKey != server.app.authKey)
        let old = try await server.request("GET", "/v1/app", apiKey: server.app.restAPIKey)
        #expect(old.status == 401 && old.errorCode == .apiKeyInvalid)
        #expect(try await server.request("GET", "/v1/app", apiKey: keys.restAPIKey).status == 200)
        let oldLogin = try await server.request(
            "POST", "/v1/login", body: LoginRequest(appId: server.app.appId, uid: "bob", authKey: server.app.authKey)
        )
        #expect(oldLogin.status == 401 && oldLogin.errorCode == .authKeyInvalid)
        let newLogin = try await server.request(
            "POST", "/v1/login", body: LoginRequest(appId: server.app.appId, uid: "bob", authKey: keys.authKey)
        )
        #expect(newLogin.status == 200)
        // Tokens issued before stay valid.
        #expect(try await server.request("GET", "/v1/me", token: token).status == 200)
        try await server.stop()
    }

    @Test func allowedOriginsAreNormalizedAndBounded() async throws {
        let server = try await TestServer.start()
        let key = server.app.restAPIKey
        let changed: AppOverview = try await server.request(
            "PATCH", "/v1/app", apiKey: key,
            body: UpdateAppSettingsRequest(allowedOrigins: [
                "HTTPS://Chat.Example.com:443", "http://localhost:3000", "https://chat.example.com",
                "http://[::1]:8080",
            ])
        ).decode()
        #expect(changed.allowedOrigins == ["https://chat.example.com", "http://localhost:3000", "http://[::1]:8080"])
        let kept: AppOverview = try await server.request("GET", "/v1/app", apiKey: key).decode()
        #expect(kept.allowedOrigins == changed.allowedOrigins)
        for origin in [
            "chat.example.com", "ftp://x.example", "https://x.example/path", "https://user@x.example",
            "https://x.example?q", "https://x.example:0", "https://x.example:70000", "https://", "https://a b",
            "https://x.example\u{0}", String(repeating: "a", count: 300), "null",
        ] {
            let answer = try await server.request(
                "PATCH", "/v1/app", apiKey: key, body: UpdateAppSettingsRequest(allowedOrigins: [origin])
            )
            #expect(answer.status == 400 && answer.errorCode == .badRequest, "\(origin.debugDescription)")
        }
        let tooMany = try await server.request(
            "PATCH", "/v1/app", apiKey: key,
            body: UpdateAppSettingsRequest(allowedOrigins: (0..<21).map { "https://h\($0).example" })
        )
        #expect(tooMany.status == 400)
        // Nothing refused changed what was kept.
        let after: AppOverview = try await server.request("GET", "/v1/app", apiKey: key).decode()
        #expect(after.allowedOrigins == changed.allowedOrigins)
        try await server.stop()
    }
}

/// CORS: a page may call the REST API from an origin its app allows; nothing else changes for other clients.
@Suite(.timeLimit(.minutes(2))) struct CORSTests {
    static let page = "https://chat.example.com"

    static func preflight(_ server: TestServer, origin: String, path: String = "/v1/me") async throws -> RESTAnswer {
        try await server.request(
            "OPTIONS", path,
            headers: [
                "Origin": origin, "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, content-type",
            ]
        )
    }

    @Test func anAllowedOriginGetsThePreflightAndTheAnswers() async throws {
        let server = try await TestServer.start()
        let token = try await server.login("alice")
        // Before any app allows it: the preflight is refused and answers carry no permission.
        let refused = try await Self.preflight(server, origin: Self.page)
        #expect(refused.status == 403 && refused.errorCode == .originNotAllowed)
        #expect(refused.header("access-control-allow-origin") == nil)
        let before = try await server.request("GET", "/v1/me", token: token, headers: ["Origin": Self.page])
        #expect(before.status == 200 && before.header("access-control-allow-origin") == nil)

        _ = try await server.request(
            "PATCH", "/v1/app", apiKey: server.app.restAPIKey,
            body: UpdateAppSettingsRequest(allowedOrigins: [Self.page])
        )
        let preflight = try await Self.preflight(server, origin: Self.page)
        #expect(preflight.status == 204)
        #expect(preflight.header("access-control-allow-origin") == Self.page)
        #expect(preflight.header("access-control-allow-methods")?.contains("PATCH") == true)
        let allowedHeaders = preflight.header("access-control-allow-headers")?.lowercased() ?? ""
        #expect(allowedHeaders.contains("authorization") && allowedHeaders.contains("content-type"))
        // The REST API key is a server's secret: no page is allowed to send it.
        #expect(!allowedHeaders.contains("x-parley-api-key"))
        #expect(preflight.header("access-control-allow-credentials") == nil)
        #expect(preflight.header("vary")?.contains("Origin") == true)

        let answer = try await server.request("GET", "/v1/me", token: token, headers: ["Origin": Self.page])
        #expect(answer.status == 200 && answer.header("access-control-allow-origin") == Self.page)
        // Refusals carry it too, so that the page can read the error.
        let refusal = try await server.request("GET", "/v1/me", token: "pt_forged", headers: ["Origin": Self.page])
        #expect(refusal.status == 401 && refusal.header("access-control-allow-origin") == Self.page)
        let login = try await server.request(
            "POST", "/v1/login", headers: ["Origin": Self.page],
            body: LoginRequest(appId: server.app.appId, uid: "bob", authKey: server.app.authKey)
        )
        #expect(login.status == 200 && login.header("access-control-allow-origin") == Self.page)

        // Another origin: nothing; no Origin (a native client): no CORS fields at all.
        let other = try await server.request("GET", "/v1/me", token: token, headers: ["Origin": "https://evil.example"])
        #expect(other.status == 200 && other.header("access-control-allow-origin") == nil)
        #expect(try await Self.preflight(server, origin: "https://evil.example").status == 403)
        let native = try await server.request("GET", "/v1/me", token: token)
        #expect(native.header("access-control-allow-origin") == nil && native.header("vary") == nil)
        try await server.stop()
    }

    /// Origins are per app: a page allowed for one app gets no permission for another app's answers.
    @Test func anOriginAllowedByOneAppIsNotAllowedForAnother() async throws {
        let server = try await TestServer.start()
        let other = try await AppProvisioning.createApp(in: server.store, name: "Other")
        _ = try await server.request(
            "PATCH", "/v1/app", apiKey: other.restAPIKey, body: UpdateAppSettingsRequest(allowedOrigins: [Self.page])
        )
        let theirs = try await server.request(
            "POST", "/v1/login", headers: ["Origin": Self.page],
            body: LoginRequest(appId: other.appId, uid: "zed", authKey: other.authKey)
        )
        #expect(theirs.status == 200 && theirs.header("access-control-allow-origin") == Self.page)
        let token = try await server.login("alice")
        let ours = try await server.request("GET", "/v1/me", token: token, headers: ["Origin": Self.page])
        #expect(ours.status == 200 && ours.header("access-control-allow-origin") == nil)
        // `*` allows any origin for that app.
        _ = try await server.request(
            "PATCH", "/v1/app", apiKey: server.app.restAPIKey, body: UpdateAppSettingsRequest(allowedOrigins: ["*"])
        )
        let any = try await server.request("GET", "/v1/me", token: token, headers: ["Origin": "http://localhost:5173"])
        #expect(any.header("access-control-allow-origin") == "http://localhost:5173")
        try await server.stop()
    }
}
