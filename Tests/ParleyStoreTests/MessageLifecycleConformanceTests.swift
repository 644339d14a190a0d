import Foundation
import ParleyProtocol
import ParleyStore
import Testing

struct StoreTestError: Error {
    static let noMessage = StoreTestError()
}

/// Edits, deletions, reactions, replies, mentions and roles, on every backend: the rules of docs/PROTOCOL.md ("Who may
/// do what", "The message lifecycle") as the stores apply them.
extension StoreConformanceTests {
    // MARK: Helpers

    /// Stores a message and returns it.
    func message(
        _ store: any ParleyStore, _ conversationId: String = "c_g", from sender: String, text: String = "hi",
        replyTo: String? = nil, mentions: [String]? = nil, clientId: String? = nil, push: Bool = false,
        at now: Int64 = 20
    ) async throws -> Message {
        let command = Command.sendMessage(
            .init(
                appId: Self.appId, conversationId: conversationId, sender: sender,
                messageId: "m_\(UUID().uuidString.prefix(8))", clientMessageId: clientId, parts: [.text(text)],
                metadata: nil, alert: nil, replyTo: replyTo, mentions: mentions, now: now, queuesPush: push
            )
        )
        guard case .message(let message, _) = try await apply(store, command).outcome else {
            throw StoreTestError.noMessage
        }
        return message
    }

    func edit(
        _ message: Message, by actor: String, text: String, metadata: JSONValue? = nil, mentions: [String]? = nil,
        at now: Int64 = 30
    ) -> Command {
        .editMessage(
            .init(
                appId: Self.appId, conversationId: message.conversationId, actor: actor, messageId: message.id,
                parts: [.text(text)], metadata: metadata, mentions: mentions, now: now
            )
        )
    }

    func delete(_ message: Message, by actor: String, at now: Int64 = 40) -> Command {
        .deleteMessage(
            .init(
                appId: Self.appId, conversationId: message.conversationId, actor: actor, messageId: message.id, now: now
            )
        )
    }

    func react(_ message: Message, _ key: String, by actor: String, add: Bool = true, at now: Int64 = 50) -> Command {
        .react(
            .init(
                appId: Self.appId, conversationId: message.conversationId, actor: actor, messageId: message.id,
                key: key,
                add: add, now: now
            )
        )
    }

    func history(
        _ store: any ParleyStore, _ conversationId: String = "c_g", viewer: String = "alice", thread: String? = nil
    )
        async throws -> [Message]
    {
        try await store.messages(
            appId: Self.appId, conversationId: conversationId,
            query: HistoryQuery(limit: 100, viewer: viewer, thread: thread)
        ).messages.reversed()
    }

    /// The stored bodies of every event of the conversation, as text.
    func storedBodies(_ store: any ParleyStore, _ conversationId: String = "c_g") async throws -> [String] {
        try await store.events(appId: Self.appId, conversationId: conversationId, afterSeq: 0, limit: 1000)
            .map { String(decoding: $0.json, as: UTF8.self) }
    }

    func setRoles(_ store: any ParleyStore, _ change: ConversationRolesChange, by actor: String = "alice") -> Command {
        .updateConversation(
            .init(
                appId: Self.appId, conversationId: "c_g", actor: actor,
                update: UpdateConversationRequest(roles: change),
                now: 15
            )
        )
    }

    // MARK: Edits

