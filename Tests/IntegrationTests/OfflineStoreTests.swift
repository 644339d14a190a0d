import Foundation
import Parley
import ParleyProtocol
import ParleyTesting
import Testing

/// The offline store (docs/SDK.md, "Offline"): what the device keeps of the user's conversations, shown at once by a
/// client started again with the server out of reach, kept right by events and resume, evicted oldest first, and
/// wiped by logout.
@MainActor @Suite(.timeLimit(.minutes(3))) struct OfflineStoreTests {
    /// Bob's client over `storage`, through `url`, keeping `limit` messages per conversation; reconnects quickly.
    func bob(_ url: URL, _ storage: TemporaryDirectory, appId: String, limit: Int) throws -> ParleyClient {
        var tuning = ConnectionTuning()
        tuning.initialBackoff = .milliseconds(50)
        tuning.maximumBackoff = .milliseconds(500)
        var settings = try testSettings(serverURL: url, storage: storage, tuning: tuning)
        settings.offlineMessageLimit = limit
        return try ParleyClient(appId: appId, settings: settings)
    }

    @Test func aRelaunchWithoutTheServerShowsWhatTheDeviceKeptThenResumeKeepsItRight() async throws {
        let server = try await TestServer.start()
        let proxy = try await TCPProxy.start(targetPort: server.port)
        let url = URL(string: "http://127.0.0.1:\(proxy.port)")!
        let storage = try TemporaryDirectory(prefix: "parley-offline")
        let appId = server.app.appId

        let first = try bob(url, storage, appId: appId, limit: 5)
        try await first.start()
        try await first.login(uid: "bob", authKey: server.app.authKey)
        await first.waitUntilConnected()
        let alice = try ParleyClient(appId: appId, settings: try testSettings(server: server))
        try await alice.start()
        try await alice.login(uid: "alice", authKey: server.app.authKey)
        let conversation = try await alice.directConversation(with: "bob")
        var sent: [Message] = []
        for index in 1...7 {
            sent.append(try await alice.sendTextMessage("m\(index)", to: .conversation(conversation.id)))
        }

        let inbox = InboxModel(client: first)
        await inbox.load()
        #expect(inbox.error == nil && !inbox.isStored)
        let chat = ConversationModel(client: first, conversationId: conversation.id)
        await chat.load(pageSize: 3)
        #expect(chat.messages.map(\.text) == ["m5", "m6", "m7"])

        // Changes while bob watches: an edit, a deletion, a reaction, and one message more (m3 is evicted).
        try await alice.editTextMessage(sent[6].id, in: conversation.id, text: "m7 edited")
        _ = try await alice.deleteMessage(sent[5].id, in: conversation.id)
        try await alice.addReaction("👍", to: .id(sent[4].id), in: conversation.id)
        _ = try await alice.sendTextMessage("m8", to: .conversation(conversation.id))
        let unread = try await first.unreadCounts().total
        #expect(
            await eventually {
                chat.messages.last?.text == "m8" && chat.messages.first { $0.text == "m5" }?.reactions?.count == 1
                    && inbox.entries.first?.unread == unread && inbox.entries.first?.lastMessage?.text == "m8"
            })
        let kept = first.storedMessages(conversationId: conversation.id)
        #expect(kept.map(\.text) == ["m4", "m5", "", "m7 edited", "m8"])
        #expect(kept[1].reactions == [ReactionSummary(key: "👍", count: 1, reacted: false)])
        #expect(kept[2].deletedAt != nil)
        chat.stop()
        inbox.stop()
        await first.shutdown()

        // A crash while an event was being written leaves half a line in a journal: it is skipped.
        let files = try FileManager.default.subpathsOfDirectory(atPath: storage.path)
        let journals = files.filter { $0.hasSuffix(".events") }
        #expect(!journals.isEmpty, "\(files)")
        for journal in journals {
            let handle = try FileHandle(forWritingTo: storage.url.appendingPathComponent(journal))
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(#"{"id":"conversationMessage.sent:9","appId":"#.utf8))
            try handle.close()
        }

        // The server is out of reach; alice writes meanwhile. The relaunched app shows what it kept at once.
        proxy.refuse(true)
        _ = try await alice.sendTextMessage("m9 while bob was away", to: .conversation(conversation.id))
        try await alice.addReaction("🎉", to: .id(sent[4].id), in: conversation.id)
        let second = try bob(url, storage, appId: appId, limit: 5)
        #expect(second.getLoggedInUser()?.uid == "bob")
        let stored = second.storedConversations()
        #expect(stored.map(\.id) == [conversation.id])
        #expect(stored.first?.lastMessage?.text == "m8" && stored.first?.unread == unread)
        #expect(second.storedMessages(conversationId: conversation.id) == kept)
        try await second.start()  // unreachable: succeeds with a saved session
        let offlineInbox = InboxModel(client: second)
        let offlineChat = ConversationModel(client: second, conversationId: conversation.id)
        await offlineInbox.load()
        await offlineChat.load(pageSize: 3)
        #expect(
            offlineInbox.isStored && offlineInbox.error?.code == .serverUnreachable,
            "\(String(describing: offlineInbox.error))")
        #expect(offlineInbox.entries == stored)
        #expect(offlineChat.isStored && offlineChat.messages == kept)

        // Back in reach: resume brings m9 to the store, and the models load from the server on their own.
        proxy.refuse(false)
        #expect(
            await eventually {
                second.storedMessages(conversationId: conversation.id).last?.text == "m9 while bob was away"
            })
        // m5's new reaction reaches the store through resume alone: the pages read on reconnect hold m7 to m9.
        #expect(
            await eventually {
                second.storedMessages(conversationId: conversation.id).first { $0.id == sent[4].id }?.reactions?.map(
                    \.key) == ["👍", "🎉"]
            })
        #expect(
            await eventually { !offlineChat.isStored && offlineChat.messages.last?.text == "m9 while bob was away" })
        #expect(await eventually { !offlineInbox.isStored && offlineInbox.entries.first?.unread == unread + 1 })
        #expect(second.storedConversations().first?.lastMessage?.text == "m9 while bob was away")
        #expect(second.storedMessages(conversationId: conversation.id).count == 5)

        // Logout wipes it all.
        offlineChat.stop()
        offlineInbox.stop()
        try await second.logout()
        #expect(second.storedConversations().isEmpty && second.storedMessages(conversationId: conversation.id).isEmpty)
        let left = try FileManager.default.contentsOfDirectory(atPath: storage.path)
        #expect(!left.contains { $0.hasPrefix("offline-") }, "\(left)")
        await second.shutdown()
        await alice.shutdown()
        try await proxy.stop()
        try await server.stop()
    }

    @Test func leavingAConversationOrLoggingInAsSomeoneElseForgetsIt() async throws {
        let server = try await TestServer.start()
        let storage = try TemporaryDirectory(prefix: "parley-offline")
        let appId = server.app.appId
        let client = try bob(server.baseURL, storage, appId: appId, limit: 50)
        try await client.start()
        try await client.login(uid: "bob", authKey: server.app.authKey)
        await client.waitUntilConnected()
        let alice = try await server.login("alice")
        let group = try await server.createConversation(token: alice, type: .group, with: ["bob"])
        let answer = try await server.request(
            "POST", "/v1/conversations/\(group.id)/messages", token: alice,
            body: SendMessageRequest(parts: [.text("hi")])
        )
        #expect(answer.status == 201)
        _ = try await client.inbox()
        #expect(await eventually { client.storedMessages(conversationId: group.id).map(\.text) == ["hi"] })
        #expect(client.storedConversations().map(\.id) == [group.id])

        // Removed from the group: its row and messages go.
        let removed = try await server.request(
            "DELETE", "/v1/conversations/\(group.id)/participants/bob", token: alice
        )
        #expect(removed.status == 204)
        #expect(await eventually { client.storedConversations().isEmpty })
        #expect(client.storedMessages(conversationId: group.id).isEmpty)

        // Someone else logging in on this device never sees bob's store.
        let direct = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        _ = try await client.inbox()
        #expect(client.storedConversations().map(\.id) == [direct.id])
        _ = try await client.login(uid: "carol", authKey: server.app.authKey)
        #expect(client.storedConversations().isEmpty)
        let again = try bob(server.baseURL, storage, appId: appId, limit: 50)
        #expect(again.getLoggedInUser()?.uid == "carol" && again.storedConversations().isEmpty)
        await again.shutdown()
        await client.shutdown()
        try await server.stop()
    }

    /// A user whose store never held an inbox row (only messages of a conversation that existed before the login):
    /// another user logging in on the device still sees none of it.
    @Test func anotherUsersLoginNeverSeesMessagesKeptBeforeAnyInbox() async throws {
        let server = try await TestServer.start()
        let storage = try TemporaryDirectory(prefix: "parley-offline")
        let alice = try await server.login("alice")
        _ = try await server.login("bob")  // bob exists: the group is made before his app logs in
        let group = try await server.createConversation(token: alice, type: .group, with: ["bob"])
        let client = try bob(server.baseURL, storage, appId: server.app.appId, limit: 50)
        try await client.start()
        try await client.login(uid: "bob", authKey: server.app.authKey)
        await client.waitUntilConnected()
        let answer = try await server.request(
            "POST", "/v1/conversations/\(group.id)/messages", token: alice,
            body: SendMessageRequest(parts: [.text("for bob only")])
        )
        #expect(answer.status == 201)
        #expect(await eventually { client.storedMessages(conversationId: group.id).map(\.text) == ["for bob only"] })
        #expect(client.storedConversations().isEmpty)
        _ = try await client.login(uid: "carol", authKey: server.app.authKey)
        #expect(client.storedMessages(conversationId: group.id).isEmpty)
        await client.shutdown()
        try await server.stop()
    }
}
