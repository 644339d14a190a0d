import Foundation
import ParleyProtocol
import ParleyServer
import ParleyStore
import ParleyTesting
import Testing

/// docs/PROTOCOL.md, "Limits": U+0000 and control characters are refused in identifiers, names keep every character
/// they may have, sizes are bounded with documented codes, and numbers are checked against the OpenAPI document's
/// bounds; over REST and over the socket alike.
@Suite(.timeLimit(.minutes(3))) struct InputRulesTests {
    /// The bug this fixes: "a\u{0}one" and "a\u{0}two" were one client message id to SQLite (cut at the NUL), so the
    /// second message was answered as a duplicate of the first and never stored.
    @Test func clientMessageIdsWithANulAreRefusedNotCut() async throws {
        let server = try await TestServer.startForEdgeTests()
        let alice = try await server.login("alice")
        _ = try await server.login("bob")
        let conversation = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        for id in ["a\u{0}one", "a\u{0}two", "tab\there", "c1\u{85}x"] {
            let answer = try await server.request(
                "POST", "/v1/conversations/\(conversation.id)/messages", token: alice,
                body: SendMessageRequest(clientMessageId: id, parts: [.text("hi")])
            )
            #expect(answer.status == 400 && answer.errorCode == .badRequest, "\(id.debugDescription)")
        }
        // Over the socket: the same refusal, with the frame's ref.
        let socket = WebSocketProbe(url: server.webSocketURL, token: alice)
        _ = try await socket.nextFrame()
        try await socket.send(
            .send(
                SendFrame(
                    ref: "r1", conversationId: conversation.id, clientMessageId: "a\u{0}one", parts: [.text("hi")]))
        )
        guard case .error(let error) = try await socket.nextFrame() else {
            Issue.record("no error")
            return
        }
        #expect(error.code == .badRequest && error.ref == "r1")
        // Nothing was stored.
        let history = try await server.request("GET", "/v1/conversations/\(conversation.id)/messages", token: alice)
        #expect(try history.decode(MessagePage.self).messages.isEmpty)
        await socket.close()
        try await server.stop()
    }

    @Test func identifiersInFramesAreCheckedToo() async throws {
        let server = try await TestServer.startForEdgeTests()
        let alice = try await server.login("alice")
        _ = try await server.login("bob")
        let conversation = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        let socket = WebSocketProbe(url: server.webSocketURL, token: alice)
        _ = try await socket.nextFrame()
        let frames: [ClientFrame] = [
            .send(SendFrame(ref: "r2", conversationId: conversation.id + "\u{0}x", parts: [.text("hi")])),
            .send(SendFrame(ref: "r3", conversationId: conversation.id, parts: [.text("nul \u{0} in text")])),
            .receipt(ReceiptFrame(ref: "r4", conversationId: conversation.id, readSeq: -1)),
            .receipt(ReceiptFrame(ref: "r5", conversationId: conversation.id, deliveredSeq: -5)),
            .send(
                SendFrame(
                    ref: String(repeating: "r", count: 129), conversationId: conversation.id, parts: [.text("hi")])),
        ]
        for frame in frames {
            try await socket.send(frame)
            guard case .error(let error) = try await socket.nextFrame() else {
                Issue.record("no error for \(frame)")
                continue
            }
            #expect(error.code == .badRequest, "\(frame)")
        }
        await socket.close()
        try await server.stop()
    }

    @Test func namesKeepEveryCharacterTheyMayHave() async throws {
        let server = try await TestServer.startForEdgeTests()
        let alice = try await server.login("alice")
        _ = try await server.login("bob")
        // Emoji with modifiers and joiners, combining marks, right-to-left text, CJK, a zero-width joiner alone.
        let names = ["👩🏽‍💻 Zoë", "e\u{301}e\u{301}", "مرحبا بالعالم", "中文名字", "a\u{200D}b"]
        for name in names {
            let answer = try await server.request(
                "PATCH", "/v1/users/alice", token: alice, body: UpdateUserRequest(name: name))
            #expect(answer.status == 200)
            #expect(try answer.decode(User.self).name == name)
            let read = try await server.request("GET", "/v1/users/alice", token: alice)
            #expect(try read.decode(User.self).name == name, "\(name.debugDescription)")
        }
        let group = try await server.request(
            "POST", "/v1/conversations", token: alice,
            body: CreateConversationRequest(
                type: .group, participants: ["bob"], name: names[0], description: "line 1\nline 2\ttab")
        )
        #expect(group.status == 201)
        let conversation = try group.decode(Conversation.self)
        #expect(conversation.name == names[0] && conversation.description == "line 1\nline 2\ttab")
        try await server.stop()
    }

    @Test func namesAvatarsAndMetadataAreBounded() async throws {
        let server = try await TestServer.startForEdgeTests()
        let alice = try await server.login("alice")
        let refusals: [(UpdateUserRequest, ErrorCode)] = [
            (UpdateUserRequest(name: "nul\u{0}name"), .badRequest),
            (UpdateUserRequest(name: "new\nline"), .badRequest),
            (UpdateUserRequest(name: String(repeating: "n", count: 257)), .fieldTooLarge),
            (UpdateUserRequest(name: String(repeating: "é", count: 129)), .fieldTooLarge),
            (UpdateUserRequest(avatarURL: "javascript:alert(1)"), .badRequest),
            // A space or a `/` that a combining mark follows is one character with it, not a space or a `/`: the
            // rules count bytes (found by the schemathesis run, docs/RELIABILITY.md).
            (UpdateUserRequest(avatarURL: "http://a \u{301}b"), .badRequest),
            (UpdateUserRequest(avatarURL: "https://x/" + String(repeating: "a", count: 2048)), .fieldTooLarge),
            (UpdateUserRequest(metadata: ["k": .string(String(repeating: "m", count: 17 * 1024))]), .fieldTooLarge),
            (UpdateUserRequest(metadata: ["k\u{0}": 1]), .badRequest),
            (UpdateUserRequest(metadata: ["k": "v\u{0}"]), .badRequest),
        ]
        for (update, code) in refusals {
            let answer = try await server.request("PATCH", "/v1/users/alice", token: alice, body: update)
            #expect(answer.status == 400 && answer.errorCode == code, "\(update)")
        }
        let big = try await server.request(
            "POST", "/v1/conversations", token: alice,
            body: CreateConversationRequest(
                type: .group, participants: ["bob"], description: String(repeating: "d", count: 4097))
        )
        #expect(big.status == 400 && big.errorCode == .fieldTooLarge)
        let many = try await server.request(
            "POST", "/v1/conversations", token: alice,
            body: CreateConversationRequest(type: .group, participants: (0...1000).map { "u\($0)" })
        )
        #expect(many.status == 400 && many.errorCode == .fieldTooLarge)
        // The user is as it was.
        let user = try await server.request("GET", "/v1/users/alice", token: alice).decode(User.self)
        #expect(user.name == "alice" && user.avatarURL == nil && user.metadata == nil)
        // An http URL whose `//` a combining mark follows is still an http URL.
        let combining = try await server.request(
            "PATCH", "/v1/users/alice", token: alice, body: UpdateUserRequest(avatarURL: "HTTP://\u{301}x"))
        #expect(combining.status == 200)
        // A part's name is text: no U+0000 (it was stored as sent).
        let conversation = try await server.createConversation(token: alice, type: .group, with: [])
        let named = try await server.request(
            "POST", "/v1/conversations/\(conversation.id)/messages", token: alice,
            body: SendMessageRequest(parts: [MessagePart(type: .text, text: "hi", name: "a\u{0}b")]))
        #expect(named.status == 400 && named.errorCode == .badRequest)
        // A file's name has no `/` or `\\`, whatever follows them.
        for name in ["a/\u{301}b", "a\\\u{301}b"] {
            let upload = try await FileTransferTests.upload(
                server, conversation: conversation.id, token: alice, name: name, type: "text/plain", bytes: [120])
            let error = try? JSONDecoder().decode(ErrorResponse.self, from: Data(upload.body))
            #expect(upload.status == 400 && error?.error.code == .badRequest, "\(name)")
        }
        try await server.stop()
    }

    /// The numbers of the API are checked against the bounds openapi.yaml declares.
    @Test func numbersOutsideTheDocumentsBoundsAreRefused() async throws {
        let server = try await TestServer.startForEdgeTests()
        let alice = try await server.login("alice")
        _ = try await server.login("bob")
        let key = server.app.restAPIKey
        let conversation = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        let receipts = "/v1/conversations/\(conversation.id)/receipts"
        for body in [
            ReceiptRequest(readSeq: -1), ReceiptRequest(deliveredSeq: -1), ReceiptRequest(deliveredSeq: Int64.min),
        ] {
            let answer = try await server.request("POST", receipts, token: alice, body: body)
            #expect(answer.status == 400 && answer.errorCode == .badRequest, "\(body)")
        }
        #expect(try await server.request("POST", receipts, token: alice, body: ReceiptRequest(readSeq: 0)).status < 300)
        for ttl: Int64 in [0, -1, 315_360_001, Int64.max] {
            let answer = try await server.request(
                "POST", "/v1/users/alice/auth-tokens", apiKey: key, body: IssueAuthTokenRequest(ttlSeconds: ttl)
            )
            #expect(answer.status == 400, "ttlSeconds \(ttl)")
        }
        #expect(
            try await server.request(
                "POST", "/v1/users/alice/auth-tokens", apiKey: key, body: IssueAuthTokenRequest(ttlSeconds: 315_360_000)
            ).status == 201
        )
        for limit in ["0", "201", "-1"] {
            let answer = try await server.request(
                "GET", "/v1/conversations/\(conversation.id)/messages?limit=\(limit)", token: alice)
            #expect(answer.status == 400, "limit \(limit)")
        }
        let events = try await server.request(
            "GET", "/v1/conversations/\(conversation.id)/events?after=-1", token: alice)
        #expect(events.status == 400)
        try await server.stop()
    }
}
