import Foundation
import ParleyProtocol
import ParleyServer
import ParleyTesting
import Testing

/// Every permission rule of a conversation, tried by someone it forbids: the documented error comes back.
@Suite(.timeLimit(.minutes(2))) struct AuthorizationTests {
    struct Group {
        let server: TestServer
        let tokens: [String: String]
        let id: String

        func call(
            _ method: String, _ path: String, as uid: String, body: (some Encodable)? = nil as String?
        ) async throws -> RESTAnswer {
            try await server.request(method, "/v1/conversations/\(id)\(path)", token: tokens[uid], body: body)
        }
    }

    /// A group owned by alice, with bob as admin and carol and dave as members; erin is outside.
    func group(isPublic: Bool = false) async throws -> Group {
        let server = try await TestServer.start()
        var tokens: [String: String] = [:]
        for uid in ["alice", "bob", "carol", "dave", "erin"] { tokens[uid] = try await server.login(uid) }
        let conversation = try await server.createConversation(
            token: tokens["alice"]!, with: ["carol", "dave"], isPublic: isPublic)
        let added = try await server.request(
            "POST", "/v1/conversations/\(conversation.id)/participants", token: tokens["alice"],
            body: AddParticipantsRequest(participants: [.init(uid: "bob", role: .admin)])
        )
        #expect(added.status == 200)
        return Group(server: server, tokens: tokens, id: conversation.id)
    }

    @Test func onlyTheOwnerAndAdminsChangeTheGroup() async throws {
        let group = try await group()
        let byMember = try await group.call("PATCH", "", as: "carol", body: UpdateConversationRequest(name: "mine"))
        #expect(byMember.status == 403 && byMember.errorCode == .forbidden)
        let byOutsider = try await group.call("PATCH", "", as: "erin", body: UpdateConversationRequest(name: "mine"))
        #expect(byOutsider.status == 404 && byOutsider.errorCode == .conversationNotFound)
        #expect(try await group.call("PATCH", "", as: "bob", body: UpdateConversationRequest(name: "ok")).status == 200)
        try await group.server.stop()
    }

    @Test func onlyTheOwnerDeletesAndRestores() async throws {
        let group = try await group()
        #expect(try await group.call("DELETE", "", as: "bob").errorCode == .forbidden)
        #expect(try await group.call("DELETE", "", as: "carol").errorCode == .forbidden)
        #expect(try await group.call("DELETE", "", as: "alice").status == 204)
        // Deleted: hidden from everyone, even its participants; only the owner can restore it.
        #expect(try await group.call("GET", "", as: "carol").errorCode == .conversationNotFound)
        #expect(try await group.call("GET", "/messages", as: "alice").errorCode == .conversationNotFound)
        #expect(
            try await group.call("POST", "/messages", as: "bob", body: SendMessageRequest(parts: [.text("x")]))
                .errorCode == .conversationNotFound)
        #expect(try await group.call("POST", "/undelete", as: "bob").errorCode == .conversationNotFound)
        #expect(try await group.call("POST", "/undelete", as: "alice").status == 200)
        #expect(try await group.call("GET", "", as: "carol").status == 200)
        try await group.server.stop()
    }

    @Test func removalFollowsRoles() async throws {
        let group = try await group()
        #expect(try await group.call("DELETE", "/participants/dave", as: "carol").errorCode == .forbidden)
        #expect(try await group.call("DELETE", "/participants/bob", as: "bob").status == 204)  // an admin may leave
        let bobAgain = try await group.call(
            "POST", "/participants", as: "alice",
            body: AddParticipantsRequest(participants: [.init(uid: "bob", role: .admin)])
        )
        #expect(bobAgain.status == 200)
        #expect(try await group.call("DELETE", "/participants/alice", as: "bob").errorCode == .forbidden)
        // The owner cannot leave.
        #expect(try await group.call("DELETE", "/participants/alice", as: "alice").errorCode == .forbidden)
        #expect(try await group.call("DELETE", "/participants/erin", as: "alice").errorCode == .uidNotFound)
        // An admin removes a member.
        #expect(try await group.call("DELETE", "/participants/dave", as: "bob").status == 204)
        #expect(try await group.call("DELETE", "/participants/carol", as: "carol").status == 204)  // a member leaves
        try await group.server.stop()
    }

    @Test func onlyTheOwnerChangesRolesAndNobodyBecomesOwner() async throws {
        let group = try await group()
        #expect(
            try await group.call(
                "PATCH", "/participants/carol", as: "bob", body: UpdateParticipantRequest(role: .admin)
            ).errorCode == .forbidden)
        #expect(
            try await group.call(
                "PATCH", "/participants/carol", as: "alice", body: UpdateParticipantRequest(role: .owner)
            ).errorCode == .forbidden)
        #expect(
            try await group.call(
                "PATCH", "/participants/alice", as: "alice", body: UpdateParticipantRequest(role: .member)
            ).errorCode == .forbidden)
        #expect(
            try await group.call(
                "PATCH", "/participants/erin", as: "alice", body: UpdateParticipantRequest(role: .admin)
            ).errorCode == .uidNotFound)
        let promoted = try await group.call(
            "PATCH", "/participants/carol", as: "alice", body: UpdateParticipantRequest(role: .admin))
        #expect(try promoted.decode(Participant.self).role == .admin)
        try await group.server.stop()
    }

    @Test func aPrivateGroupIsJoinedOnlyByInvitationAPublicOneByAnyone() async throws {
        let closed = try await group()
        #expect(try await closed.call("POST", "/join", as: "erin").errorCode == .conversationNotFound)
        try await closed.server.stop()
        let open = try await group(isPublic: true)
        #expect(try await open.call("GET", "/messages", as: "erin").errorCode == .notAParticipant)
        #expect(
            try await open.call("POST", "/receipts", as: "erin", body: ReceiptRequest(readSeq: 1)).errorCode
                == .notAParticipant)
        let joined = try await open.call("POST", "/join", as: "erin")
        #expect(try joined.status == 200 && joined.decode(Participant.self).role == .member)
        #expect(try await open.call("GET", "/messages", as: "erin").status == 200)
        try await open.server.stop()
    }

    @Test func directConversationsCannotBeManaged() async throws {
        let server = try await TestServer.start()
        let alice = try await server.login("alice")
        _ = try await server.login("bob")
        let direct = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        let base = "/v1/conversations/\(direct.id)"
        #expect(
            try await server.request("PATCH", base, token: alice, body: UpdateConversationRequest(name: "x")).errorCode
                == .forbidden)
        #expect(try await server.request("DELETE", base, token: alice).errorCode == .forbidden)
        #expect(try await server.request("DELETE", base + "/participants/bob", token: alice).errorCode == .forbidden)
        #expect(
            try await server.request(
                "POST", base + "/participants", token: alice,
                body: AddParticipantsRequest(participants: [.init(uid: "carol")])
            ).errorCode == .forbidden)
        try await server.stop()
    }

    @Test func receiptsNeedParticipationAndNeverMoveBackwards() async throws {
        let group = try await group()
        #expect(
            try await group.call("POST", "/receipts", as: "erin", body: ReceiptRequest(readSeq: 1)).errorCode
                == .conversationNotFound)
        #expect(try await group.call("POST", "/receipts", as: "carol", body: ReceiptRequest()).errorCode == .badRequest)
        for index in 1...3 {
            _ = try await group.call(
                "POST", "/messages", as: "alice", body: SendMessageRequest(parts: [.text("m\(index)")]))
        }
        let unread: UnreadSummary = try await group.server.request("GET", "/v1/me/unread", token: group.tokens["carol"])
            .decode()
        #expect(unread.total == 3 && unread.conversations.first?.unread == 3)
        let read: Participant = try await group.call(
            "POST", "/receipts", as: "carol", body: ReceiptRequest(readSeq: 1_000)
        ).decode()
        let last = unread.conversations.first!.lastSeq
        #expect(read.readSeq == last && read.deliveredSeq == last)  // clamped to the last event, delivered follows read
        let back: Participant = try await group.call("POST", "/receipts", as: "carol", body: ReceiptRequest(readSeq: 2))
            .decode()
        #expect(back.readSeq == last)
        let after: UnreadSummary = try await group.server.request("GET", "/v1/me/unread", token: group.tokens["carol"])
            .decode()
        #expect(after.total == 0)
        try await group.server.stop()
    }

    @Test func typingAndReceiptsOverTheSocketAreCheckedAndRateLimited() async throws {
        let group = try await group()
        let outsider = WebSocketProbe(url: group.server.webSocketURL, token: group.tokens["erin"]!)
        _ = try await outsider.nextFrame()  // hello
        try await outsider.send(.typing(TypingFrame(conversationId: group.id, isTyping: true)))
        guard case .error(let typingError) = try await outsider.nextFrame() else {
            Issue.record("no error")
            return
        }
        #expect(typingError.code == .conversationNotFound)
        try await outsider.send(.receipt(ReceiptFrame(ref: "r1", conversationId: group.id, readSeq: 1)))
        guard case .error(let receiptError) = try await outsider.nextFrame() else {
            Issue.record("no error")
            return
        }
        #expect(receiptError.code == .conversationNotFound && receiptError.ref == "r1")

        let member = WebSocketProbe(url: group.server.webSocketURL, token: group.tokens["carol"]!)
        _ = try await member.nextFrame()
        for _ in 0..<6 { try await member.send(.typing(TypingFrame(conversationId: group.id, isTyping: true))) }
        let limited = try await member.nextFrame { frame in
            if case .error = frame { return true }
            return false
        }
        guard case .error(let rateError) = limited else { return }
        #expect(rateError.code == .rateLimited)
        try await group.server.stop()
    }
}
