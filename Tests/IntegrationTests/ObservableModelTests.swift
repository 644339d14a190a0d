import Foundation
import Parley
import ParleyProtocol
import ParleyServer
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

    @Test func aSendShowsInPlaceFromPendingToStoredUnderOneRowId() async throws {
        let server = try await TestServer.start()
        let proxy = try await TCPProxy.start(targetPort: server.port)
        let bob = try ParleyClient(
            appId: server.app.appId, settings: testSettings(serverURL: URL(string: "http://127.0.0.1:\(proxy.port)")!))
        try await bob.start()
        try await bob.login(uid: "bob", authKey: server.app.authKey)
        await bob.waitUntilConnected()
        _ = try await server.login("alice")
        let conversation = try await bob.directConversation(with: "alice")
        _ = try await bob.sendTextMessage("online", to: .conversation(conversation.id))
        let model = ConversationModel(client: bob, conversationId: conversation.id)
        await model.load()
        #expect(model.items.compactMap { $0.message?.text } == ["online"])

        // The server out of reach (socket and HTTP): the send waits in the outbox and shows as pending at the end.
        proxy.refuse(true)
        proxy.cutAll()
        _ = await bob.waitForStatus { $0 != .connected }
        let entry = try model.send("while away")
        let row = try #require(model.items.last)
        #expect(row.pending?.clientMessageId == entry.clientMessageId && row.pending?.state == .pending)
        #expect(row.id == "bob/\(entry.clientMessageId)")
        #expect(model.items.count == 2)

        // Back: the same row becomes the stored message, once, and nothing is pending any more.
        proxy.refuse(false)
        await bob.networkStatusChanged(available: false)
        await bob.networkStatusChanged(available: true)
        #expect(await eventually(timeout: .seconds(30)) { model.items.last?.message?.text == "while away" })
        #expect(model.items.last?.id == row.id)
        #expect(model.items.map(\.id).filter { $0 == row.id }.count == 1)
        #expect(model.items.count == 2 && model.outgoing.isEmpty)
        #expect(await eventually { model.messages.last?.clientMessageId == entry.clientMessageId })
        #expect(model.items.count == 2)
        model.stop()
        await bob.shutdown()
        try await proxy.stop()
        try await server.stop()
    }

    @Test func aConversationOpensAroundAMessageAndWidensBothWays() async throws {
        let server = try await TestServer.start()
        let bob = try await client("bob", server)
        await bob.waitUntilConnected()
        let alice = try await client("alice", server)
        await alice.waitUntilConnected()
        let conversation = try await bob.directConversation(with: "alice")
        var sent: [Message] = []
        for index in 1...30 {
            sent.append(try await alice.sendTextMessage("m\(index)", to: .conversation(conversation.id)))
        }
        let model = ConversationModel(client: bob, conversationId: conversation.id)
        await model.load(pageSize: 10, around: sent[14].seq)
        #expect(model.error == nil)
        #expect(model.messages.contains { $0.id == sent[14].id })
        #expect(model.hasOlder && model.hasNewer && model.messages.count == 10)
        // A new message while the window does not reach the end waits (it would stand after a gap)...
        let live = try await alice.sendTextMessage("live", to: .conversation(conversation.id))
        // ... while an edit of a message in the window applies at once.
        let inWindow = try #require(model.messages.first)
        _ = try await alice.editTextMessage(inWindow.id, in: conversation.id, text: "edited")
        #expect(await eventually { model.messages.first?.text == "edited" })
        #expect(!model.messages.contains { $0.id == live.id })
        while model.hasNewer { await model.loadNewer() }
        #expect(model.messages.last?.id == live.id)
        while model.hasOlder { await model.loadOlder() }
        #expect(model.messages.map(\.seq) == (sent.map(\.seq) + [live.seq]))
        #expect(model.messages.map(\.text) == sent.map { $0.id == inWindow.id ? "edited" : $0.text } + ["live"])
        // Live again at the end.
        let after = try await alice.sendTextMessage("after", to: .conversation(conversation.id))
        #expect(await eventually { model.messages.last?.id == after.id })

        // Opened around an old message again, a send goes to the end, where it shows.
        await model.load(pageSize: 10, around: sent[2].seq)
        #expect(model.hasNewer)
        let entry = try model.send("from bob")
        #expect(await eventually { !model.hasNewer && model.items.last?.id == "bob/\(entry.clientMessageId)" })
        model.stop()
        await alice.shutdown()
        await bob.shutdown()
        try await server.stop()
    }

    @Test func aThreadModelShowsTheParentRepliesAndPendingRepliesInPlace() async throws {
        let server = try await TestServer.start()
        let bob = try await client("bob", server)
        await bob.waitUntilConnected()
        let alice = try await client("alice", server)
        await alice.waitUntilConnected()
        let conversation = try await bob.directConversation(with: "alice")
        let root = try await alice.sendTextMessage("root", to: .conversation(conversation.id))
        _ = try await alice.sendTextMessage("not a reply", to: .conversation(conversation.id))
        _ = try await bob.sendTextMessage("reply 1", to: .conversation(conversation.id), replyTo: root.id)
        let thread = ConversationModel(client: bob, conversationId: conversation.id, thread: root.id)
        await thread.load()
        #expect(thread.error == nil)
        #expect(thread.parent?.id == root.id && thread.parent?.replyCount == 1)
        #expect(thread.items.compactMap { $0.message?.text } == ["reply 1"])
        let entry = try thread.send("reply 2")
        #expect(thread.items.last?.pending?.clientMessageId == entry.clientMessageId)
        #expect(await eventually { thread.items.last?.message?.text == "reply 2" })
        #expect(thread.items.last?.message?.replyTo == root.id)
        #expect(thread.items.last?.id == "bob/\(entry.clientMessageId)")
        // Alice's reply arrives live; her message outside the thread does not.
        _ = try await alice.sendTextMessage("reply 3", to: .conversation(conversation.id), replyTo: root.id)
        _ = try await alice.sendTextMessage("elsewhere", to: .conversation(conversation.id))
        #expect(await eventually { thread.messages.map(\.text) == ["reply 1", "reply 2", "reply 3"] })
        #expect(await eventually { thread.parent?.replyCount == 3 })
        #expect(!thread.messages.contains { $0.text == "elsewhere" })
        thread.stop()
        await alice.shutdown()
        await bob.shutdown()
        try await server.stop()
    }

    /// A user goes offline 50 ms after their last connection closes (5 s by default).
    nonisolated static func shortPresenceGrace(_ configuration: inout ServerConfiguration) {
        configuration.presenceGrace = .milliseconds(50)
    }

    @Test func theMemberListFollowsPresenceTypingAndMembership() async throws {
        let server = try await TestServer.start(configure: Self.shortPresenceGrace)
        let bob = try await client("bob", server)
        await bob.waitUntilConnected()
        let alice = try await client("alice", server)
        await alice.waitUntilConnected()
        _ = try await server.login("carol")  // a member who never connects
        _ = try await server.login("dave")
        let group = try await bob.createGroup(name: "Team", participants: ["alice", "carol"])
        let model = MemberListModel(client: bob, conversationId: group.id)
        await model.load()
        #expect(model.error == nil)
        // Online first, then by uid.
        #expect(model.members.map(\.id) == ["alice", "bob", "carol"])
        #expect(model.members.map(\.online) == [true, true, false] && model.onlineCount == 2)
        #expect(model.members.first { $0.id == "bob" }?.participant.role == .owner)

        _ = await alice.startTyping(in: group.id)
        #expect(await eventually { model.typing == ["alice"] })
        _ = await alice.stopTyping(in: group.id)
        #expect(await eventually { model.typing.isEmpty })

        _ = try await bob.addParticipants(["dave"], to: group.id)
        #expect(await eventually { model.members.map(\.id).contains("dave") })
        try await bob.removeParticipant("carol", from: group.id)
        #expect(await eventually { !model.members.map(\.id).contains("carol") })

        // Alice goes: offline after the grace, with when she was last seen, and after the online members.
        await alice.shutdown()
        #expect(await eventually { model.members.first { $0.id == "alice" }?.online == false })
        #expect(model.members.first { $0.id == "alice" }?.lastSeenAt != nil)
        #expect(model.members.map(\.id) == ["bob", "alice", "dave"])
        model.stop()
        await bob.shutdown()
        try await server.stop()
    }
}
