import Foundation
import Parley
import ParleyServer
import ParleyTesting
import Testing

/// Edits, deletions, reactions, replies, mentions and roles, live through the SDK: each action's exact event at every
/// client that should get it and at none that should not (alice owns the group; bob and carol are members; dave is
/// an outsider), the refusals of every role that may not, the outbox offline, resume, and the SDK's ``MessageList``.
@Suite(.timeLimit(.minutes(3))) struct MessageLifecycleTests {
    typealias Party = EventCatalogTests.Party

    func party() async throws -> Party { try await EventCatalogTests().party() }

    /// alice's group with bob and carol, and a message of bob's in it; observation starts after them.
    func team(_ party: Party) async throws -> (group: Conversation, message: Message) {
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob", "carol"])
        let message = try await party["bob"].sendTextMessage("hello tema", to: .conversation(group.id))
        try await party.fence()
        party.mark()
        return (group, message)
    }

    /// Checks that `uids` each observed exactly `expected` (names and payloads), and the others nothing.
    func expectObserved(
        _ party: Party, _ expected: [EventPayload], by uids: [String] = ["alice", "bob", "carol"],
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for uid in EventCatalogTests.everyone {
            let observed = party.observed(by: uid).map(\.payload)
            #expect(observed == (uids.contains(uid) ? expected : []), "\(uid)", sourceLocation: sourceLocation)
        }
    }

    // MARK: One test per action

    @Test func anEditReachesEveryParticipantAsTheMessageAfterIt() async throws {
        let party = try await party()
        let (group, message) = try await team(party)
        let edited = try await party["bob"].editTextMessage(message.id, in: group.id, text: "hello team")
        #expect(edited.text == "hello team" && edited.editedAt != nil && edited.seq == message.seq)
        try await party.fence()
        expectObserved(party, [.messageUpdated(edited)])
        for uid in ["alice", "bob", "carol"] {
            let event = try #require(party.observed(by: uid).first)
            #expect(event.name == .messageUpdate && event.context.createdBy == "bob" && event.seq == group.lastSeq + 2)
        }
        let history = try await party["carol"].fetchMessages(conversationId: group.id).messages
        #expect(history.map(\.text) == ["hello team"])
        // The same edit again changes nothing and sends nothing.
        party.mark()
        #expect(try await party["bob"].editTextMessage(message.id, in: group.id, text: "hello team") == edited)
        try await party.fence()
        expectObserved(party, [])
        try await party.stop()
    }

    @Test func aDeletionReachesEveryParticipantAndLeavesATombstone() async throws {
        let party = try await party()
        let (group, message) = try await team(party)
        #expect(try await party["carol"].unreadCounts().total == 1)
        let tombstone = try await party["alice"].deleteMessage(message.id, in: group.id)
        #expect(tombstone.isDeleted && tombstone.parts.isEmpty && tombstone.deletedBy == "alice")
        try await party.fence()
        expectObserved(party, [.messageDeleted(tombstone)])
        let history = try await party["carol"].fetchMessages(conversationId: group.id).messages
        #expect(history == [tombstone])
        // carol's unread count drops with it.
        #expect(try await party["carol"].unreadCounts().total == 0)
        try await party.stop()
    }

    @Test func reactionsReachEveryParticipantWithTheirCount() async throws {
        let party = try await party()
        let (group, message) = try await team(party)
        let byCarol = try await party["carol"].addReaction("👍", to: .id(message.id), in: group.id)
        #expect(byCarol.reactions == [ReactionSummary(key: "👍", count: 1, reacted: true)])
        let byAlice = try await party["alice"].addReaction("👍", to: .id(message.id), in: group.id)
        #expect(byAlice.reactions == [ReactionSummary(key: "👍", count: 2, reacted: true)])
        let undone = try await party["carol"].removeReaction("👍", from: .id(message.id), in: group.id)
        #expect(undone.reactions == [ReactionSummary(key: "👍", count: 1, reacted: false)])
        try await party.fence()
        func reaction(_ uid: String, _ count: Int) -> MessageReaction {
            MessageReaction(messageId: message.id, messageSeq: message.seq, key: "👍", uid: uid, count: count)
        }
        expectObserved(
            party,
            [
                .reactionAdded(reaction("carol", 1)), .reactionAdded(reaction("alice", 2)),
                .reactionRemoved(reaction("carol", 1)),
            ]
        )
        // After carol's removal: one left, alice's.
        #expect(
            try await party["alice"].fetchMessage(message.id, in: group.id).reactions == [
                ReactionSummary(key: "👍", count: 1, reacted: true)
            ])
        #expect(try await party["carol"].fetchMessage(message.id, in: group.id).reactions == undone.reactions)
        try await party.stop()
    }

    @Test func aReplyIsAMessageOfItsThreadAndCountsOnItsParent() async throws {
        let party = try await party()
        let (group, message) = try await team(party)
        let reply = try await party["carol"].sendTextMessage(
            "in the thread", to: .conversation(group.id), replyTo: message.id)
        #expect(reply.replyTo == message.id)
        try await party.fence()
        expectObserved(party, [.messageSent(reply)])
        let thread = try await party["alice"].fetchReplies(to: message.id, in: group.id)
        #expect(thread.messages == [reply] && thread.parent?.id == message.id)
        let parent = try await party["alice"].fetchMessage(message.id, in: group.id)
        #expect(parent.replyCount == 1 && parent.lastReplyAt == reply.sentAt)
        // A reply counts as unread like any message.
        #expect(try await party["alice"].unreadCounts().total == 2)
        try await party.stop()
    }

    @Test func aMentionIsListedForItsParticipantUntilRead() async throws {
        let party = try await party()
        let (group, _) = try await team(party)
        let mention = try await party["alice"].sendTextMessage(
            "@bob @dave look", to: .conversation(group.id), mentions: ["bob", "dave"]
        )
        #expect(mention.mentions == ["bob"])
        try await party.fence()
        expectObserved(party, [.messageSent(mention)])
        #expect(try await party["bob"].fetchUnreadMentions().messages.map(\.id) == [mention.id])
        #expect(try await party["carol"].fetchUnreadMentions().messages.isEmpty)
        #expect(try await party["dave"].fetchUnreadMentions().messages.isEmpty)
        try await party["bob"].markRead(upTo: mention.seq, in: group.id)
        try await party.fence()
        #expect(try await party["bob"].fetchUnreadMentions().messages.isEmpty)
        try await party.stop()
    }

    @Test func theCreateAndUpdatePayloadsCarryRolesAndParticipants() async throws {
        let party = try await party()
        let announcements = ConversationRolesChange(member: .init(canSend: false))
        let group = try await party["alice"].createGroup(
            name: "News", participants: ["bob", "carol"], roles: announcements)
        #expect(group.participants?.map(\.uid) == ["alice", "bob", "carol"])
        #expect(group.roles.member.canSend == false && group.roles.owner.canSend)
        try await party.fence()
        for uid in ["alice", "bob", "carol"] {
            let created = party.observed(by: uid).first { $0.name == .conversationCreate }
            guard case .conversationCreated(let payload)? = created?.payload else {
                Issue.record("\(uid) got no conversation.create")
                continue
            }
            #expect(payload.roles == group.roles && payload.participants == group.participants, "\(uid)")
        }
        #expect(party.observed(by: "dave").isEmpty)
        party.mark()
        let updated = try await party["alice"].updateConversation(group.id, roles: .init(member: .init(canSend: true)))
        try await party.fence()
        expectObserved(party, [.conversationUpdated(updated)])
        #expect(updated.roles == .defaults && updated.participants == nil)
        try await party.stop()
    }

    // MARK: Who may not

    /// Every role that must be refused is, with the documented code: docs/PROTOCOL.md, "Who may do what".
    @Test func everyRoleThatMayNotIsRefused() async throws {
        let party = try await party()
        let (group, bobs) = try await team(party)
        try await party["alice"].setRole(.admin, of: "carol", in: group.id)
        let alices = try await party["alice"].sendTextMessage("owner's", to: .conversation(group.id))
        let open = try await party["alice"].createGroup(name: "Open", isPublic: true)
        let openMessage = try await party["alice"].sendTextMessage("public", to: .conversation(open.id))

        func code(_ action: () async throws -> Any) async -> ErrorCode? {
            do {
                _ = try await action()
                return nil
            } catch let error as ParleyError {
                return error.code
            } catch {
                return .internalError
            }
        }
        // Editing others' messages: nobody by default (member, admin, owner).
        #expect(await code { try await party["alice"].editTextMessage(bobs.id, in: group.id, text: "x") } == .forbidden)
        #expect(await code { try await party["carol"].editTextMessage(bobs.id, in: group.id, text: "x") } == .forbidden)
        #expect(await code { try await party["bob"].editTextMessage(alices.id, in: group.id, text: "x") } == .forbidden)
        // Deleting others' messages: not a member.
        #expect(await code { try await party["bob"].deleteMessage(alices.id, in: group.id) } == .forbidden)
        // Outsiders: the conversation is not there for them; in a public group, they must join first.
        #expect(
            await code { try await party["dave"].editTextMessage(bobs.id, in: group.id, text: "x") }
                == .conversationNotFound)
        #expect(await code { try await party["dave"].deleteMessage(bobs.id, in: group.id) } == .conversationNotFound)
        #expect(
            await code { try await party["dave"].addReaction("👍", to: .id(bobs.id), in: group.id) }
                == .conversationNotFound)
        #expect(await code { try await party["dave"].fetchMessage(bobs.id, in: group.id) } == .conversationNotFound)
        #expect(await code { try await party["dave"].fetchReplies(to: bobs.id, in: group.id) } == .conversationNotFound)
        #expect(
            await code { try await party["dave"].addReaction("👍", to: .id(openMessage.id), in: open.id) }
                == .notAParticipant
        )
        // Changing roles: only the owner; sending where the role may not.
        #expect(
            await code {
                try await party["carol"].updateConversation(group.id, roles: .init(member: .init(canSend: false)))
            }
                == .forbidden
        )
        try await party["alice"].updateConversation(group.id, roles: .init(member: .init(canSend: false)))
        #expect(await code { try await party["bob"].sendTextMessage("x", to: .conversation(group.id)) } == .forbidden)
        #expect(await code { try await party["bob"].editTextMessage(bobs.id, in: group.id, text: "x") } == .forbidden)
        // Still allowed: deleting one's own message, reacting.
        #expect(await code { try await party["bob"].addReaction("👍", to: .id(alices.id), in: group.id) } == nil)
        #expect(await code { try await party["bob"].deleteMessage(bobs.id, in: group.id) } == nil)
        // Unknown messages, invalid keys, deleted messages.
        #expect(await code { try await party["bob"].deleteMessage("m_nope", in: group.id) } == .messageNotFound)
        #expect(
            await code { try await party["bob"].addReaction("two words", to: .id(alices.id), in: group.id) }
                == .invalidArgument)
        #expect(
            await code { try await party["carol"].addReaction("👍", to: .id(bobs.id), in: group.id) } == .messageDeleted)
        #expect(
            await code { try await party["alice"].editTextMessage(bobs.id, in: group.id, text: "x") } == .messageDeleted
        )
        try await party.stop()
    }

    // MARK: The outbox

    /// Offline, the app sends a message, edits it, reacts to it and deletes another: once the server is back, each
    /// goes once, in order, the later ones reaching the message sent first.
    @Test func changesQueuedOfflineGoOnceInOrderAfterTheirMessage() async throws {
        let server = try await TestServer.start(port: RestartablePort.take())
        let resume = ResumeTests()
        let alice = try await resume.member("alice", on: server)
        let bob = try await resume.member("bob", on: server)
        let group = try await alice.client.createGroup(name: "Team", participants: ["bob"])
        let earlier = try await alice.client.sendTextMessage("to delete", to: .conversation(group.id))
        await alice.client.disconnect()
        let port = server.port
        try await server.stop()

        let updates = alice.client.outboxUpdates()
        let queued = try alice.client.queueMessage(parts: [.text("helo")], to: .conversation(group.id))
        let ref = MessageRef.queued(clientMessageId: queued.clientMessageId)
        let changes = [
            try alice.client.queueChange(.edit(ref), in: group.id, parts: [.text("hello @bob")], mentions: ["bob"]),
            try alice.client.queueChange(.react(ref, key: "👋", add: true), in: group.id),
            try alice.client.queueChange(.delete(.id(earlier.id)), in: group.id),
        ]
        #expect(alice.client.outgoingMessages().count == 4)

        let restarted = try await TestServer.start(dataDirectory: server.dataDirectory, port: port)
        try await alice.client.connect()
        var done: [String] = []
        for await update in updates where update.state != .pending {
            done.append(update.clientMessageId)
            if done.count == 4 { break }
        }
        #expect(done == [queued.clientMessageId] + changes.map(\.clientMessageId))
        #expect(alice.client.outgoingMessages().isEmpty)
        let history = try await bob.client.fetchMessages(conversationId: group.id).messages
        #expect(history.map(\.isDeleted) == [true, false])
        #expect(history.last?.text == "hello @bob" && history.last?.mentions == ["bob"])
        #expect(history.last?.reactions == [ReactionSummary(key: "👋", count: 1, reacted: false)])
        let events = try await bob.client.fetchMessages(conversationId: group.id)
        #expect(events.lastSeq == group.lastSeq + 5)  // "to delete", then the message, its edit, reaction, the delete
        for member in [alice, bob] { await member.client.shutdown() }
        try await restarted.stop()
    }

    // MARK: Resume and the message list

    /// A client away while messages were edited, deleted and reacted to catches up to the server's state: its
    /// ``MessageList`` equals what the server reads for it.
    @Test func aClientAwayWhileMessagesChangedCatchesUpToTheSameState() async throws {
        let server = try await TestServer.start()
        let resume = ResumeTests()
        let alice = try await resume.member("alice", on: server)
        let bob = try await resume.member("bob", on: server)
        let group = try await alice.client.createGroup(name: "Team", participants: ["bob"])
        var sent: [Message] = []
        for index in 0..<4 {
            sent.append(try await alice.client.sendTextMessage("m\(index)", to: .conversation(group.id)))
        }
        let list = try await bob.client.messageList(conversationId: group.id)
        #expect(list.messages.map(\.text) == ["m0", "m1", "m2", "m3"])

        await bob.client.disconnect()
        _ = try await alice.client.editTextMessage(sent[0].id, in: group.id, text: "m0 edited")
        _ = try await alice.client.deleteMessage(sent[1].id, in: group.id)
        _ = try await alice.client.addReaction("🎉", to: .id(sent[2].id), in: group.id)
        _ = try await alice.client.sendTextMessage("reply", to: .conversation(group.id), replyTo: sent[3].id)
        _ = try await alice.client.addReaction("👍", to: .id(sent[3].id), in: group.id)
        _ = try await alice.client.removeReaction("👍", from: .id(sent[3].id), in: group.id)
        let fence = try await alice.client.sendTextMessage("fence", to: .conversation(group.id))

        try await bob.client.connect()
        let caughtUp = try await Self.settled(list, through: fence.id)
        let serverView = try await bob.client.fetchMessages(conversationId: group.id).messages
        #expect(caughtUp == serverView)
        #expect(caughtUp.map(\.text) == ["m0 edited", "", "m2", "m3", "reply", "fence"])
        #expect(caughtUp[1].isDeleted && caughtUp[3].replyCount == 1 && caughtUp[3].reactions == nil)
        #expect(caughtUp[2].reactions == [ReactionSummary(key: "🎉", count: 1, reacted: false)])
        list.close()
        for member in [alice, bob] { await member.client.shutdown() }
        try await server.stop()
    }

    /// Two lists, of two users, follow the same changes live; a thread list follows its thread; each ends equal to
    /// what the server reads for its user.
    @Test func messageListsFollowLiveChanges() async throws {
        let party = try await party()
        let (group, message) = try await team(party)
        let bobs = try await party["bob"].messageList(conversationId: group.id)
        let carols = try await party["carol"].messageList(conversationId: group.id)
        let thread = try await party["carol"].messageList(conversationId: group.id, thread: message.id)
        #expect(bobs.messages == [message] && thread.messages.isEmpty && thread.parent?.id == message.id)

        let reply = try await party["carol"].sendTextMessage("r1", to: .conversation(group.id), replyTo: message.id)
        _ = try await party["alice"].sendTextMessage("r2", to: .conversation(group.id), replyTo: message.id)
        _ = try await party["bob"].addReaction("❤️", to: .id(message.id), in: group.id)
        _ = try await party["carol"].addReaction("❤️", to: .id(message.id), in: group.id)
        _ = try await party["carol"].editTextMessage(reply.id, in: group.id, text: "r1 edited")
        _ = try await party["alice"].deleteMessage(reply.id, in: group.id)
        let fence = try await party["alice"].sendTextMessage("fence", to: .conversation(group.id))

        for (uid, list) in [("bob", bobs), ("carol", carols)] {
            let messages = try await Self.settled(list, through: fence.id)
            #expect(messages == (try await party[uid].fetchMessages(conversationId: group.id).messages), "\(uid)")
        }
        let serverThread = try await party["carol"].fetchReplies(to: message.id, in: group.id)
        #expect(try await Self.settled(thread) { $0.count == 2 && $0[0].isDeleted } == serverThread.messages)
        #expect(thread.parent == serverThread.parent)
        #expect(bobs.messages.first?.reactions == [ReactionSummary(key: "❤️", count: 2, reacted: true)])
        #expect(bobs.messages.first?.replyCount == 1)
        for list in [bobs, carols, thread] { list.close() }
        try await party.stop()
    }

    /// The list's messages once its last one is `id`.
    static func settled(_ list: MessageList, through id: String) async throws -> [Message] {
        try await settled(list) { $0.last?.id == id }
    }

    /// The list's messages once `done` holds for them (the suite's time limit bounds the wait).
    static func settled(_ list: MessageList, until done: @escaping ([Message]) -> Bool) async throws -> [Message] {
        for await messages in list.updates() where done(messages) { return messages }
        throw CancellationError()
    }
}
