import Foundation
import Parley
import ParleyProtocol
import ParleyTesting
import Testing

/// The SwiftUI models (docs/SDK.md, "SwiftUI models"), event by event against a live server, on the main actor as a
/// view would use them.
@MainActor @Suite(.timeLimit(.minutes(3))) struct ObservableModelTests {
    func client(_ uid: String, _ server: TestServer, autoConnect: Bool = true) async throws -> ParleyClient {
        let client = try ParleyClient(
            appId: server.app.appId, settings: testSettings(server: server, autoConnect: autoConnect))
        try await client.start()
        try await client.login(uid: uid, authKey: server.app.authKey)
        return client
    }

    func send(_ text: String, in conversation: String, as token: String, on server: TestServer) async throws {
        let answer = try await server.request(
            "POST", "/v1/conversations/\(conversation)/messages", token: token,
            body: SendMessageRequest(parts: [.text(text)])
        )
        #expect(answer.status == 201)
    }

    @Test func theConnectionModelFollowsTheStatus() async throws {
        let server = try await TestServer.start()
        let bob = try await client("bob", server, autoConnect: false)
        let model = ConnectionModel(client: bob)
        #expect(!model.isConnected)
        try await bob.connect()
        #expect(await eventually { model.isConnected })
        await bob.disconnect()
        #expect(await eventually { model.status == .disconnected })
        await bob.shutdown()
        try await server.stop()
    }

    @Test func theInboxSortsByActivityWithLastMessagesAndUnreadCounts() async throws {
        let server = try await TestServer.start()
        let bob = try await client("bob", server)
        await bob.waitUntilConnected()
        let alice = try await server.login("alice")
        let carol = try await server.login("carol")
        let withAlice = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        let withCarol = try await server.createConversation(token: carol, type: .direct, with: ["bob"])
        try await send("first from alice", in: withAlice.id, as: alice, on: server)
        try await send("from carol", in: withCarol.id, as: carol, on: server)

        let inbox = InboxModel(client: bob)
        await inbox.load()
        #expect(inbox.error == nil)
        #expect(inbox.entries.map(\.id) == [withCarol.id, withAlice.id])
        #expect(inbox.entries.map { $0.lastMessage?.text } == ["from carol", "first from alice"])
        #expect(inbox.entries.map(\.unread) == [1, 1] && inbox.totalUnread == 2)

        // A new message moves its conversation up, with its count.
        try await send("again from alice", in: withAlice.id, as: alice, on: server)
        #expect(await eventually { inbox.entries.first?.id == withAlice.id })
        #expect(await eventually { inbox.entries.first?.unread == 2 && inbox.totalUnread == 3 })
        #expect(inbox.entries.first?.lastMessage?.text == "again from alice")
        // Reading it clears its count; a conversation the list did not have appears with its first message.
        try await bob.markRead(upTo: inbox.entries.first!.lastMessage!.seq, in: withAlice.id)
        #expect(await eventually { inbox.entries.first { $0.id == withAlice.id }?.unread == 0 })
        let dave = try await server.login("dave")
        let withDave = try await server.createConversation(token: dave, type: .direct, with: ["bob"])
        try await send("hello from dave", in: withDave.id, as: dave, on: server)
        #expect(
            await eventually {
                inbox.entries.first?.id == withDave.id && inbox.entries.first?.lastMessage?.text == "hello from dave"
            })
        inbox.stop()
        await bob.shutdown()
        try await server.stop()
    }

    @Test func theInboxPagesFiltersAndArchives() async throws {
        let server = try await TestServer.start()
        let bob = try await client("bob", server)
        await bob.waitUntilConnected()
        var conversations: [String] = []
        for uid in ["alice", "carol", "dave", "erin", "frank"] {
            let token = try await server.login(uid)
            let direct = try await server.createConversation(token: token, type: .direct, with: ["bob"])
            try await send("from \(uid)", in: direct.id, as: token, on: server)
            conversations.insert(direct.id, at: 0)
        }

        // Two a page: one request each, in order, each row with its other member.
        let inbox = InboxModel(client: bob, limit: 2)
        await inbox.load()
        #expect(inbox.entries.map(\.id) == Array(conversations.prefix(2)) && inbox.hasMore)
        #expect(inbox.entries.first?.otherMember?.uid == "frank" && inbox.totalUnread == 5)
        await inbox.loadMore()
        await inbox.loadMore()
        #expect(inbox.entries.map(\.id) == conversations && !inbox.hasMore)

        // Archived: gone, and back with the next message.
        await inbox.archive(conversations[4])
        #expect(inbox.error == nil && !inbox.entries.contains { $0.id == conversations[4] })
        let fresh = InboxModel(client: bob)
        await fresh.load()
        #expect(fresh.entries.count == 4)
        let archived = InboxModel(client: bob, filter: InboxFilter(archived: true))
        await archived.load()
        #expect(archived.entries.map(\.id) == [conversations[4]])
        let alice = try await server.login("alice")
        try await send("back again", in: conversations[4], as: alice, on: server)
        #expect(await eventually { inbox.entries.first?.id == conversations[4] })
        #expect(await eventually { archived.entries.isEmpty }, "back in the inbox: out of the archived list")

        // Unread only: a conversation read leaves the list.
        let unread = InboxModel(client: bob, filter: InboxFilter(unreadOnly: true))
        await unread.load()
        #expect(unread.entries.count == 5)
        let first = try #require(unread.entries.first)
        try await bob.markRead(upTo: try #require(first.lastMessage?.seq), in: first.id)
        #expect(await eventually { unread.entries.count == 4 && !unread.entries.contains { $0.id == first.id } })
        // A new message brings it back, read in one request with the model's filter.
        try await send("once more", in: first.id, as: alice, on: server)
        #expect(await eventually { unread.entries.first?.id == first.id && unread.entries.count == 5 })

        // Groups only: a message in a direct conversation the list lacks is not added; one in a group is.
        let groups = InboxModel(client: bob, filter: InboxFilter(type: .group))
        await groups.load()
        #expect(groups.entries.isEmpty && groups.error == nil)
        let group = try await server.createConversation(token: alice, with: ["bob"])
        try await send("direct", in: conversations[4], as: alice, on: server)
        try await send("in a group", in: group.id, as: alice, on: server)
        #expect(await eventually { groups.entries.map(\.id) == [group.id] && groups.entries[0].unread == 1 })
        for model in [inbox, fresh, archived, unread, groups] { model.stop() }
        await bob.shutdown()
        try await server.stop()
    }

    @Test func aConversationShowsMessagesOutboxTypingAndReceipts() async throws {
        let server = try await TestServer.start()
        let bob = try await client("bob", server)
        await bob.waitUntilConnected()
        let alice = try await client("alice", server)
        await alice.waitUntilConnected()
        let conversation = try await bob.directConversation(with: "alice")
        for index in 1...5 {
            _ = try await alice.sendTextMessage("old \(index)", to: .conversation(conversation.id))
        }
        let model = ConversationModel(client: bob, conversationId: conversation.id)
        await model.load(pageSize: 3)
        #expect(model.messages.map(\.text) == ["old 3", "old 4", "old 5"] && model.hasOlder)
        await model.loadOlder()
        #expect(model.messages.map(\.text) == ["old 1", "old 2", "old 3", "old 4", "old 5"] && !model.hasOlder)

        // What bob sends shows in the outbox at once, then as a stored message.
        let entry = try model.send("from bob")
        #expect(model.outgoing.map(\.id).contains(entry.id))
        #expect(await eventually { model.outgoing.isEmpty && model.messages.last?.text == "from bob" })
        // Alice types, then reads; her message arrives live.
        _ = await alice.startTyping(in: conversation.id)
        #expect(await eventually { model.typing == ["alice"] })
        _ = await alice.stopTyping(in: conversation.id)
        #expect(await eventually { model.typing.isEmpty })
        let last = try #require(model.messages.last)
        try await alice.markRead(upTo: last.seq, in: conversation.id)
        #expect(await eventually { model.readUpTo["alice"] == last.seq })
        _ = try await alice.sendTextMessage("live", to: .conversation(conversation.id))
        #expect(await eventually { model.messages.last?.text == "live" })
        model.stop()
        await alice.shutdown()
        await bob.shutdown()
        try await server.stop()
    }
}
