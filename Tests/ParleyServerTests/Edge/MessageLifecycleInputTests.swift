import Foundation
import ParleyProtocol
import ParleyServer
import ParleyStore
import ParleyTesting
import Testing

/// Hostile and clumsy input to the message lifecycle (edit, delete, reactions, replies, mentions), over REST and the
/// socket: each is answered with its documented code (docs/PROTOCOL.md, "Errors" and "Limits") and changes nothing.
@Suite(.timeLimit(.minutes(3))) struct MessageLifecycleInputTests {
    /// alice and bob's group with a message of alice's, and a group of carol's that neither is in.
    struct Setting {
        let server: TestServer
        let alice: String
        let bob: String
        let group: Conversation
        let message: Message
        let foreign: Message
        var messagePath: String { "/v1/conversations/\(group.id)/messages/\(message.id)" }

        /// What the server reads for alice now.
        func history() async throws -> [Message] {
            try await server.request("GET", "/v1/conversations/\(group.id)/messages", token: alice)
                .decode(MessagePage.self).messages
        }
    }

    func setting() async throws -> Setting {
        let server = try await TestServer.startForEdgeTests()
        let alice = try await server.login("alice")
        let bob = try await server.login("bob")
        let carol = try await server.login("carol")
        _ = try await server.login("dave")
        let group = try await server.createConversation(token: alice, with: ["bob"])
        let message = try await server.request(
            "POST", "/v1/conversations/\(group.id)/messages", token: alice,
            body: SendMessageRequest(parts: [.text("hi")])
        ).decode(Message.self)
        let elsewhere = try await server.createConversation(token: carol, with: ["dave"])
        let foreign = try await server.request(
            "POST", "/v1/conversations/\(elsewhere.id)/messages", token: carol,
            body: SendMessageRequest(parts: [.text("carol's")])
        ).decode(Message.self)
        return Setting(server: server, alice: alice, bob: bob, group: group, message: message, foreign: foreign)
    }

    @Test func restRefusalsCarryTheirCodeAndChangeNothing() async throws {
        let setting = try await setting()
        let (server, alice, bob, group) = (setting.server, setting.alice, setting.bob, setting.group)
        let before = try await setting.history()
        let tooManyMentions = (0...MessageLifecycle.maxMentions).map { "user\($0)" }
        let cases:
            [(method: String, path: String, token: String, body: EditMessageRequest?, status: Int, code: ErrorCode)] = [
                // An edit past the limits of sending, or with too many mentions, or empty.
                (
                    "PATCH", setting.messagePath, alice,
                    EditMessageRequest(parts: [.text(String(repeating: "x", count: 70_000))]), 413, .messageTooLarge
                ),
                (
                    "PATCH", setting.messagePath, alice,
                    EditMessageRequest(parts: [.text("x")], mentions: tooManyMentions), 400, .fieldTooLarge
                ),
                (
                    "PATCH", setting.messagePath, alice, EditMessageRequest(parts: [.text("x")], mentions: ["bad uid"]),
                    400, .invalidUID
                ),
                ("PATCH", setting.messagePath, alice, EditMessageRequest(parts: [.text("")]), 400, .messageEmpty),
                // Someone else's message: bob may not edit alice's; carol's message is not in this conversation.
                ("PATCH", setting.messagePath, bob, EditMessageRequest(parts: [.text("x")]), 403, .forbidden),
                ("DELETE", setting.messagePath, bob, nil, 403, .forbidden),
                (
                    "PATCH", "/v1/conversations/\(group.id)/messages/\(setting.foreign.id)", alice,
                    EditMessageRequest(parts: [.text("x")]), 404, .messageNotFound
                ),
                (
                    "DELETE", "/v1/conversations/\(group.id)/messages/\(setting.foreign.id)", alice, nil, 404,
                    .messageNotFound
                ),
                (
                    "GET", "/v1/conversations/\(group.id)/messages/\(setting.foreign.id)", alice, nil, 404,
                    .messageNotFound
                ),
                (
                    "GET", "/v1/conversations/\(group.id)/messages/\(setting.foreign.id)/replies", alice, nil, 404,
                    .messageNotFound
                ),
                // Control characters in a message id, percent-encoded into the path.
                ("GET", "/v1/conversations/\(group.id)/messages/m%00x", alice, nil, 400, .badRequest),
                ("DELETE", "/v1/conversations/\(group.id)/messages/m%0Ax", alice, nil, 400, .badRequest),
                // Reaction keys that are not keys: whitespace, control characters, invalid UTF-8, too long.
                ("PUT", setting.messagePath + "/reactions/two%20words", bob, nil, 400, .badRequest),
                ("PUT", setting.messagePath + "/reactions/%00", bob, nil, 400, .badRequest),
                ("PUT", setting.messagePath + "/reactions/%FF%FE", bob, nil, 400, .badRequest),
                (
                    "PUT", setting.messagePath + "/reactions/" + String(repeating: "k", count: 65), bob, nil, 400,
                    .badRequest
                ),
                // Another conversation's message, through this conversation.
                (
                    "PUT", "/v1/conversations/\(group.id)/messages/\(setting.foreign.id)/reactions/ok", bob, nil, 404,
                    .messageNotFound
                ),
                // Cursors and page sizes.
                ("GET", "/v1/me/mentions?cursor=1.2", alice, nil, 400, .badRequest),
                ("GET", "/v1/me/mentions?cursor=a.b.c", alice, nil, 400, .badRequest),
                ("GET", "/v1/me/mentions?limit=0", alice, nil, 400, .badRequest),
                ("GET", setting.messagePath + "/replies?cursor=-3", alice, nil, 400, .badRequest),
                // No credentials.
                ("PUT", setting.messagePath + "/reactions/ok", "", nil, 401, .authRequired),
            ]
        for test in cases {
            let answer = try await server.request(
                test.method, test.path, token: test.token.isEmpty ? nil : test.token, body: test.body)
            #expect(
                answer.status == test.status && answer.errorCode == test.code,
                "\(test.method) \(test.path): \(answer.status) \(String(decoding: answer.body, as: UTF8.self))"
            )
        }
        // A body past the request limit is refused before it is read.
        let huge = EditMessageRequest(parts: [.text(String(repeating: "y", count: 1_100_000))])
        let tooLarge = try await server.request("PATCH", setting.messagePath, token: alice, body: huge)
        #expect(tooLarge.status == 413 && tooLarge.errorCode == .requestTooLarge)
        #expect(try await setting.history() == before)
        try await server.stop()
    }

    @Test func aDeletionAgainAndAnEditWithWhatItKeepsFollowTheRules() async throws {
        let setting = try await setting()
        let (server, alice, bob, group) = (setting.server, setting.alice, setting.bob, setting.group)
        let deleted = try await server.request("DELETE", setting.messagePath, token: alice)
        #expect(deleted.status == 200)
        // Again: the same tombstone for alice; bob, who may not delete alice's messages, is refused as before.
        let again = try await server.request("DELETE", setting.messagePath, token: alice)
        let tombstone = try deleted.decode(Message.self)
        #expect(again.status == 200 && (try? again.decode(Message.self)) == tombstone && tombstone.isDeleted)
        let byBob = try await server.request("DELETE", setting.messagePath, token: bob)
        #expect(byBob.status == 403 && byBob.errorCode == .forbidden)

        // A message with 40 KB of metadata: an edit to 30 KB of text is within the limit alone, not with what the
        // message keeps.
        let metadata = JSONValue.object(["blob": .string(String(repeating: "m", count: 40_000))])
        let heavy = try await server.request(
            "POST", "/v1/conversations/\(group.id)/messages", token: alice,
            body: SendMessageRequest(parts: [.text("small")], metadata: metadata)
        ).decode(Message.self)
        let path = "/v1/conversations/\(group.id)/messages/\(heavy.id)"
        let tooLarge = try await server.request(
            "PATCH", path, token: alice, body: EditMessageRequest(parts: [.text(String(repeating: "t", count: 30_000))])
        )
        #expect(tooLarge.status == 413 && tooLarge.errorCode == .messageTooLarge)
        // With its metadata replaced by a small one, it fits.
        let fits = try await server.request(
            "PATCH", path, token: alice,
            body: EditMessageRequest(parts: [.text(String(repeating: "t", count: 30_000))], metadata: .object([:]))
        )
        #expect(fits.status == 200)
        try await server.stop()
    }

    @Test func aReactionKeyArrivesPercentEncodedAndEachUserHasALimit() async throws {
        let setting = try await setting()
        let (server, bob) = (setting.server, setting.bob)
        // An emoji with a variation selector, percent-encoded as a browser would.
        let heart = "❤️"
        let encoded = heart.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let added = try await server.request("PUT", setting.messagePath + "/reactions/" + encoded, token: bob)
        #expect(added.status == 200)
        #expect(try added.decode(ReactionList.self).reactions == [ReactionSummary(key: heart, count: 1, reacted: true)])
        // Again: the same one reaction (a retry after a lost answer changes nothing).
        let again = try await server.request("PUT", setting.messagePath + "/reactions/" + encoded, token: bob)
        #expect(try again.decode(ReactionList.self).reactions == [ReactionSummary(key: heart, count: 1, reacted: true)])
        // Removing one bob never gave: nothing changes, no error.
        let removed = try await server.request("DELETE", setting.messagePath + "/reactions/nope", token: bob)
        #expect(removed.status == 200)
        // Up to the per-user limit, then ERR_REACTION_LIMIT.
        for index in 1..<MessageLifecycle.maxReactionKeysPerUser {
            let answer = try await server.request("PUT", setting.messagePath + "/reactions/k\(index)", token: bob)
            #expect(answer.status == 200, "k\(index)")
        }
        let refused = try await server.request("PUT", setting.messagePath + "/reactions/one-more", token: bob)
        #expect(refused.status == 409 && refused.errorCode == .reactionLimit)
        let message = try #require(try await setting.history().first)
        #expect(message.reactions?.count == MessageLifecycle.maxReactionKeysPerUser)
        try await server.stop()
    }

    @Test func framesForMessagesTheUserMayNotChangeAreRefusedWithTheirRef() async throws {
        let setting = try await setting()
        let (server, group, message) = (setting.server, setting.group, setting.message)
        let before = try await setting.history()
        let socket = WebSocketProbe(url: server.webSocketURL, token: setting.bob)
        _ = try await socket.nextFrame()
        let tooManyMentions = (0...MessageLifecycle.maxMentions).map { "user\($0)" }
        let frames: [(ClientFrame, ErrorCode)] = [
            (
                .edit(EditFrame(ref: "e1", conversationId: group.id, messageId: message.id, parts: [.text("x")])),
                .forbidden
            ),
            (.delete(DeleteFrame(ref: "d1", conversationId: group.id, messageId: message.id)), .forbidden),
            (.delete(DeleteFrame(ref: "d2", conversationId: group.id, messageId: "m\u{0}x")), .badRequest),
            (
                .delete(DeleteFrame(ref: "d3", conversationId: group.id, messageId: setting.foreign.id)),
                .messageNotFound
            ),
            (
                .reaction(
                    ReactionFrame(
                        ref: "r1", conversationId: setting.foreign.conversationId, messageId: setting.foreign.id,
                        key: "ok")),
                .conversationNotFound
            ),
            (
                .reaction(ReactionFrame(ref: "r2", conversationId: group.id, messageId: message.id, key: "a b")),
                .badRequest
            ),
            (
                .reaction(ReactionFrame(ref: "r3", conversationId: group.id, messageId: message.id, key: "")),
                .badRequest
            ),
            (
                .send(SendFrame(ref: "s1", conversationId: group.id, parts: [.text("x")], mentions: tooManyMentions)),
                .fieldTooLarge
            ),
            (
                .send(SendFrame(ref: "s2", conversationId: group.id, parts: [.text("x")], replyTo: "m_nope")),
                .messageNotFound
            ),
            (
                .send(SendFrame(ref: "s3", conversationId: group.id, parts: [.text("x")], replyTo: setting.foreign.id)),
                .messageNotFound
            ),
        ]
        for (frame, code) in frames {
            try await socket.send(frame)
            guard case .error(let error) = try await socket.nextFrame() else {
                Issue.record("no error for \(frame)")
                continue
            }
            #expect(error.code == code && error.ref != nil, "\(frame): \(error)")
        }
        // A reply to a reply is refused: threads have one level.
        try await socket.send(
            .send(SendFrame(ref: "s4", conversationId: group.id, parts: [.text("r")], replyTo: message.id)))
        /// The next frame that is not an event (the reply's own event may come before or after its ack).
        func answer() async throws -> ServerFrame {
            while true {
                let frame = try await socket.nextFrame()
                if case .event = frame { continue }
                return frame
            }
        }
        guard case .ack(let ack) = try await answer(), let replyId = ack.message?.id else {
            Issue.record("the reply was not acknowledged")
            return
        }
        try await socket.send(
            .send(SendFrame(ref: "s5", conversationId: group.id, parts: [.text("rr")], replyTo: replyId)))
        guard case .error(let nested) = try await answer() else {
            Issue.record("a reply to a reply was not refused")
            return
        }
        #expect(nested.code == .badRequest && nested.ref == "s5")
        // Nothing changed but the one reply, and its count on its parent.
        let after = try await setting.history()
        #expect(after.map(\.id) == before.map(\.id) + [replyId])
        var parent = before[0]
        parent.replyCount = 1
        parent.lastReplyAt = after.last?.sentAt
        #expect(after.first == parent)
        await socket.close()
        try await server.stop()
    }
}
