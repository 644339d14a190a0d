import Foundation
import ParleyProtocol
import ParleyStore
import Testing

/// Deleting a user on every backend: docs/PROTOCOL.md, "Deleting a user".
extension StoreConformanceTests {
    func removeDeleted(_ uid: String, from conversationId: String = "c_g", at now: Int64 = 70) -> Command {
        .removeDeletedUser(.init(appId: Self.appId, conversationId: conversationId, uid: uid, now: now))
    }

    func serverDelete(_ message: Message, erasing: Bool, at now: Int64 = 80) -> Command {
        .deleteMessage(
            .init(
                appId: Self.appId, conversationId: message.conversationId, actor: nil, messageId: message.id, now: now,
                erasesSender: erasing
            )
        )
    }

    @Test(arguments: Backend.allCases) func aDeletedOwnersGroupPassesToTheLongestStandingAdminElseMember(
        _ backend: Backend
    ) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol", "dave"])  // alice owns; all joined at 10
        let makeAdmin = Command.updateParticipant(
            .init(appId: Self.appId, conversationId: "c_g", actor: "alice", uid: "carol", role: .admin, now: 20))
        _ = try await apply(store, makeAdmin)
        let removed = try await apply(store, removeDeleted("alice"))
        #expect(removed.events.map(\.event.name) == [.participantRemoved, .participantUpdated])
        #expect(removed.events.allSatisfy { $0.event.context.createdBy == nil })
        guard case .participantUpdated(let heir) = removed.events.last?.event.payload else {
            throw StoreTestError.noMessage
        }
        #expect(heir.uid == "carol" && heir.role == .owner)
        #expect(Set(removed.recipients) == ["alice", "bob", "carol", "dave"])
        #expect(
            Set(try await store.participants(appId: Self.appId, conversationId: "c_g").map(\.uid)) == [
                "bob", "carol", "dave",
            ])
        // A repeat: they are not a participant.
        #expect(try await refusal(store, removeDeleted("alice")) == .uidNotFound)
        // No admin: the longest-standing member; nobody left: the group is deleted.
        _ = try await group(store, id: "c_h", owner: "bob", members: ["dave"])
        let next = try await apply(store, removeDeleted("bob", from: "c_h"))
        #expect(
            next.events.last.map { $0.event.payload }
                == .participantUpdated(
                    try #require(try await store.participants(appId: Self.appId, conversationId: "c_h").first)))
        let last = try await apply(store, removeDeleted("dave", from: "c_h"))
        #expect(last.events.map(\.event.name) == [.participantRemoved, .conversationDelete])
        #expect(try await store.conversation(appId: Self.appId, id: "c_h", viewer: "dave")?.0.deletedAt != nil)
    }

    @Test(arguments: Backend.allCases) func aDirectConversationOfADeletedUserRefusesSends(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await apply(store, direct(store, "alice", with: "bob"))
        _ = try await message(store, "c_d", from: "alice", text: "hi")
        _ = try await apply(store, removeDeleted("alice", from: "c_d"))
        #expect(try await refusal(store, send(store, "c_d", from: "bob")) == .forbidden)
        #expect(try await history(store, "c_d", viewer: "bob").map(\.text) == ["hi"])
    }

    @Test(arguments: Backend.allCases) func erasingAMessageTakesTheSendersNameOffItAndItsEvents(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])
        let first = try await message(store, from: "alice", text: "secret plan", clientId: "c-1")
        _ = try await apply(store, edit(first, by: "alice", text: "secret plan v2"))
        let second = try await message(store, from: "alice", text: "tombstone me")
        // A tombstone keeps the sender; erasing later takes it off too.
        let tombstoned = try await apply(store, serverDelete(second, erasing: false))
        guard case .message(let kept, false) = tombstoned.outcome else { throw StoreTestError.noMessage }
        #expect(kept.sender == "alice" && kept.isDeleted && kept.deletedBy == nil)
        #expect(try await apply(store, serverDelete(second, erasing: false)).events.isEmpty)
        for target in [first, second] {
            let erased = try await apply(store, serverDelete(target, erasing: true))
            guard case .message(let tombstone, false) = erased.outcome else { throw StoreTestError.noMessage }
            #expect(tombstone.sender == "" && tombstone.clientMessageId == nil && tombstone.parts.isEmpty)
            #expect(erased.events.map(\.event.name) == [.messageDelete])
            // Again: nothing left to erase.
            #expect(try await apply(store, serverDelete(target, erasing: true)).events.isEmpty)
        }
        let bodies = try await storedBodies(store).joined(separator: "\n")
        #expect(!bodies.contains("secret plan") && !bodies.contains("tombstone me"))
        #expect(!bodies.contains(#""createdBy":"alice""#) || bodies.contains("conversation.create"))
        let messages = try await history(store, viewer: "bob")
        #expect(messages.map(\.sender) == ["", ""] && messages.allSatisfy(\.isDeleted))
        // The export finds no message of hers any more; her client message id is free.
        let export = try await store.exportMessages(appId: Self.appId, uid: "alice", after: nil, limit: 10, scan: 100)
        #expect(export.messages.isEmpty)
        let again = try await message(store, from: "alice", text: "new", clientId: "c-1")
        #expect(again.id != first.id)
    }

    @Test(arguments: Backend.allCases) func aPurgeLeavesNothingOfTheUser(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])
        let bobs = try await message(store, from: "bob", text: "look")
        let carols = try await message(store, from: "carol", text: "@bob see", mentions: ["bob"])
        _ = try await apply(store, react(carols, "👍", by: "bob"))
        _ = try await apply(store, setRoles(store, ConversationRolesChange(member: .init(canPinMessages: true))))
        _ = try await apply(store, pin(carols, by: "bob"))
        _ = try await store.block(appId: Self.appId, blocker: "bob", blocked: "carol", now: 30)
        _ = try await store.block(appId: Self.appId, blocker: "carol", blocked: "bob", now: 30)
        _ = try await store.insertReport(
            appId: Self.appId,
            Report(id: "r_1", reporter: "carol", uid: "bob", reason: .spam, state: .open, createdAt: 30))
        _ = try await store.putDevice(
            appId: Self.appId, uid: "bob",
            Device(
                deviceId: "phone", platform: .apns, token: "ab", environment: .production, createdAt: 1, updatedAt: 1))
        // Still a participant: nothing is done.
        #expect(try await store.purgeUser(appId: Self.appId, uid: "bob", now: 90) == .stillParticipates)
        #expect(try await store.user(appId: Self.appId, uid: "bob") != nil)
        _ = try await apply(store, removeDeleted("bob"))
        _ = try await apply(store, serverDelete(bobs, erasing: false))
        guard case .purged(let user) = try await store.purgeUser(appId: Self.appId, uid: "bob", now: 90) else {
            throw StoreTestError.noMessage
        }
        #expect(user.uid == "bob")
        #expect(try await store.purgeUser(appId: Self.appId, uid: "bob", now: 91) == .notFound)
        #expect(try await store.user(appId: Self.appId, uid: "bob") == nil)
        #expect(try await store.devices(appId: Self.appId, uid: "bob").isEmpty)
        #expect(try await store.blocks(appId: Self.appId, uid: "carol").isEmpty)
        #expect(try await store.reports(appId: Self.appId, state: nil, after: nil, limit: 10).isEmpty)
        #expect(try await store.memberships(appId: Self.appId, uid: "bob").isEmpty)
        #expect(
            try await store.exportMessages(appId: Self.appId, uid: "bob", after: nil, limit: 10, scan: 100)
                .messages.isEmpty)
        let found = try await store.searchUsers(
            UserSearchRequest(appId: Self.appId, prefixes: ["bob"], viewer: nil, visibility: .everyone, limit: 10))
        #expect(found.users.isEmpty)
        // A new user may take the uid: nothing of the old one comes back.
        try await store.insertUser(appId: Self.appId, User(uid: "bob", name: "Bob 2", createdAt: 95, updatedAt: 95))
        #expect(try await store.memberships(appId: Self.appId, uid: "bob").isEmpty)
        #expect(try await store.unread(appId: Self.appId, uid: "bob", conversationIds: nil).total == 0)
        #expect(try await store.unreadMentions(appId: Self.appId, uid: "bob", after: nil, limit: 10).isEmpty)
        #expect(try await history(store, viewer: "carol").last?.reactions == nil)
        // The pin bob made stays, as the app's.
        #expect(try await pins(store, viewer: "carol").messages.map(\.pin?.pinnedBy) == [nil])
    }
}
