import Foundation
import Parley
import ParleyTesting
import Testing

@testable import ParleyServer

/// `DELETE /v1/users/{uid}` live: the other participants see the user leave and their messages become tombstones (no
/// content, or no sender either with `erase`); the group they owned passes on; their file is gone; search, history and
/// exports no longer hold their content; bad requests get their documented answers.
@Suite(.timeLimit(.minutes(3))) struct UserDeletionTests {
    @Test(arguments: [DeletedUserMessages.tombstone, .erase])
    func aDeletedUserLeavesAndTheirMessagesLoseTheirContent(_ mode: DeletedUserMessages) async throws {
        let party = try await EventCatalogTests().party(["alice", "bob", "carol"])
        let admin = ParleyAdmin(serverURL: party.server.baseURL, restAPIKey: party.server.app.restAPIKey)
        #expect(try await admin.setDeletedUserMessages(mode).deletedUserMessages == mode)
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob", "carol"])
        _ = try await party["alice"].setRole(.admin, of: "carol", in: group.id)
        let secret = try await party["alice"].sendTextMessage("alice's secret zebra", to: .conversation(group.id))
        let folder = try TemporaryDirectory(prefix: "parley-delete")
        let source = folder.url.appendingPathComponent("photo.bin")
        try Data((0..<2_000).map { UInt8(truncatingIfNeeded: $0) }).write(to: source)
        let withFile = try await party["alice"].sendFile(at: source, to: .conversation(group.id), caption: "photo")
        let file = try #require(withFile.files.first)
        let kept = try await party["bob"].sendTextMessage("bob stays", to: .conversation(group.id))
        try await party.fence()
        #expect(await party.server.application.fileSearchIndex())
        #expect(try await admin.searchMessages("zebra").results.map(\.message.id) == [secret.id])
        party.mark()

        let deletion = try await admin.deleteUser(uid: "alice")
        #expect(deletion.user.uid == "alice" && deletion.messages == mode)
        #expect(deletion.conversationsLeft == 2 && deletion.messagesDeleted >= 2)
        // (alice's own client is closed: she is gone.)
        try await party.fence(["bob", "carol"])
        // bob sees alice leave, carol (the admin) become the owner, and both messages become tombstones.
        let seen = party.observed(by: "bob")
        #expect(seen.first?.name == .participantRemoved)
        #expect(
            seen.contains {
                if case .participantUpdated(let heir) = $0.payload { return heir.uid == "carol" && heir.role == .owner }
                return false
            })
        let deleted = seen.compactMap { event -> Message? in
            if case .messageDeleted(let message) = event.payload { return message }
            return nil
        }
        #expect(Set(deleted.map(\.id)) == [secret.id, withFile.id])
        #expect(deleted.allSatisfy { $0.parts.isEmpty && $0.sender == (mode == .erase ? "" : "alice") })
        // History: bob's message as it was, alice's as tombstones; search finds nothing of hers.
        let history = try await party["bob"].fetchMessages(conversationId: group.id).messages
        #expect(history.first { $0.id == kept.id }?.text == "bob stays")
        #expect(history.filter { [secret.id, withFile.id].contains($0.id) }.allSatisfy { $0.isDeleted })
        #expect(await party.server.application.fileSearchIndex())
        #expect(try await admin.searchMessages("zebra").results.isEmpty)
        // The file: no link any more.
        do {
            _ = try await admin.fileLink(file.id, in: group.id)
            Issue.record("the deleted user's file still has a link")
        } catch let error as ParleyError {
            #expect(error.code == .attachmentNotFound)
        }
        // The sweeper takes its bytes.
        #expect(await party.server.application.uploadSweeper.sweep() == 1)
        #expect(try await party.server.store.attachment(appId: party.server.app.appId, id: file.id) == nil)
        // The user is gone: no export, no second deletion, not in the directory.
        await #expect(throws: ParleyError.self) { _ = try await admin.exportUser("alice") }
        await #expect(throws: ParleyError.self) { _ = try await admin.deleteUser(uid: "alice") }
        #expect(try await admin.searchUsers("alice").users.isEmpty)
        try await party.stop()
    }

    @Test func badDeleteRequestsGetTheirDocumentedAnswers() async throws {
        let server = try await TestServer.start()
        let alice = try await server.login("alice")
        let key = server.app.restAPIKey
        #expect(try await server.request("DELETE", "/v1/users/alice", token: alice).status == 401)
        #expect(try await server.request("DELETE", "/v1/users/alice").status == 401)
        #expect(try await server.request("DELETE", "/v1/users/alice", apiKey: "rk_wrong").status == 401)
        let unknown = try await server.request("DELETE", "/v1/users/nobody", apiKey: key)
        #expect(unknown.status == 404 && unknown.errorCode == .uidNotFound)
        #expect(try await server.request("DELETE", "/v1/users/a%01b", apiKey: key).status == 400)
        let notAMode = try await server.request(
            "PATCH", "/v1/app", apiKey: key, body: ["deletedUserMessages": "shred"] as JSONValue)
        #expect(notAMode.status == 400)
        // alice's token stops working at once.
        let deleted = try await server.request("DELETE", "/v1/users/alice", apiKey: key)
        #expect(deleted.status == 200)
        #expect(try await server.request("GET", "/v1/me/inbox", token: alice).status == 401)
        try await server.stop()
    }
}
