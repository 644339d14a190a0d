import Foundation
import ParleyProtocol
import ParleyServer
import ParleyTesting
import Testing

/// The REST API's documented errors and authorization rules, each tried for real.
@Suite(.timeLimit(.minutes(2))) struct RESTAPITests {
    @Test func unknownAppsAndWrongKeysGetTheirCodes() async throws {
        let server = try await TestServer.start()
        #expect(
            try await server.request("GET", "/v1/apps/\(server.app.appId)").decode(AppInfo.self).id == server.app.appId)
        let unknown = try await server.request("GET", "/v1/apps/nope")
        #expect(unknown.status == 404 && unknown.errorCode == .invalidAppID)
        let wrongApp = try await server.request(
            "POST", "/v1/login", body: LoginRequest(appId: "nope", uid: "a", authKey: server.app.authKey))
        #expect(wrongApp.status == 404 && wrongApp.errorCode == .invalidAppID)
        let wrongKey = try await server.request(
            "POST", "/v1/login", body: LoginRequest(appId: server.app.appId, uid: "a", authKey: "ak_x"))
        #expect(wrongKey.status == 401 && wrongKey.errorCode == .authKeyInvalid)
        let badUID = try await server.request(
            "POST", "/v1/login",
            body: LoginRequest(appId: server.app.appId, uid: "no spaces", authKey: server.app.authKey))
        #expect(badUID.status == 400 && badUID.errorCode == .invalidUID)
        let noToken = try await server.request("GET", "/v1/me")
        #expect(noToken.status == 401 && noToken.errorCode == .authRequired)
        let badToken = try await server.request("GET", "/v1/me", token: "pt_forged")
        #expect(badToken.status == 401 && badToken.errorCode == .authTokenInvalid)
        let badKey = try await server.request(
            "POST", "/v1/users", apiKey: "rk_forged", body: CreateUserRequest(uid: "x"))
        #expect(badKey.status == 401 && badKey.errorCode == .apiKeyInvalid)
        let malformed = try await server.request("POST", "/v1/login", body: "not an object")
        #expect(malformed.status == 400 && malformed.errorCode == .badRequest)
        try await server.stop()
    }

    @Test func theServerKeyManagesUsersAndTokens() async throws {
        let server = try await TestServer.start()
        let key = server.app.restAPIKey
        let created = try await server.request(
            "POST", "/v1/users", apiKey: key, body: CreateUserRequest(uid: "bob", name: "Bob"))
        #expect(try created.status == 201 && created.decode(User.self).name == "Bob")
        #expect(
            try await server.request("POST", "/v1/users", apiKey: key, body: CreateUserRequest(uid: "bob")).errorCode
                == .uidAlreadyExists)
        #expect(try await server.request("POST", "/v1/users/ghost/auth-tokens", apiKey: key).errorCode == .uidNotFound)

        let issued: IssuedAuthToken = try await server.request(
            "POST", "/v1/users/bob/auth-tokens", apiKey: key, body: IssueAuthTokenRequest(ttlSeconds: 3600)
        ).decode()
        #expect(issued.token.expiresAt != nil && issued.authToken.hasPrefix("pt_"))
        #expect(try await server.request("GET", "/v1/me", token: issued.authToken).decode(User.self).uid == "bob")
        let listed: AuthTokenList = try await server.request("GET", "/v1/users/bob/auth-tokens", apiKey: key).decode()
        #expect(listed.tokens.map(\.id) == [issued.token.id])
        #expect(!listed.tokens.description.contains(issued.authToken))

        // A user token is not a server key, and a user may only change their own profile.
        #expect(
            try await server.request("POST", "/v1/users", token: issued.authToken, body: CreateUserRequest(uid: "x"))
                .errorCode == .authRequired)
        let alice = try await server.login("alice")
        let forbidden = try await server.request(
            "PATCH", "/v1/users/bob", token: alice, body: UpdateUserRequest(name: "hacked"))
        #expect(forbidden.status == 403 && forbidden.errorCode == .forbidden)
        #expect(
            try await server.request(
                "PATCH", "/v1/users/bob", token: issued.authToken, body: UpdateUserRequest(name: "Bobby")
            ).decode(User.self).name == "Bobby")
        #expect(
            try await server.request(
                "PATCH", "/v1/users/bob", apiKey: key, body: UpdateUserRequest(avatarURL: "https://a/b.png")
            ).decode(User.self).avatarURL == "https://a/b.png")

        #expect(
            try await server.request("DELETE", "/v1/users/bob/auth-tokens/tok_nope", apiKey: key).errorCode
                == .tokenNotFound)
        #expect(
            try await server.request("DELETE", "/v1/users/bob/auth-tokens/\(issued.token.id)", apiKey: key).status
                == 204)
        #expect(try await server.request("GET", "/v1/me", token: issued.authToken).errorCode == .authTokenInvalid)
        try await server.stop()
    }

    @Test func outsidersCannotSeeAConversation() async throws {
        let server = try await TestServer.start()
        let alice = try await server.login("alice")
        _ = try await server.login("bob")
        let carol = try await server.login("carol")
        let privateGroup = try await server.createConversation(token: alice, with: ["bob"])
        let publicGroup = try await server.createConversation(token: alice, with: ["bob"], isPublic: true)
        for path in ["", "/messages", "/participants"] {
            let hidden = try await server.request("GET", "/v1/conversations/\(privateGroup.id)\(path)", token: carol)
            #expect(hidden.status == 404 && hidden.errorCode == .conversationNotFound)
            let closed = try await server.request("GET", "/v1/conversations/\(publicGroup.id)\(path)", token: carol)
            #expect(closed.status == 403 && closed.errorCode == .notAParticipant)
        }
        let send = try await server.request(
            "POST", "/v1/conversations/\(privateGroup.id)/messages", token: carol,
            body: SendMessageRequest(parts: [.text("let me in")]))
        #expect(send.errorCode == .conversationNotFound)
        let add = try await server.request(
            "POST", "/v1/conversations/\(privateGroup.id)/participants", token: carol,
            body: AddParticipantsRequest(participants: [.init(uid: "carol")]))
        #expect(add.errorCode == .conversationNotFound)
        let list: ConversationList = try await server.request("GET", "/v1/conversations", token: carol).decode()
        #expect(list.conversations.isEmpty)

        // Users of another app see nothing of this one.
        let other = try await AppProvisioning.createApp(in: server.store, name: "Other")
        let mallory: LoginResponse = try await server.request(
            "POST", "/v1/login", body: LoginRequest(appId: other.appId, uid: "alice", authKey: other.authKey)
        ).decode()
        #expect(
            try await server.request("GET", "/v1/conversations/\(privateGroup.id)", token: mallory.authToken).errorCode
                == .conversationNotFound)
        #expect(try await server.request("GET", "/v1/users/bob", token: mallory.authToken).errorCode == .uidNotFound)
        try await server.stop()
    }

    @Test func messagesAreValidatedDeduplicatedAndPaged() async throws {
        let server = try await TestServer.start()
        let alice = try await server.login("alice")
        let group = try await server.createConversation(token: alice, with: [])
        let path = "/v1/conversations/\(group.id)/messages"
        let empty = try await server.request(
            "POST", path, token: alice, body: SendMessageRequest(parts: [.text("   ")]))
        #expect(empty.status == 400 && empty.errorCode == .messageEmpty)
        let huge = try await server.request(
            "POST", path, token: alice, body: SendMessageRequest(parts: [.text(String(repeating: "x", count: 65_537))]))
        #expect(huge.status == 413 && huge.errorCode == .messageTooLarge)

        let first = try await server.request(
            "POST", path, token: alice, body: SendMessageRequest(clientMessageId: "k1", parts: [.text("one")]))
        let again = try await server.request(
            "POST", path, token: alice, body: SendMessageRequest(clientMessageId: "k1", parts: [.text("one")]))
        #expect(first.status == 201 && again.status == 200)
        #expect(try first.decode(Message.self) == again.decode(Message.self))
        for index in 2...5 {
            _ = try await server.request(
                "POST", path, token: alice, body: SendMessageRequest(parts: [.text("m\(index)")]))
        }
        let newest: MessagePage = try await server.request("GET", path + "?limit=3", token: alice).decode()
        #expect(newest.messages.map(\.text) == ["m3", "m4", "m5"])
        let cursor = try #require(newest.nextCursor)
        let older: MessagePage = try await server.request("GET", path + "?limit=3&cursor=\(cursor)", token: alice)
            .decode()
        #expect(older.messages.map(\.text) == ["one", "m2"] && older.nextCursor == nil)
        #expect(try await server.request("GET", path + "?limit=0", token: alice).errorCode == .badRequest)
        #expect(try await server.request("GET", path + "?cursor=abc", token: alice).errorCode == .badRequest)
        try await server.stop()
    }

    @Test func devicesAreRegisteredReplacedMovedAndRemoved() async throws {
        let server = try await TestServer.start()
        let alice = try await server.login("alice")
        let bob = try await server.login("bob")
        let token = String(repeating: "AB", count: 32)
        let put = try await server.request(
            "PUT", "/v1/me/devices/phone-1", token: alice,
            body: RegisterDeviceRequest(token: token, environment: .sandbox)
        )
        #expect(put.status == 200)
        let device = try put.decode(Device.self)
        #expect(device.deviceId == "phone-1" && device.token == token.lowercased() && device.environment == .sandbox)
        #expect(
            try await server.request("GET", "/v1/me/devices", token: alice).decode(DeviceList.self).devices == [device])

        // The same token from Bob moves to Bob.
        _ = try await server.request(
            "PUT", "/v1/me/devices/bobs-phone", token: bob,
            body: RegisterDeviceRequest(token: token, environment: .production))
        #expect(try await server.request("GET", "/v1/me/devices", token: alice).decode(DeviceList.self).devices.isEmpty)
        #expect(
            try await server.request("GET", "/v1/me/devices", token: bob).decode(DeviceList.self).devices.map(
                \.deviceId) == ["bobs-phone"])

        let badId = try await server.request(
            "PUT", "/v1/me/devices/has%20space", token: bob,
            body: RegisterDeviceRequest(token: token, environment: .production))
        #expect(badId.status == 400 && badId.errorCode == .invalidDeviceId)
        let badToken = try await server.request(
            "PUT", "/v1/me/devices/phone", token: bob,
            body: RegisterDeviceRequest(token: "xyz", environment: .production))
        #expect(badToken.status == 400 && badToken.errorCode == .invalidDeviceToken)
        let badPlatform = try await server.request(
            "PUT", "/v1/me/devices/phone", token: bob,
            body: ["platform": "fcm", "token": .string(token), "environment": "production"] as JSONValue
        )
        #expect(badPlatform.status == 400 && badPlatform.errorCode == .badRequest)
        let anonymous = try await server.request(
            "PUT", "/v1/me/devices/phone", body: RegisterDeviceRequest(token: token, environment: .production))
        #expect(anonymous.status == 401)

        #expect(
            try await server.request("DELETE", "/v1/me/devices/bobs-phone", token: alice).errorCode == .deviceNotFound)
        #expect(try await server.request("DELETE", "/v1/me/devices/bobs-phone", token: bob).status == 204)
        let gone = try await server.request("DELETE", "/v1/me/devices/bobs-phone", token: bob)
        #expect(gone.status == 404 && gone.errorCode == .deviceNotFound)
        try await server.stop()
    }
}
