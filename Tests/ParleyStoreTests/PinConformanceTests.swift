import Foundation
import ParleyProtocol
import ParleyStore
import Testing

/// Pinned messages on every backend: docs/PROTOCOL.md, "Pinned messages".
extension StoreConformanceTests {
    func pin(
        _ message: Message, by actor: String?, pinned: Bool = true, at now: Int64 = 60, in conversationId: String? = nil
    ) -> Command {
        .pin(
            .init(
                appId: Self.appId, conversationId: conversationId ?? message.conversationId, actor: actor,
                messageId: message.id, pinned: pinned, now: now
            )
        )
    }

    func pins(_ store: any ParleyStore, _ conversationId: String = "c_g", viewer: String? = "alice") async throws
        -> MessageHistory
    {
        try await store.pinnedMessages(appId: Self.appId, conversationId: conversationId, viewer: viewer)
    }

    @Test(arguments: Backend.allCases) func pinsFollowTheRolesAndAreListedMostRecentFirst(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])  // seq 1-4
        let first = try await message(store, from: "bob", text: "first")  // 5
        let second = try await message(store, from: "carol", text: "second")  // 6
        // A member may not pin by default; an admin or the owner may.
        #expect(try await refusal(store, pin(first, by: "bob")) == .forbidden)
        let pinned = try await apply(store, pin(first, by: "alice", at: 61))  // 7
        let made = MessagePin(messageId: first.id, messageSeq: 5, pinnedBy: "alice", pinnedAt: 61)
        #expect(pinned.events.map(\.event.payload) == [.messagePinned(made)])
        #expect(pinned.events.map(\.event.seq) == [7])
        #expect(pinned.events.first?.event.context.createdBy == "alice")
        #expect(Set(pinned.recipients) == ["alice", "bob", "carol"])
        guard case .pin(made, let pinnedMessage, false) = pinned.outcome else { throw StoreTestError.noMessage }
        #expect(pinnedMessage.id == first.id)
        // Again: nothing changes, the first pin stays.
        let repeated = try await apply(store, pin(first, by: "alice", at: 62))
        #expect(repeated.events.isEmpty)
        guard case .pin(made, _, true) = repeated.outcome else { throw StoreTestError.noMessage }

        // The owner lets members pin.
        _ = try await apply(store, setRoles(store, ConversationRolesChange(member: .init(canPinMessages: true))))  // 8
        _ = try await apply(store, pin(second, by: "carol", at: 63))  // 9
        var list = try await pins(store)
        #expect(list.messages.map(\.id) == [second.id, first.id])
        #expect(list.messages.map(\.pin?.pinnedBy) == ["carol", "alice"])
        #expect(list.messages.first?.text == "second")
        #expect(list.lastSeq == 9)
        // History shows the pins too; events carry none.
        let read = try await history(store)
        #expect(read.first { $0.id == first.id }?.pin == made)
        #expect(
            try await store.message(appId: Self.appId, conversationId: "c_g", messageId: second.id, viewer: "bob")?
                .pin?.pinnedAt == 63)
        #expect(try await storedBodies(store).allSatisfy { !$0.contains("\"pin\":") })

        // An unpin carries the pin as it was; the app's server unpins and pins too (no pinnedBy).
        let unpinned = try await apply(store, pin(first, by: "bob", pinned: false, at: 64))  // 10
        #expect(unpinned.events.map(\.event.payload) == [.messageUnpinned(made)])
        #expect(try await apply(store, pin(first, by: "bob", pinned: false)).events.isEmpty)
        let byApp = try await apply(store, pin(first, by: nil, at: 65))  // 11
        #expect(
            byApp.events.map(\.event.payload) == [
                .messagePinned(MessagePin(messageId: first.id, messageSeq: 5, pinnedBy: nil, pinnedAt: 65))
            ])
        #expect(byApp.events.first?.event.context.createdBy == nil)
        list = try await pins(store)
        #expect(list.messages.map(\.id) == [first.id, second.id])
        #expect(list.messages.first?.pin?.pinnedBy == nil)

        // A pin is not a message: no unread, no activity; it takes a sequence number like any durable event.
        #expect(try await store.unread(appId: Self.appId, uid: "bob", conversationIds: nil).total == 1)
        let events = try await store.events(appId: Self.appId, conversationId: "c_g", afterSeq: 6, limit: 100)
        #expect(
            events.map(\.event.name) == [
                .messagePinned, .conversationUpdate, .messagePinned, .messageUnpinned, .messagePinned,
            ])
    }

    @Test(arguments: Backend.allCases) func aPinGoesWithItsDeletedMessageAndEditsShowInTheList(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])
        let target = try await message(store, from: "bob", text: "the plan")
        _ = try await apply(store, pin(target, by: "alice"))
        _ = try await apply(store, edit(target, by: "bob", text: "the new plan"))
        #expect(try await pins(store).messages.map(\.text) == ["the new plan"])
        let deleted = try await apply(store, delete(target, by: "bob"))
        // The deletion is the only event: the pin goes with the message.
        #expect(deleted.events.map(\.event.name) == [.messageDelete])
        #expect(try await pins(store).messages.isEmpty)
        #expect(try await history(store).last?.pin == nil)
        #expect(try await refusal(store, pin(target, by: "alice")) == .messageDeleted)
        // Unpinning a deleted message changes nothing.
        #expect(try await apply(store, pin(target, by: "alice", pinned: false)).events.isEmpty)
    }

    @Test(arguments: Backend.allCases) func whoMayNotPinIsRefused(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])
        let target = try await message(store, from: "bob")
        // Not a participant, another app, an unknown message or conversation.
        #expect(try await refusal(store, pin(target, by: "dave")) == .conversationNotFound)
        let foreign = Command.pin(
            .init(
                appId: Self.otherApp, conversationId: "c_g", actor: "mallory", messageId: target.id, pinned: true,
                now: 60)
        )
        #expect(try await refusal(store, foreign) == .conversationNotFound)
        let serverOfOtherApp = Command.pin(
            .init(appId: Self.otherApp, conversationId: "c_g", actor: nil, messageId: target.id, pinned: true, now: 60)
        )
        #expect(try await refusal(store, serverOfOtherApp) == .conversationNotFound)
        let unknown = Command.pin(
            .init(appId: Self.appId, conversationId: "c_g", actor: "alice", messageId: "m_nope", pinned: true, now: 60)
        )
        #expect(try await refusal(store, unknown) == .messageNotFound)
        #expect(try await refusal(store, pin(target, by: "alice", in: "c_nope")) == .conversationNotFound)
        // A message of another conversation is not this one's.
        _ = try await group(store, id: "c_h", members: ["bob"])
        #expect(try await refusal(store, pin(target, by: "alice", in: "c_h")) == .messageNotFound)
        // A muted participant whose role may pin neither pins nor unpins.
        _ = try await apply(store, setRoles(store, ConversationRolesChange(member: .init(canPinMessages: true))))
        _ = try await apply(store, mute("bob", by: "alice"))
        #expect(try await refusal(store, pin(target, by: "bob")) == .muted)
        #expect(try await pins(store).messages.isEmpty)
        #expect(try await pins(store, "c_nope").messages.isEmpty)
    }

    @Test(arguments: Backend.allCases) func bothOfADirectConversationPinUnlessOneBlockedTheOther(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await apply(store, direct(store, "alice", with: "bob"))
        let target = try await message(store, "c_d", from: "alice", text: "address")
        _ = try await apply(store, pin(target, by: "bob"))
        #expect(try await pins(store, "c_d", viewer: "bob").messages.map(\.id) == [target.id])
        _ = try await store.block(appId: Self.appId, blocker: "alice", blocked: "bob", now: 70)
        #expect(try await refusal(store, pin(target, by: "bob", pinned: false)) == .blocked)
        #expect(try await refusal(store, pin(target, by: "alice", pinned: false)) == .blocked)
    }

    @Test(arguments: Backend.allCases) func aConversationHoldsAtMostFiftyPins(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])
        var messages: [Message] = []
        for index in 0...MessageLifecycle.maxPinsPerConversation {
            messages.append(try await message(store, from: "bob", text: "m\(index)"))
        }
        for (index, message) in messages.dropLast().enumerated() {
            _ = try await apply(store, pin(message, by: "alice", at: 100 + Int64(index)))
        }
        #expect(try await refusal(store, pin(messages.last!, by: "alice")) == .pinLimit)
        // Pinning one already pinned is still an answer, and unpinning one makes room.
        #expect(try await refusal(store, pin(messages[0], by: "alice")) == nil)
        _ = try await apply(store, pin(messages[0], by: "alice", pinned: false))
        #expect(try await refusal(store, pin(messages.last!, by: "alice", at: 200)) == nil)
        let list = try await pins(store)
        #expect(list.messages.count == MessageLifecycle.maxPinsPerConversation)
        #expect(list.messages.first?.id == messages.last?.id)
        // Each message of the list is read with its own reactions, however far apart they are.
        _ = try await apply(store, react(messages[1], "👍", by: "bob"))
        let withReaction = try await pins(store, viewer: "bob").messages.first { $0.id == messages[1].id }
        #expect(withReaction?.reactions == [ReactionSummary(key: "👍", count: 1, reacted: true)])
    }
}
