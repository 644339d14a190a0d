import Foundation
import Parley
import ParleyProtocol
import ParleyTesting
import Testing

/// The operator deactivates and reactivates a user (docs/PROTOCOL.md, "Accounts"), through `ParleyAdmin`, with a real
/// client connected as the user.
@Suite(.timeLimit(.minutes(2))) struct AccountTests {
    func client(_ server: TestServer) async throws -> ParleyClient {
        let client = try ParleyClient(appId: server.app.appId, settings: testSettings(server: server))
        try await client.start()
        return client
    }

    @Test func aDeactivatedUserIsDisconnectedAndCannotLogInUntilReactivated() async throws {
        let server = try await TestServer.start()
        let admin = ParleyAdmin(serverURL: server.baseURL, restAPIKey: server.app.restAPIKey)
        let dave = try await client(server)
        try await dave.login(uid: "dave", authKey: server.app.authKey)
        await dave.waitUntilConnected()
        let erin = try await client(server)
        try await erin.login(uid: "erin", authKey: server.app.authKey)
        #expect(try await erin.searchUsers("dav").users.map(\.uid) == ["dave"])

        let deactivated = try await admin.deactivateUser(uid: "dave")
        let since = try #require(deactivated.deactivatedAt)
        // The socket is closed with 4001 and the reason; the SDK stops instead of retrying.
        let status = await dave.waitForStatus { if case .failed = $0 { true } else { false } }
        guard case .failed(let error) = status else { throw ParleyError(.internalError, "not failed") }
        #expect(error.code == .userDeactivated && error.status == 4001, "\(error)")
        // No login, no token, not found by other users; the operator still sees them.
        let again = try await client(server)
        let refused = await #expect(throws: ParleyError.self) {
            try await again.login(uid: "dave", authKey: server.app.authKey)
        }
        #expect(refused?.code == .userDeactivated && refused?.status == 403)
        let token = await #expect(throws: ParleyError.self) { try await admin.issueAuthToken(uid: "dave") }
        #expect(token?.code == .userDeactivated)
        #expect(try await erin.searchUsers("dav").users.isEmpty)
        #expect(try await admin.searchUsers("dav").users.first?.deactivatedAt == since)
        #expect(try await admin.users().users.first { $0.uid == "dave" }?.deactivatedAt == since)
        #expect(try await admin.deactivateUser(uid: "dave").deactivatedAt == since, "again: the first time stays")

        // Reactivated: they log in again and are found again.
        #expect(try await admin.reactivateUser(uid: "dave").deactivatedAt == nil)
        try await again.login(uid: "dave", authKey: server.app.authKey)
        await again.waitUntilConnected()
        #expect(try await erin.searchUsers("dav").users.map(\.uid) == ["dave"])
        let unknown = await #expect(throws: ParleyError.self) { try await admin.deactivateUser(uid: "nobody") }
        #expect(unknown?.code == .uidNotFound)
        for client in [dave, erin, again] { await client.shutdown() }
        try await server.stop()
    }

    @Test func deactivationIsTheOperatorsAlone() async throws {
        let server = try await TestServer.start()
        let token = try await server.login("dave")
        for path in ["/v1/users/dave/deactivate", "/v1/users/dave/reactivate"] {
            let asUser = try await server.request("POST", path, token: token)
            #expect(asUser.status == 401, "\(path) with a user's token: \(asUser.status)")
            let anonymous = try await server.request("POST", path)
            #expect(anonymous.status == 401 && anonymous.errorCode == .authRequired)
        }
        let invalid = try await server.request(
            "POST", "/v1/users/not%20a%20uid/deactivate", apiKey: server.app.restAPIKey)
        #expect(invalid.status == 400 && invalid.errorCode == .invalidUID)
        try await server.stop()
    }
}
