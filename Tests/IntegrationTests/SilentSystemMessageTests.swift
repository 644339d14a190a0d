import Foundation
import Parley
import ParleyServer
import ParleyTesting
import Testing

/// Silent and system messages live: a silent message reaches every participant marked `silent` and moves no unread
/// count (no `unread.update`); the app's system message reaches every participant with an empty sender and counts
/// for all of them; bad requests get their documented answers.
@Suite(.timeLimit(.minutes(3))) struct SilentSystemMessageTests {
    @Test func aSilentMessageArrivesAndCountsForNobody() async throws {
        let party = try await EventCatalogTests().party(["alice", "bob", "carol"])
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob", "carol"])
        try await party.fence()
        party.mark()
        let quiet = try await party["alice"].sendSilentMessage(
            parts: [.text("deploy done @bob")], to: .conversation(group.id), mentions: ["bob"])
        #expect(quiet.silent == true && quiet.mentions == ["bob"])
        try await party.fence()
        for uid in ["alice", "bob", "carol"] {
            // Unread updates included: a silent message moves no count, so none is pushed.
            let observed = party.observed(by: uid, ignoring: [.presenceUpdate])
            #expect(observed.map(\.payload) == [.messageSent(quiet)], "\(uid)")
        }
        #expect(try await party["bob"].unreadCounts().total == 0)
        #expect(try await party["bob"].fetchUnreadMentions().messages.isEmpty)
        #expect(try await party["carol"].fetchMessages(conversationId: group.id).messages.last?.silent == true)

        // A loud message after it counts, and is pushed as unread as before.
        party.mark()
        let loud = try await party["alice"].sendTextMessage("and now loud", to: .conversation(group.id))
        try await party.fence()
        #expect(try await party["bob"].unreadCounts().total == 1)
        #expect(party.observed(by: "bob", ignoring: [.presenceUpdate]).map(\.name).contains(.unreadUpdate))
        #expect(party.observed(by: "bob").map(\.payload) == [.messageSent(loud)])
        try await party.stop()
    }

    @Test func aSystemMessageReachesEveryParticipantAndCountsForAll() async throws {
        let party = try await EventCatalogTests().party(["alice", "bob", "carol"])
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob"])
        try await party.fence()
        party.mark()
        let admin = ParleyAdmin(serverURL: party.server.baseURL, restAPIKey: party.server.app.restAPIKey)
        let notice = try await admin.sendSystemMessage(
            parts: [.text("This group is now archived read-only at 22:00.")], to: group.id, clientMessageId: "n-1")
        #expect(notice.system == true && notice.sender.isEmpty && notice.silent == nil)
        // A retry is the same message.
        let again = try await admin.sendSystemMessage(
            parts: [.text("This group is now archived read-only at 22:00.")], to: group.id, clientMessageId: "n-1")
        #expect(again == notice)
        try await party.fence()
        for uid in EventCatalogTests.everyone where uid != "dave" {
            let observed = party.observed(by: uid)
            #expect(observed.map(\.payload) == (uid == "carol" ? [] : [.messageSent(notice)]), "\(uid)")
            #expect(observed.allSatisfy { $0.context.createdBy == nil })
        }
        #expect(try await party["alice"].unreadCounts().total == 1)
        #expect(try await party["bob"].unreadCounts().total == 1)
        let history = try await party["bob"].fetchMessages(conversationId: group.id).messages
        #expect(history.last?.system == true && history.last?.id == notice.id)

        // Silent and system together: delivered, counted by nobody.
        let quiet = try await admin.sendSystemMessage(parts: [.text("log rotated")], to: group.id, silent: true)
        #expect(quiet.silent == true && quiet.system == true)
        #expect(try await party["bob"].unreadCounts().total == 1)
        try await party.stop()
    }

    @Test func badSendsGetTheirDocumentedAnswers() async throws {
        let server = try await TestServer.start()
        let alice = try await server.login("alice")
        _ = try await server.login("bob")
        let group = try await server.createConversation(token: alice, with: ["bob"])
        let key = server.app.restAPIKey
        let path = "/v1/conversations/\(group.id)/messages"
        // The app's server: no file part, no unknown or invalid conversation, a wrong key refused.
        let file = MessagePart(
            type: .file, file: FileInfo(id: "f_1", name: "a", contentType: "text/plain", size: 1, sha256: "ab"))
        #expect(
            try await server.request("POST", path, apiKey: key, body: SendMessageRequest(parts: [file])).errorCode
                == .badRequest)
        let unknown = try await server.request(
            "POST", "/v1/conversations/c_nope/messages", apiKey: key, body: SendMessageRequest(parts: [.text("x")]))
        #expect(unknown.status == 404 && unknown.errorCode == .conversationNotFound)
        let invalid = try await server.request(
            "POST", "/v1/conversations/c%01x/messages", apiKey: key, body: SendMessageRequest(parts: [.text("x")]))
        #expect(invalid.status == 400)
        let wrongKey = try await server.request(
            "POST", path, apiKey: "rk_wrong", body: SendMessageRequest(parts: [.text("x")]))
        #expect(wrongKey.status == 401)
        #expect(
            try await server.request("POST", path, apiKey: key, body: SendMessageRequest(parts: [])).errorCode
                == .messageEmpty)
        // `silent` must be a boolean.
        let notBool = try await server.request(
            "POST", path, token: alice, body: ["parts": [["type": "text", "text": "x"]], "silent": "yes"] as JSONValue)
        #expect(notBool.status == 400)
        // A user's silent message.
        let quiet = try await server.request(
            "POST", path, token: alice, body: SendMessageRequest(parts: [.text("x")], silent: true))
        #expect(quiet.status == 201)
        #expect(try quiet.decode(Message.self).silent == true && quiet.decode(Message.self).system == nil)
        try await server.stop()
    }
}
