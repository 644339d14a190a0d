import Foundation
import ParleyProtocol
import ParleyStore
import Testing

/// Blocks and reports on every backend: docs/PROTOCOL.md, "Blocks and reports".
extension StoreConformanceTests {
    func direct(_ store: any ParleyStore, _ creator: String, with other: String, id: String = "c_d") -> Command {
        .createConversation(
            .init(appId: Self.appId, newId: id, type: .direct, creator: creator, participants: [other], now: 5))
    }

    @Test(arguments: Backend.allCases) func blocksAreKeptOncePerPairAndListedNewestFirst(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        let first = try await store.block(appId: Self.appId, blocker: "alice", blocked: "bob", now: 100)
        #expect(first == BlockedUser(uid: "bob", blockedAt: 100))
        // Again: the first block stays.
        #expect(try await store.block(appId: Self.appId, blocker: "alice", blocked: "bob", now: 200) == first)
        _ = try await store.block(appId: Self.appId, blocker: "alice", blocked: "carol", now: 300)
        _ = try await store.block(appId: Self.appId, blocker: "dave", blocked: "bob", now: 300)
        #expect(try await store.blocks(appId: Self.appId, uid: "alice").map(\.uid) == ["carol", "bob"])
        #expect(Set(try await store.blockers(appId: Self.appId, of: "bob")) == ["alice", "dave"])
        // Another app's user, or nobody: not found; another app sees none of this app's blocks.
        await #expect(throws: DomainError.self) {
            _ = try await store.block(appId: Self.appId, blocker: "alice", blocked: "mallory", now: 1)
        }
        #expect(try await store.blockers(appId: Self.otherApp, of: "bob").isEmpty)
        try await store.unblock(appId: Self.appId, blocker: "alice", blocked: "bob")
        try await store.unblock(appId: Self.appId, blocker: "alice", blocked: "bob")
        #expect(try await store.blocks(appId: Self.appId, uid: "alice").map(\.uid) == ["carol"])
        #expect(try await store.blockers(appId: Self.appId, of: "bob") == ["dave"])
    }

    @Test(arguments: Backend.allCases) func aBlockStopsBothSidesOfADirectConversationAndNoGroup(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        let created = try await apply(store, direct(store, "alice", with: "bob"))
        guard case .conversation(let dm, true) = created.outcome else { throw StoreTestError.noMessage }
        _ = try await group(store, members: ["bob", "carol"])
        let before = try await message(store, dm.id, from: "bob", text: "before", clientId: "b1")
        _ = try await apply(store, edit(before, by: "bob", text: "edited"))
        _ = try await store.block(appId: Self.appId, blocker: "alice", blocked: "bob", now: 30)

        // Both ways, every kind of writing: sends, edits, reactions; a new direct conversation with a third user is
        // not affected, nor the group.
        #expect(try await refusal(store, send(store, dm.id, from: "bob")) == .blocked)
        #expect(try await refusal(store, send(store, dm.id, from: "alice")) == .blocked)
        #expect(try await refusal(store, edit(before, by: "bob", text: "edited again")) == .blocked)
        // An edit made before the block and retried after it is answered as it was.
        #expect(try await refusal(store, edit(before, by: "bob", text: "edited")) == nil)
        #expect(try await refusal(store, react(before, "👍", by: "alice")) == .blocked)
        #expect(try await refusal(store, send(store, "c_g", from: "bob")) == nil)
        // A send repeated after the block (its answer was lost) is still the message stored before.
        let repeated = try await apply(store, send(store, dm.id, from: "bob", text: "before", clientId: "b1"))
        guard case .message(let again, true) = repeated.outcome else { throw StoreTestError.noMessage }
        #expect(again.id == before.id)
        // Deleting one's own message and reading stay possible.
        #expect(try await refusal(store, delete(before, by: "bob")) == nil)
        #expect(try await history(store, dm.id).count == 1)
        // The existing conversation is found again; a new one between them is refused.
        let carolAndAlice = try await apply(store, direct(store, "carol", with: "alice", id: "c_ca"))
        guard case .conversation(_, true) = carolAndAlice.outcome else { throw StoreTestError.noMessage }
        _ = try await store.block(appId: Self.appId, blocker: "carol", blocked: "dave", now: 32)
        #expect(try await refusal(store, direct(store, "dave", with: "carol", id: "c_dc")) == .blocked)
        #expect(try await refusal(store, direct(store, "carol", with: "dave", id: "c_dc")) == .blocked)

        // Unblocked: writing again.
        try await store.unblock(appId: Self.appId, blocker: "alice", blocked: "bob")
        #expect(try await refusal(store, send(store, dm.id, from: "bob")) == nil)
    }

    @Test(arguments: Backend.allCases) func theAppsServerDeletesAnyMessageOfItsApp(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])
        let bobs = try await message(store, from: "bob", text: "against the rules")
        let byApp = Command.deleteMessage(
            .init(appId: Self.appId, conversationId: "c_g", actor: nil, messageId: bobs.id, now: 60)
        )
        let deleted = try await apply(store, byApp)
        guard case .message(let tombstone, false) = deleted.outcome else { throw StoreTestError.noMessage }
        #expect(tombstone.isDeleted && tombstone.deletedBy == nil && tombstone.parts.isEmpty)
        #expect(deleted.events.map(\.event.name) == [.messageDelete])
        #expect(deleted.events.first?.event.context.createdBy == nil)
        #expect(Set(deleted.recipients) == ["alice", "bob"])
        #expect(try await history(store).first?.isDeleted == true)
        // Again: the tombstone, no event. Another app's server, an unknown message: not found.
        let again = try await apply(store, byApp)
        #expect(again.events.isEmpty)
        let otherApp = Command.deleteMessage(
            .init(appId: Self.otherApp, conversationId: "c_g", actor: nil, messageId: bobs.id, now: 61)
        )
        #expect(try await refusal(store, otherApp) == .conversationNotFound)
        let unknown = Command.deleteMessage(
            .init(appId: Self.appId, conversationId: "c_g", actor: nil, messageId: "m_nope", now: 61)
        )
        #expect(try await refusal(store, unknown) == .messageNotFound)
    }

    func mute(_ uid: String, by actor: String?, until: Int64? = nil, muted: Bool = true, at now: Int64 = 30) -> Command
    {
        .muteParticipant(
            .init(
                appId: Self.appId, conversationId: "c_g", actor: actor, uid: uid, muted: muted, until: until, now: now)
        )
    }

    @Test(arguments: Backend.allCases) func aMutedParticipantReadsButDoesNotWriteUntilItEnds(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])
        let bobs = try await message(store, from: "bob", text: "before", at: 20)
        let alices = try await message(store, from: "alice", text: "hi", at: 20)

        // Who may remove a participant may mute them: not a member; an admin not the owner; the app's server anyone.
        #expect(try await refusal(store, mute("carol", by: "bob")) == .forbidden)
        let muted = try await apply(store, mute("bob", by: "alice", until: 100))
        guard case .participant(let participant) = muted.outcome else { throw StoreTestError.noMessage }
        #expect(participant.muted == true && participant.mutedUntil == 100 && participant.isMuted(at: 99))
        #expect(muted.events.map(\.event.name) == [.participantUpdated])
        #expect(muted.events.first?.event.payload == .participantUpdated(participant))
        #expect(Set(muted.recipients) == ["alice", "bob", "carol"])
        #expect(try await apply(store, mute("bob", by: "alice", until: 100)).events.isEmpty)

        // Until 100: no send, edit or new reaction (taking one back, deleting and reading stay possible).
        #expect(try await refusal(store, send(store, "c_g", from: "bob")) == .muted)
        #expect(try await refusal(store, edit(bobs, by: "bob", text: "edited", at: 50)) == .muted)
        #expect(try await refusal(store, react(alices, "👍", by: "bob", at: 50)) == .muted)
        #expect(try await refusal(store, react(alices, "👍", by: "bob", add: false, at: 50)) == nil)
        #expect(try await store.isMuted(appId: Self.appId, conversationId: "c_g", uid: "bob", now: 50))
        #expect(try await history(store, viewer: "bob").count == 2)
        // After it: writing again.
        #expect(try await !store.isMuted(appId: Self.appId, conversationId: "c_g", uid: "bob", now: 150))
        _ = try await message(store, from: "bob", text: "after", at: 150)

        // Until lifted; then lifted.
        _ = try await apply(store, mute("bob", by: "alice", at: 160))
        #expect(try await store.isMuted(appId: Self.appId, conversationId: "c_g", uid: "bob", now: 10_000_000))
        #expect(try await refusal(store, send(store, "c_g", from: "bob")) == .muted)
        let lifted = try await apply(store, mute("bob", by: "alice", muted: false, at: 170))
        guard case .participant(let unmuted) = lifted.outcome else { throw StoreTestError.noMessage }
        #expect(unmuted.muted == nil && unmuted.mutedUntil == nil && lifted.events.count == 1)
        #expect(try await refusal(store, send(store, "c_g", from: "bob")) == nil)

        // An admin mutes a member, not the owner; the app's server mutes the owner too.
        _ = try await apply(
            store,
            .updateParticipant(
                .init(appId: Self.appId, conversationId: "c_g", actor: "alice", uid: "carol", role: .admin, now: 180))
        )
        #expect(try await refusal(store, mute("alice", by: "carol")) == .forbidden)
        #expect(try await refusal(store, mute("bob", by: "carol")) == nil)
        #expect(try await refusal(store, mute("alice", by: nil)) == nil)
        #expect(try await refusal(store, send(store, "c_g", from: "alice")) == .muted)
        // Not a participant; another app's server; a direct conversation.
        #expect(try await refusal(store, mute("dave", by: "alice")) == .uidNotFound)
        let otherApp = Command.muteParticipant(
            .init(appId: Self.otherApp, conversationId: "c_g", actor: nil, uid: "bob", muted: true, now: 190)
        )
        #expect(try await refusal(store, otherApp) == .conversationNotFound)
        _ = try await apply(store, direct(store, "dave", with: "carol", id: "c_dm"))
        let inDirect = Command.muteParticipant(
            .init(appId: Self.appId, conversationId: "c_dm", actor: "dave", uid: "carol", muted: true, now: 190)
        )
        #expect(try await refusal(store, inDirect) == .forbidden)
    }

    @Test(arguments: Backend.allCases) func contactsLeaveOutThoseWhoBlockedTheUser(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])
        _ = try await store.block(appId: Self.appId, blocker: "alice", blocked: "bob", now: 30)
        // bob's presence and profile changes no longer reach alice; alice's still reach bob (he blocked nobody).
        #expect(Set(try await store.contacts(appId: Self.appId, uid: "bob")) == ["carol"])
        #expect(Set(try await store.contacts(appId: Self.appId, uid: "alice")) == ["bob", "carol"])
    }

    @Test(arguments: Backend.allCases) func reportsAreKeptOnceWhileOpenAndPagedForTheApp(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])
        let reported = try await message(store, from: "bob", text: "spam spam")
        func report(_ id: String, by reporter: String, message: Message? = nil, uid: String = "bob") -> Report {
            Report(
                id: id, reporter: reporter, uid: uid, conversationId: message?.conversationId, messageId: message?.id,
                message: message, reason: .spam, details: "line one\nline two", state: .open, createdAt: 40
            )
        }
        let first = try await store.insertReport(appId: Self.appId, report("r_1", by: "alice", message: reported))
        #expect(first.created && first.report.message == reported)
        // The same reporter, the same message, while it is open: the first one back.
        let again = try await store.insertReport(appId: Self.appId, report("r_2", by: "alice", message: reported))
        #expect(!again.created && again.report.id == "r_1")
        // Another reporter, or the user rather than the message: new reports.
        #expect(try await store.insertReport(appId: Self.appId, report("r_3", by: "carol", message: reported)).created)
        #expect(try await store.insertReport(appId: Self.appId, report("r_4", by: "alice")).created)

        // The message is deleted: the report keeps its copy.
        _ = try await apply(store, delete(reported, by: "bob"))
        let all = try await store.reports(appId: Self.appId, state: nil, after: nil, limit: 2)
        #expect(all.map(\.report.id) == ["r_1", "r_3"])
        #expect(all.first?.report.message?.text == "spam spam")
        let rest = try await store.reports(appId: Self.appId, state: nil, after: all.last?.position, limit: 2)
        #expect(rest.map(\.report.id) == ["r_4"])
        #expect(try await store.reports(appId: Self.otherApp, state: nil, after: nil, limit: 10).isEmpty)

        // Resolved: listed as such; the reporter may report the same message again.
        let resolved = try await store.updateReport(
            appId: Self.appId, id: "r_1", state: .resolved, resolution: "removed", now: 50
        )
        #expect(resolved?.state == .resolved && resolved?.resolution == "removed" && resolved?.resolvedAt == 50)
        // Resolved again without a resolution: both stay as they were.
        let again2 = try await store.updateReport(
            appId: Self.appId, id: "r_1", state: .resolved, resolution: nil, now: 55)
        #expect(again2?.resolution == "removed" && again2?.resolvedAt == 50)
        #expect(
            try await store.reports(appId: Self.appId, state: .open, after: nil, limit: 10).map(\.report.id) == [
                "r_3", "r_4",
            ])
        #expect(try await store.insertReport(appId: Self.appId, report("r_5", by: "alice", message: reported)).created)
        // Reopening r_1 would make two open reports of alice about one message: refused.
        await #expect(throws: DomainError.self) {
            _ = try await store.updateReport(appId: Self.appId, id: "r_1", state: .open, resolution: nil, now: 60)
        }
        #expect(
            try await store.updateReport(appId: Self.appId, id: "r_nope", state: .resolved, resolution: nil, now: 60)
                == nil)
        #expect(
            try await store.updateReport(appId: Self.otherApp, id: "r_3", state: .resolved, resolution: nil, now: 60)
                == nil)
    }
}
