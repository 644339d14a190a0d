import Foundation
import Parley
import ParleyServer
import ParleyTesting
import Testing

/// The operator's calls through the SDK's `ParleyAdmin` (docs/PROTOCOL.md, "The app's operator").
@Suite(.timeLimit(.minutes(2))) struct OperatorSDKTests {
    @Test func theAdminClientReadsTheAppSetsItsOriginsAndRotatesItsKeys() async throws {
        let server = try await TestServer.start()
        for uid in ["carol", "alice", "bob"] { _ = try await server.login(uid) }
        let admin = ParleyAdmin(serverURL: server.baseURL, restAPIKey: server.app.restAPIKey)
        let app = try await admin.app()
        #expect(app.appId == server.app.appId && app.stats.users == 3 && app.allowedOrigins.isEmpty)

        let changed = try await admin.setAllowedOrigins(["https://Chat.Example.com:443", "*"])
        #expect(changed.allowedOrigins == ["https://chat.example.com", "*"])
        do {
            try await admin.setAllowedOrigins(["ftp://nope"])
            Issue.record("an invalid origin was accepted")
        } catch let error as ParleyError {
            #expect(error.code == .badRequest)
        }

        let first = try await admin.users(limit: 2)
        #expect(first.users.map(\.uid) == ["alice", "bob"])
        let second = try await admin.users(limit: 2, cursor: first.nextCursor)
        #expect(second.users.map(\.uid) == ["carol"] && second.nextCursor == nil)

        let keys = try await admin.rotateKeys()
        do {
            _ = try await admin.app()
            Issue.record("the old key still works")
        } catch let error as ParleyError {
            #expect(error.code == .apiKeyInvalid)
        }
        let renewed = ParleyAdmin(serverURL: server.baseURL, restAPIKey: keys.restAPIKey)
        #expect(try await renewed.app().allowedOrigins == ["https://chat.example.com", "*"])
        try await server.stop()
    }
}