    @Test(arguments: Backend.allCases) func anEditReplacesTheContentEverywhereAndKeepsNoEarlierVersion(
        _ backend: Backend
    ) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])  // seq 1-4
        let original = try await message(store, from: "bob", text: "first draft")  // 5
        let edited = try await apply(store, edit(original, by: "bob", text: "second draft", metadata: ["v": 2]))
        #expect(edited.events.map(\.event.name) == [.messageUpdate])
        #expect(edited.events.map(\.event.seq) == [6])
        #expect(Set(edited.recipients) == ["alice", "bob", "carol"])
        guard case .message(let second, false) = edited.outcome else { throw StoreTestError.noMessage }
        #expect(second.text == "second draft" && second.metadata == ["v": 2] && second.editedAt == 30)
        #expect(second.id == original.id && second.seq == original.seq && second.sentAt == original.sentAt)
        #expect(edited.events.first?.event.payload == .messageUpdated(second))

        // A repeat changes nothing; a second edit rewrites the first one's event too.
        let repeated = try await apply(store, edit(original, by: "bob", text: "second draft"))
        #expect(repeated.events.isEmpty)
        guard case .message(_, true) = repeated.outcome else { throw StoreTestError.noMessage }
        _ = try await apply(store, edit(original, by: "bob", text: "final", at: 35))  // 7
        #expect(try await history(store).map(\.text) == ["final"])
        #expect(try await history(store).first?.editedAt == 35)
        let bodies = try await storedBodies(store)
        #expect(bodies.count == 7)
        #expect(!bodies.contains { $0.contains("draft") }, "an earlier version is kept in \(bodies)")
        let replayed = try await store.events(appId: Self.appId, conversationId: "c_g", afterSeq: 4, limit: 10)
        #expect(replayed.map { $0.event.payload.message?.text } == ["final", "final", "final"])
        #expect(replayed.map(\.event.name) == [.messageSent, .messageUpdate, .messageUpdate])
        // An edit does not move the conversation up the lists.
        #expect(
            try await store.conversations(appId: Self.appId, uid: "bob", query: .init(limit: 5)).first?.lastActivityAt
                == 20)
    }

    @Test(arguments: Backend.allCases) func onlyTheSenderEditsUnlessTheRolesSayOtherwise(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])
        _ = try await apply(
            store,
            .updateParticipant(
                .init(appId: Self.appId, conversationId: "c_g", actor: "alice", uid: "carol", role: .admin, now: 11)))
        let bobs = try await message(store, from: "bob", text: "bob's")
        // Nobody edits others' messages by default: not the owner, not an admin, not a member.
        for actor in ["alice", "carol"] {
            #expect(try await refusal(store, edit(bobs, by: actor, text: "x")) == .forbidden, "\(actor)")
        }
        let alices = try await message(store, from: "alice")
        #expect(try await refusal(store, edit(alices, by: "bob", text: "x")) == .forbidden)
        // Outsiders do not see the conversation; a message of another conversation is not found here.
        #expect(try await refusal(store, edit(bobs, by: "dave", text: "x")) == .conversationNotFound)
        _ = try await apply(
            store,
            .createConversation(
                .init(appId: Self.appId, newId: "c_other", type: .group, creator: "bob", participants: [], now: 12)))
        let elsewhere = try await message(store, "c_other", from: "bob")
        var moved = elsewhere
        moved.conversationId = "c_g"
        #expect(try await refusal(store, edit(moved, by: "bob", text: "x")) == .messageNotFound)
        // The owner lets admins edit others' messages: carol may, bob (member) still may not.
        #expect(
            try await refusal(store, setRoles(store, .init(admin: .init(canEditOthersMessages: true)), by: "carol"))
                == .forbidden)
        _ = try await apply(store, setRoles(store, .init(admin: .init(canEditOthersMessages: true))))
        #expect(try await refusal(store, edit(bobs, by: "carol", text: "moderated")) == nil)
        #expect(try await refusal(store, edit(alices, by: "bob", text: "x")) == .forbidden)
        // A role that may not send may not edit its own messages either.
        _ = try await apply(store, setRoles(store, .init(member: .init(canSend: false))))
        #expect(try await refusal(store, edit(bobs, by: "bob", text: "mine")) == .forbidden)
        #expect(try await history(store).first { $0.id == bobs.id }?.text == "moderated")
    }

    // MARK: Deletions

    @Test(arguments: Backend.allCases) func aDeletionLeavesATombstoneAndDropsWhatHungOnIt(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])  // 1-4
        let secret = try await message(store, from: "bob", text: "a secret", mentions: ["carol"], push: true)  // 5
        _ = try await apply(store, edit(secret, by: "bob", text: "a secret, edited"))  // 6
        _ = try await apply(store, react(secret, "👍", by: "alice"))  // 7
        #expect(try await store.unread(appId: Self.appId, uid: "carol", conversationIds: nil).total == 1)
        #expect(try await store.unreadMentions(appId: Self.appId, uid: "carol", after: nil, limit: 10).count == 1)
        let entry = try #require(try await store.pushOutbox(limit: 10).first)
        #expect(entry.seq == secret.seq)

        // A member does not delete others' messages; the owner (and admins) may, and the sender may.
        #expect(try await refusal(store, delete(secret, by: "carol")) == .forbidden)
        let deleted = try await apply(store, delete(secret, by: "alice"))  // 8
        #expect(deleted.events.map(\.event.name) == [.messageDelete])
        guard case .message(let tombstone, false) = deleted.outcome else { throw StoreTestError.noMessage }
        #expect(tombstone.parts.isEmpty && tombstone.metadata == nil && tombstone.mentions == nil)
        #expect(tombstone.deletedAt == 40 && tombstone.deletedBy == "alice" && tombstone.seq == secret.seq)
        #expect(tombstone.sender == "bob" && tombstone.sentAt == secret.sentAt)
        #expect(deleted.events.first?.event.payload == .messageDeleted(tombstone))

        // The content is gone from every stored event; the positions stay gap-free.
        let bodies = try await storedBodies(store)
        #expect(bodies.count == 8)
        #expect(!bodies.contains { $0.contains("secret") }, "content left in \(bodies)")
        let shown = try #require(try await history(store).first)
        #expect(shown.isDeleted && shown.parts.isEmpty && shown.reactions == nil)
        // Unread counts, mentions, reactions and pending pushes go with it.
        #expect(try await store.unread(appId: Self.appId, uid: "carol", conversationIds: nil).total == 0)
        #expect(try await store.unreadMentions(appId: Self.appId, uid: "carol", after: nil, limit: 10).isEmpty)
        #expect(try await store.pushOutbox(limit: 10).isEmpty)

        // Deleting again changes nothing; a deleted message is not edited, reacted to or replied to.
        let again = try await apply(store, delete(secret, by: "bob"))
        #expect(again.events.isEmpty)
        #expect(try await refusal(store, edit(secret, by: "bob", text: "back")) == .messageDeleted)
        #expect(try await refusal(store, react(secret, "❤️", by: "carol")) == .messageDeleted)
        await #expect(throws: DomainError.self) { try await self.message(store, from: "carol", replyTo: secret.id) }
        #expect(try await refusal(store, send(store, "c_g", from: "carol")) == nil)
        #expect(try await store.unread(appId: Self.appId, uid: "bob", conversationIds: nil).total == 1)
    }

    @Test(arguments: Backend.allCases) func aDeletedMessagesQueuedPushesAreDropped(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])
        let kept = try await message(store, from: "alice", text: "kept", push: true)
        let gone = try await message(store, from: "alice", text: "gone", push: true)
        let entries = try await store.pushOutbox(limit: 10)
        let jobs = [
            PushExpansion(entryId: entries[0].id, jobs: [job(1)]),
            PushExpansion(entryId: entries[1].id, jobs: [job(2)]),
        ]
        var expanded = jobs
        expanded[0].jobs[0].collapseId = kept.id
        expanded[1].jobs[0].collapseId = gone.id
        #expect(try await store.expandPushOutbox(expanded) == 2)
        _ = try await apply(store, delete(gone, by: "alice"))
        let due = try await store.claimPushJobs(owner: "n", now: 1000, leaseUntil: 2000, limit: 10)
        #expect(due.map(\.collapseId) == [kept.id])
    }

    // MARK: Reactions

    @Test(arguments: Backend.allCases) func reactionsCountPerKeyAndChangeOncePerParticipant(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])
        let target = try await message(store, from: "alice")  // 5
        let added = try await apply(store, react(target, "👍", by: "bob"))  // 6
        #expect(
            added.events.map(\.event.payload) == [
                .reactionAdded(MessageReaction(messageId: target.id, messageSeq: 5, key: "👍", uid: "bob", count: 1))
            ])
        guard case .reactions(let list, false) = added.outcome else { throw StoreTestError.noMessage }
        #expect(
            list == ReactionList(messageId: target.id, reactions: [ReactionSummary(key: "👍", count: 1, reacted: true)]))
        // Adding again (a retry after a lost answer) changes nothing.
        let repeated = try await apply(store, react(target, "👍", by: "bob"))
        #expect(repeated.events.isEmpty)
        guard case .reactions(list, true) = repeated.outcome else { throw StoreTestError.noMessage }
        _ = try await apply(store, react(target, "👍", by: "carol", at: 51))  // 7
        _ = try await apply(store, react(target, "party", by: "bob", at: 52))  // 8
        #expect(
            try await history(store, viewer: "bob").last?.reactions == [
                ReactionSummary(key: "👍", count: 2, reacted: true),
                ReactionSummary(key: "party", count: 1, reacted: true),
            ])
        #expect(
            try await history(store, viewer: "alice").last?.reactions == [
                ReactionSummary(key: "👍", count: 2, reacted: false),
                ReactionSummary(key: "party", count: 1, reacted: false),
            ])
        let removed = try await apply(store, react(target, "👍", by: "bob", add: false))  // 9
        #expect(
            removed.events.map(\.event.payload) == [
                .reactionRemoved(MessageReaction(messageId: target.id, messageSeq: 5, key: "👍", uid: "bob", count: 1))
            ])
        #expect(try await apply(store, react(target, "👍", by: "bob", add: false)).events.isEmpty)
        #expect(try await apply(store, react(target, "never", by: "bob", add: false)).events.isEmpty)
        #expect(try await history(store, viewer: "bob").last?.reactions?.map(\.reacted) == [false, true])
        #expect(try await refusal(store, react(target, "👍", by: "dave")) == .conversationNotFound)
        // A reaction is not a message: no unread, no activity.
        #expect(try await store.unread(appId: Self.appId, uid: "bob", conversationIds: nil).total == 1)
        #expect(
            try await store.events(appId: Self.appId, conversationId: "c_g", afterSeq: 0, limit: 100).last?.event.seq
                == 9)
    }

    /// A reaction's answer is decided from what the command read, not read again after it: at every step it must be
    /// what a read finds, also when the first to give a key takes it back (the key's place moves) and when the last
    /// does (the key goes).
    @Test(arguments: Backend.allCases) func aReactionsAnswerIsWhatAReadFindsAfterIt(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])
        let target = try await message(store, from: "alice")
        let steps: [(key: String, actor: String, add: Bool, at: Int64)] = [
            ("a", "bob", true, 51), ("b", "carol", true, 52), ("a", "carol", true, 53), ("c", "alice", true, 54),
            // bob gave "a" first: "a" is now first given at 53, after "b".
            ("a", "bob", false, 55), ("b", "carol", false, 56), ("a", "bob", true, 57), ("c", "alice", false, 58),
        ]
        for step in steps {
            let result = try await apply(store, react(target, step.key, by: step.actor, add: step.add, at: step.at))
            guard case .reactions(let list, false) = result.outcome else { throw StoreTestError.noMessage }
            let read = try await history(store, viewer: step.actor).last?.reactions ?? []
            #expect(list.reactions == read, "after \(step.actor) \(step.add ? "gave" : "took back") \(step.key)")
        }
        #expect(
            try await history(store, viewer: "bob").last?.reactions == [
                ReactionSummary(key: "a", count: 2, reacted: true)
            ])
        let before = try await history(store, viewer: "carol").last?.reactions
        _ = try await apply(store, react(target, "b", by: "bob", at: 59))
        #expect(
            try await history(store, viewer: "carol").last?.reactions
                == (before ?? []) + [ReactionSummary(key: "b", count: 1, reacted: false)])
    }

    @Test(arguments: Backend.allCases) func reactionsHaveLimits(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])
        let target = try await message(store, from: "alice")
        let perUser = MessageLifecycle.maxReactionKeysPerUser
        for index in 0..<perUser { _ = try await apply(store, react(target, "b\(index)", by: "bob")) }
        #expect(try await refusal(store, react(target, "one-more", by: "bob")) == .reactionLimit)
        for index in 0..<perUser { _ = try await apply(store, react(target, "c\(index)", by: "carol")) }
        let rest = MessageLifecycle.maxReactionKeysPerMessage - 2 * perUser
        for index in 0..<rest { _ = try await apply(store, react(target, "a\(index)", by: "alice")) }
        #expect(try await history(store).last?.reactions?.count == MessageLifecycle.maxReactionKeysPerMessage)
        // The message is full: no new key, but a key it has may still be given.
        #expect(try await refusal(store, react(target, "too-many", by: "alice")) == .reactionLimit)
        #expect(try await refusal(store, react(target, "b0", by: "alice")) == nil)
    }

    // MARK: Threads

    @Test(arguments: Backend.allCases) func repliesFormAThreadWithItsSummary(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])
        let parent = try await message(store, from: "alice", text: "question")
        var replies: [Message] = []
        for (index, sender) in ["bob", "carol", "bob"].enumerated() {
            replies.append(
                try await message(
                    store, from: sender, text: "answer \(index)", replyTo: parent.id, at: 100 + Int64(index)))
        }
        _ = try await message(store, from: "alice", text: "unrelated")
        #expect(replies.allSatisfy { $0.replyTo == parent.id })
        // A reply is a normal message: in the history, in unread counts.
        #expect(try await history(store).count == 5)
        #expect(try await store.unread(appId: Self.appId, uid: "carol", conversationIds: nil).total == 2)
        let summary = try #require(try await history(store).first)
        #expect(summary.replyCount == 3 && summary.lastReplyAt == 102)
        #expect(try await history(store, thread: parent.id).map(\.text) == ["answer 0", "answer 1", "answer 2"])

        // Pages of a thread, newest first, with the parent.
        let newest = try await store.messages(
            appId: Self.appId, conversationId: "c_g", query: HistoryQuery(limit: 2, viewer: "bob", thread: parent.id)
        )
        #expect(newest.messages.map(\.text) == ["answer 2", "answer 1"])
        #expect(newest.parent?.id == parent.id && newest.parent?.replyCount == 3)
        #expect(newest.lastSeq == 9)
        let older = try await store.messages(
            appId: Self.appId, conversationId: "c_g",
            query: HistoryQuery(beforeSeq: newest.messages.last!.seq, limit: 2, viewer: "bob", thread: parent.id)
        )
        #expect(older.messages.map(\.text) == ["answer 0"])

        // A deleted reply leaves the count; the time of the latest reply stays.
        _ = try await apply(store, delete(replies[2], by: "bob"))
        let after = try #require(try await history(store).first)
        #expect(after.replyCount == 2 && after.lastReplyAt == 102)
        // No replies to replies, nor to messages of other conversations, nor to unknown ones.
        await #expect(
            throws: DomainError(
                .badRequest, "Message \(replies[0].id) is a reply: reply to the first message of its thread.")
        ) {
            try await self.message(store, from: "alice", replyTo: replies[0].id)
        }
        await #expect(throws: DomainError.self) { try await self.message(store, from: "alice", replyTo: "m_unknown") }
        await #expect(throws: MessageLifecycle.notFound("m_unknown")) {
            _ = try await store.messages(
                appId: Self.appId, conversationId: "c_g", query: HistoryQuery(limit: 5, thread: "m_unknown"))
        }
    }

    @Test(arguments: Backend.allCases) func aReplyInTheSameBatchAsItsParentFindsIt(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])
        let parentCommand = send(store, "c_g", from: "alice", text: "parent")
        guard case .sendMessage(let parentSend) = parentCommand else { throw StoreTestError.noMessage }
        var reply = parentSend
        reply.messageId = "m_reply"
        reply.sender = "bob"
        reply.replyTo = parentSend.messageId
        var nested = parentSend
        nested.messageId = "m_nested"
        nested.replyTo = "m_reply"
        let results = try await store.apply([parentCommand, .sendMessage(reply), .sendMessage(nested)])
        #expect(results[1].failureCode == nil)
        #expect(results[2].failureCode == .badRequest)
        #expect(try await history(store, thread: parentSend.messageId).map(\.id) == ["m_reply"])
    }

    @Test(arguments: Backend.allCases) func aResentReplyIsTheMessageStoredBeforeItsParentWasDeleted(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])
        let parent = try await message(store, from: "alice")
        let reply = try await message(store, from: "bob", replyTo: parent.id, clientId: "r-1")
        _ = try await apply(store, delete(parent, by: "alice"))
        let resent = try await apply(
            store,
            .sendMessage(
                .init(
                    appId: Self.appId, conversationId: "c_g", sender: "bob", messageId: "m_new", clientMessageId: "r-1",
                    parts: [.text("hi")], metadata: nil, alert: nil, replyTo: parent.id, now: 60
                )
            )
        )
        guard case .message(let original, true) = resent.outcome else { throw StoreTestError.noMessage }
        #expect(original.id == reply.id && resent.events.isEmpty)
    }

    // MARK: Mentions

    @Test(arguments: Backend.allCases) func mentionsAreKeptForParticipantsAndListedUntilRead(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])
        let first = try await message(
            store, from: "alice", text: "@bob @dave", mentions: ["bob", "dave", "bob", "alice"], at: 21)
        #expect(first.mentions == ["bob"])  // dave is no participant; the sender, and repeats, are left out
        let none = try await message(store, from: "alice", mentions: ["dave"], at: 22)
        #expect(none.mentions == nil)
        let second = try await message(store, from: "carol", text: "@bob again", mentions: ["bob"], at: 23)
        let unread = try await store.unreadMentions(appId: Self.appId, uid: "bob", after: nil, limit: 10)
        #expect(unread.map(\.message.id) == [second.id, first.id])
        let page = try await store.unreadMentions(appId: Self.appId, uid: "bob", after: nil, limit: 1)
        #expect(
            try await store.unreadMentions(appId: Self.appId, uid: "bob", after: page[0].position, limit: 10).map(
                \.message.id) == [first.id])
        #expect(try await store.unreadMentions(appId: Self.appId, uid: "carol", after: nil, limit: 10).isEmpty)
        #expect(try await store.unreadMentions(appId: Self.otherApp, uid: "bob", after: nil, limit: 10).isEmpty)

        // Read past the first: only the second is left.
        _ = try await apply(
            store,
            .markReceipt(
                .init(
                    appId: Self.appId, conversationId: "c_g", uid: "bob", deliveredSeq: nil, readSeq: first.seq, now: 30
                )))
        #expect(
            try await store.unreadMentions(appId: Self.appId, uid: "bob", after: nil, limit: 10).map(\.message.id) == [
                second.id
            ])
        // An edit that mentions carol makes it hers; one that drops bob takes it from him.
        _ = try await apply(store, edit(second, by: "carol", text: "@alice now", mentions: ["alice"]))
        #expect(try await store.unreadMentions(appId: Self.appId, uid: "bob", after: nil, limit: 10).isEmpty)
        #expect(
            try await store.unreadMentions(appId: Self.appId, uid: "alice", after: nil, limit: 10).map(\.message.text)
                == ["@alice now"])
        // Leaving the conversation takes its mentions away.
        let third = try await message(store, from: "carol", mentions: ["bob"], at: 40)
        #expect(
            try await store.unreadMentions(appId: Self.appId, uid: "bob", after: nil, limit: 10).map(\.message.id) == [
                third.id
            ])
        _ = try await apply(store, remove("bob", by: "bob"))
        #expect(try await store.unreadMentions(appId: Self.appId, uid: "bob", after: nil, limit: 10).isEmpty)
    }

    // MARK: Roles

    @Test(arguments: Backend.allCases) func rolesAreSetAtCreationAndTravelInThePayloads(_ backend: Backend) async throws
    {
        let store = try await prepared(backend)
        let change = ConversationRolesChange(member: .init(canSend: false, canAddParticipants: true))
        let created = try await apply(
            store,
            .createConversation(
                .init(
                    appId: Self.appId, newId: "c_g", type: .group, creator: "alice", participants: ["bob", "carol"],
                    name: "Announcements", roles: change, now: 10)
            )
        )
        guard case .conversation(let conversation, true) = created.outcome else { throw StoreTestError.noMessage }
        var expected = ConversationRoles.defaults
        expected.member.canSend = false
        expected.member.canAddParticipants = true
        #expect(conversation.roles == expected)
        // The create payload lists the participants and carries the roles.
        guard case .conversationCreated(let payload) = created.events.first?.event.payload else {
            throw StoreTestError.noMessage
        }
        #expect(payload.roles == expected)
        #expect(payload.participants?.map(\.uid) == ["alice", "bob", "carol"])
        #expect(payload.participants?.map(\.role) == [.owner, .member, .member])
        // Read back, the roles are there; a member may not send, but may add members (not admins).
        #expect(
            try await store.conversation(appId: Self.appId, id: "c_g", viewer: "bob")?.0.conversation.roles == expected)
        #expect(try await refusal(store, send(store, "c_g", from: "bob")) == .forbidden)
        #expect(try await refusal(store, send(store, "c_g", from: "alice")) == nil)
        #expect(try await refusal(store, add("dave", by: "bob")) == nil)
        #expect(
            try await refusal(
                store,
                .addParticipants(
                    .init(
                        appId: Self.appId, conversationId: "c_g", actor: "carol",
                        entries: [.init(uid: "dave", role: .admin)], now: 12))
            ) == .forbidden)
        // Updated by the owner: the update payload carries them; an undelete's too.
        let updated = try await apply(store, setRoles(store, .init(member: .init(canSend: true))))
        guard case .conversationUpdated(let after) = updated.events.first?.event.payload else {
            throw StoreTestError.noMessage
        }
        #expect(after.roles.member.canSend && after.roles.member.canAddParticipants)
        #expect(try await refusal(store, send(store, "c_g", from: "bob")) == nil)
        _ = try await apply(store, .deleteConversation(action("c_g", by: "alice")))
        let restored = try await apply(store, .undeleteConversation(action("c_g", by: "alice")))
        guard case .conversationUndeleted(let back) = restored.events.first?.event.payload else {
            throw StoreTestError.noMessage
        }
        #expect(back.roles == after.roles)
        // Roles belong to groups.
        #expect(
            try await refusal(
                store,
                .createConversation(
                    .init(
                        appId: Self.appId, newId: "c_d", type: .direct, creator: "alice", participants: ["bob"],
                        roles: change, now: 13))
            ) == .badRequest)
    }

    @Test(arguments: Backend.allCases) func removalFollowsTheRolesButNeverTheOwner(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol", "dave"])
        _ = try await apply(
            store,
            .updateParticipant(
                .init(appId: Self.appId, conversationId: "c_g", actor: "alice", uid: "carol", role: .admin, now: 11)))
        // By default: a member removes nobody; an admin removes members, not admins; nobody removes the owner.
        #expect(try await refusal(store, remove("dave", by: "bob")) == .forbidden)
        #expect(try await refusal(store, remove("alice", by: "carol")) == .forbidden)
        _ = try await apply(
            store,
            setRoles(
                store, .init(admin: .init(canRemoveParticipants: false), member: .init(canRemoveParticipants: true))))
        #expect(try await refusal(store, remove("dave", by: "carol")) == .forbidden)
        #expect(try await refusal(store, remove("carol", by: "bob")) == .forbidden)
        #expect(try await refusal(store, remove("dave", by: "bob")) == nil)
        #expect(try await refusal(store, remove("carol", by: "alice")) == nil)
    }
}
