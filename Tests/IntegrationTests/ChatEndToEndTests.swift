import Foundation
import Parley
import ParleyServer
import ParleyTesting
import Testing

/// The walking skeleton end to end: a real server, SDK clients over real sockets.
@Suite(.timeLimit(.minutes(2))) struct ChatEndToEndTests {
    func client(_ server: TestServer, storage: TemporaryDirectory? = nil, autoConnect: Bool = true) async throws
        -> ParleyClient
    {
        try await ParleyClient.initialize(
            appId: server.app.appId, settings: testSettings(server: server, storage: storage, autoConnect: autoConnect)
        )
    }

    @Test func twoUsersExchangeMessagesLiveAndTheSendersOtherDeviceSeesThem() async throws {
        let server = try await TestServer.start()
        let alice = try await client(server)
        let alicePhone = try await client(server)
        let bob = try await client(server)
        try await alice.login(uid: "alice", authKey: server.app.authKey)
        try await alicePhone.login(uid: "alice", authKey: server.app.authKey)
        try await bob.login(uid: "bob", authKey: server.app.authKey)
        for client in [alice, alicePhone, bob] { await client.waitUntilConnected() }

        let bobInbox = RecordingListener()
        bob.addEventListener("inbox", bobInbox)
        let phoneStream = alicePhone.events(names: [.messageSent])
        let sent = try await alice.sendTextMessage("Hi Bob", to: .user("bob"))

        let received = await bobInbox.next { $0.name == .messageSent }
        #expect(received?.payload == .messageSent(sent))
        #expect(received?.seq == sent.seq && received?.context.createdBy == "alice")
        var phoneIterator = phoneStream.makeAsyncIterator()
        #expect(await phoneIterator.next()?.payload == .messageSent(sent))

        let reply = try await bob.sendTextMessage("Hi Alice", to: .user("alice"))
        #expect(reply.conversationId == sent.conversationId && reply.seq == sent.seq + 1)
        let history = try await alice.fetchMessages(with: .user("bob"))
        #expect(history.messages.map(\.text) == ["Hi Bob", "Hi Alice"])
        for client in [alice, alicePhone, bob] { await client.shutdown() }
        try await server.stop()
    }

    @Test func aThirdUserReceivesNothingAndIsRefusedTheHistory() async throws {
        let server = try await TestServer.start()
        let alice = try await client(server)
        let carol = try await client(server)
        try await alice.login(uid: "alice", authKey: server.app.authKey)
        try await carol.login(uid: "carol", authKey: server.app.authKey)
        _ = try await ParleyAdmin(serverURL: server.baseURL, restAPIKey: server.app.restAPIKey).createUser(uid: "bob")
        await carol.waitUntilConnected()
        let carolInbox = RecordingListener()
        carol.addEventListener("inbox", carolInbox)

        let group = try await alice.createGroup(name: "Alice and Bob", participants: ["bob"])
        let message = try await alice.sendTextMessage("secret", to: .conversation(group.id))
        // Carol's own message is published after Alice's: when it arrives, Alice's would have arrived before it.
        let own = try await carol.sendTextMessage(
            "note to self", to: .conversation(try await carol.createGroup(name: "Carol").id))
        let first = await carolInbox.next { $0.name == .messageSent }
        #expect(first?.payload == .messageSent(own))
        #expect(!carolInbox.receivedEvents.contains { $0.conversationId == message.conversationId })

        await #expect(
            throws: ParleyError(.conversationNotFound, "No conversation \(group.id) visible to you.", status: 404)
        ) {
            _ = try await carol.fetchMessages(conversationId: group.id)
        }
        await #expect(throws: ParleyError.self) {
            try await carol.sendTextMessage("let me in", to: .conversation(group.id))
        }
        await alice.shutdown()
        await carol.shutdown()
        try await server.stop()
    }

    @Test func anUnknownAppIDFailsInitWithItsCode() async throws {
        let server = try await TestServer.start()
        let error = await #expect(throws: ParleyError.self) {
            _ = try await ParleyClient.initialize(appId: "not-an-app", settings: testSettings(server: server))
        }
        #expect(error?.code == .invalidAppID)
        try await server.stop()
    }

    @Test func wrongCredentialsGetTheirCodes() async throws {
        let server = try await TestServer.start()
        let client = try await client(server)
        let badToken = await #expect(throws: ParleyError.self) { try await client.login(authToken: "pt_forged") }
        #expect(badToken?.code == .authTokenInvalid)
        let badKey = await #expect(throws: ParleyError.self) {
            try await client.login(uid: "alice", authKey: "ak_wrong")
        }
        #expect(badKey?.code == .authKeyInvalid)
        #expect(client.getLoggedInUser() == nil)
        let notLoggedIn = await #expect(throws: ParleyError.self) {
            try await client.sendTextMessage("x", to: .user("bob"))
        }
        #expect(notLoggedIn?.code == .notLoggedIn)
        await client.shutdown()
        try await server.stop()
    }

    @Test func aTokenIssuedByTheAppServerLogsIn() async throws {
        let server = try await TestServer.start()
        let admin = ParleyAdmin(serverURL: server.baseURL, restAPIKey: server.app.restAPIKey)
        try await admin.createUser(uid: "dave", name: "Dave")
        let issued = try await admin.issueAuthToken(uid: "dave")
        let client = try await client(server)
        #expect(try await client.login(authToken: issued.authToken).name == "Dave")
        await client.waitUntilConnected()

        // Revoking the token closes the socket with 4001, and the SDK stops instead of retrying.
        try await admin.revokeAuthToken(uid: "dave", tokenId: issued.token.id)
        let status = await client.waitForStatus { if case .failed = $0 { true } else { false } }
        #expect(
            status
                == .failed(
                    ParleyError(
                        .authTokenInvalid, "The server closed the connection: ERR_AUTH_TOKEN_INVALID.", status: 4001)))
        await client.shutdown()
        try await server.stop()
    }

    @Test func aNewClientOverTheSameFolderRestoresTheUserAndReconnects() async throws {
        let server = try await TestServer.start()
        let storage = try TemporaryDirectory()
        let first = try await client(server, storage: storage)
        try await first.login(uid: "erin", authKey: server.app.authKey)
        await first.waitUntilConnected()
        await first.shutdown()

        let reopened = try await client(server, storage: storage)
        #expect(reopened.getLoggedInUser()?.uid == "erin")
        await reopened.waitUntilConnected()
        #expect(try await reopened.conversations().conversations.isEmpty)

        try await reopened.logout()
        #expect(reopened.connectionStatus == .disconnected && reopened.getLoggedInUser() == nil)
        let twice = await #expect(throws: ParleyError.self) { try await reopened.logout() }
        #expect(twice?.code == .notLoggedIn)
        let third = try await client(server, storage: storage)
        #expect(third.getLoggedInUser() == nil && third.connectionStatus == .disconnected)
        for client in [reopened, third] { await client.shutdown() }
        try await server.stop()
    }

    @Test func sendingWorksOverHTTPWhileTheSocketIsDown() async throws {
        let server = try await TestServer.start()
        let alice = try await client(server, autoConnect: false)
        try await alice.login(uid: "alice", authKey: server.app.authKey)
        #expect(alice.connectionStatus == .disconnected)
        let group = try await alice.createGroup(name: "Solo")
        let message = try await alice.sendTextMessage(
            "offline socket", to: .conversation(group.id), clientMessageId: "fixed-id")
        let again = try await alice.sendTextMessage(
            "offline socket", to: .conversation(group.id), clientMessageId: "fixed-id")
        #expect(again == message)
        try await alice.connect()
        let overSocket = try await alice.sendTextMessage("now live", to: .conversation(group.id))
        #expect(overSocket.seq == message.seq + 1)
        await alice.shutdown()
        try await server.stop()
    }
}
