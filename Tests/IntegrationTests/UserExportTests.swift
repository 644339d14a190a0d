import Foundation
import Parley
import ParleyServer
import ParleyTesting
import Testing

/// `GET /v1/users/{uid}/export` live: the SDK's pages hold every message the user sent once, a file of theirs
/// downloads with the app's key, and bad requests get their documented answers.
@Suite(.timeLimit(.minutes(3))) struct UserExportTests {
    @Test func theAdminExportsAUserPageByPageWithTheirFiles() async throws {
        let party = try await EventCatalogTests().party(["alice", "bob"])
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob"])
        var sent: [String] = []
        for index in 0..<5 {
            sent.append(try await party["alice"].sendTextMessage("m\(index)", to: .conversation(group.id)).id)
            _ = try await party["bob"].sendTextMessage("reply \(index)", to: .conversation(group.id))
        }
        let folder = try TemporaryDirectory(prefix: "parley-export")
        let bytes = (0..<3_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        let source = folder.url.appendingPathComponent("plan.bin")
        try Data(bytes).write(to: source)
        let withFile = try await party["alice"].sendFile(at: source, to: .conversation(group.id), caption: "the plan")
        sent.append(withFile.id)
        let admin = ParleyAdmin(serverURL: party.server.baseURL, restAPIKey: party.server.app.restAPIKey)
        _ = try await admin.deactivateUser(uid: "alice")

        // A deactivated user is exported like any other; two at a page.
        var page = try await admin.exportUser("alice", limit: 2)
        #expect(page.user.uid == "alice" && page.user.deactivatedAt != nil)
        #expect(page.memberships?.map(\.conversation.id).contains(group.id) == true)
        var messages = page.messages
        var pages = 1
        while let cursor = page.nextCursor, pages < 50 {
            page = try await admin.exportUser("alice", limit: 2, cursor: cursor)
            #expect(page.memberships == nil && page.messages.count <= 2)
            messages += page.messages
            pages += 1
        }
        // (alice's notes group is hers too: its fence messages come first or last; only this group's are checked.)
        #expect(messages.filter { $0.conversationId == group.id }.map(\.id) == sent)
        #expect(messages.allSatisfy { $0.sender == "alice" })
        let file = try #require(withFile.files.first)
        let saved = try await admin.downloadFile(file.id, in: group.id, to: folder.url.appendingPathComponent("copy"))
        #expect(try [UInt8](Data(contentsOf: saved)) == bytes)
        try await party.stop()
    }

    @Test func badExportRequestsGetTheirDocumentedAnswers() async throws {
        let server = try await TestServer.start()
        let alice = try await server.login("alice")
        let key = server.app.restAPIKey
        // Server-to-server only.
        #expect(try await server.request("GET", "/v1/users/alice/export", token: alice).status == 401)
        #expect(try await server.request("GET", "/v1/users/alice/export").status == 401)
        let unknown = try await server.request("GET", "/v1/users/nobody/export", apiKey: key)
        #expect(unknown.status == 404 && unknown.errorCode == .uidNotFound)
        #expect(try await server.request("GET", "/v1/users/a%01b/export", apiKey: key).status == 400)
        for cursor in ["", "x", "x1", "1.2", "x-1.2", "x1.2.3", String(repeating: "9", count: 500)] {
            let answer = try await server.get("/v1/users/alice/export", ["cursor": cursor], apiKey: key)
            #expect(answer.status == 400 && answer.errorCode == .badRequest, "\(cursor)")
        }
        for limit in ["0", "-1", "201", "99999999999999999999", "x"] {
            let answer = try await server.get("/v1/users/alice/export", ["limit": limit], apiKey: key)
            #expect(answer.status == 400, "\(limit)")
        }
        // A cursor past everything is an empty last page.
        let past = try await server.get("/v1/users/alice/export", ["cursor": "x999999.1"], apiKey: key)
        #expect(past.status == 200)
        let page = try past.decode(UserExportPage.self)
        #expect(page.messages.isEmpty && page.nextCursor == nil && page.memberships == nil)
        try await server.stop()
    }
}
