import Foundation
import ParleyProtocol
import ParleyStore
import Testing

/// Blocks, reports, mutes and bans on every backend: docs/PROTOCOL.md, "Blocks and reports".
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
        #expect(Set(try await store.blockers(of: [UserRef(appId: Self.appId, uid: "bob")])[0]) == ["alice", "dave"])
        // Many users in one read, in the order asked (twice the same one, one nobody blocked, one of another app).
        let many = try await store.blockers(
            of: [
                UserRef(appId: Self.appId, uid: "carol"), UserRef(appId: Self.appId, uid: "bob"),
                UserRef(appId: Self.appId, uid: "dave"), UserRef(appId: Self.otherApp, uid: "bob"),
                UserRef(appId: Self.appId, uid: "carol"),
            ])
        #expect(many.map { Set($0) } == [["alice"], ["alice", "dave"], [], [], ["alice"]])
        // Another app's user, or nobody: not found; another app sees none of this app's blocks.
        await #expect(throws: DomainError.self) {
            _ = try await store.block(appId: Self.appId, blocker: "alice", blocked: "mallory", now: 1)
        }
        #expect(try await store.blockers(of: [UserRef(appId: Self.otherApp, uid: "bob")]) == [[]])
        try await store.unblock(appId: Self.appId, blocker: "alice", blocked: "bob")
        try await store.unblock(appId: Self.appId, blocker: "alice", blocked: "bob")
        #expect(try await store.blocks(appId: Self.appId, uid: "alice").map(\.uid) == ["carol"])
        #expect(try await store.blockers(of: [UserRef(appId: Self.appId, uid: "bob")]) == [["dave"]])
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

    func ban(
        _ uid: String, by actor: String?, until: Int64? = nil, reason: String? = nil, banned: Bool = true,
        in conversationId: String = "c_g", appId: String = appId, at now: Int64
    ) -> Command {
        .banParticipant(
            .init(
                appId: appId, conversationId: conversationId, actor: actor, uid: uid, banned: banned, until: until,
                reason: reason, now: now)
        )
    }

    func join(_ uid: String, at now: Int64) -> Command {
        .join(.init(appId: Self.appId, conversationId: "c_g", actor: uid, now: now))
    }

    func add(_ uids: [String], by actor: String, at now: Int64) -> Command {
        .addParticipants(
            .init(
                appId: Self.appId, conversationId: "c_g", actor: actor, entries: uids.map { .init(uid: $0) }, now: now)
        )
    }

    func participantUIDs(_ store: any ParleyStore) async throws -> Set<String> {
        Set(try await store.participants(appId: Self.appId, conversationId: "c_g").map(\.uid))
    }

    @Test(arguments: Backend.allCases) func aBannedUserIsRemovedAndKeptOutUntilTheBanEnds(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"], isPublic: true)
        _ = try await message(store, from: "alice", text: "@bob", mentions: ["bob"])
        #expect(try await store.unreadMentions(appId: Self.appId, uid: "bob", after: nil, limit: 10).count == 1)

        // The owner bans bob: removed as `removeParticipant` removes (his unread mentions go), then the ban; everyone,
        // bob included, gets both events, in that order.
        let banned = try await apply(store, ban("bob", by: "alice", until: 100, reason: "spam", at: 30))
        let expected = ConversationBan(
            conversationId: "c_g", uid: "bob", bannedBy: "alice", reason: "spam", until: 100, createdAt: 30
        )
        guard case .ban(let made) = banned.outcome else { throw StoreTestError.noMessage }
        #expect(made == expected)
        #expect(banned.events.map(\.event.name) == [.participantRemoved, .participantBanned])
        guard case .participantRemoved(let removed) = banned.events.first?.event.payload else {
            throw StoreTestError.noMessage
        }
        #expect(removed.uid == "bob" && removed.role == .member)
        #expect(banned.events.last?.event.payload == .participantBanned(expected))
        let seqs = banned.events.compactMap(\.event.seq)
        #expect(seqs.count == 2 && seqs[1] == seqs[0] + 1)
        #expect(banned.events.allSatisfy { $0.event.context.createdBy == "alice" })
        #expect(Set(banned.recipients) == ["alice", "bob", "carol"] && Set(banned.participants) == ["alice", "carol"])
        #expect(try await participantUIDs(store) == ["alice", "carol"])
        #expect(
            try await store.conversation(appId: Self.appId, id: "c_g", viewer: "alice")?.0.conversation
                .participantCount == 2)
        #expect(try await store.unreadMentions(appId: Self.appId, uid: "bob", after: nil, limit: 10).isEmpty)
        let stream = try await store.membershipChanges(appId: Self.appId, uid: "bob", afterUserSeq: 0, limit: 10)
        #expect(stream.last?.joined == false)
        // The same ban again: nothing changes, nothing is sent.
        let again = try await apply(store, ban("bob", by: "alice", until: 100, reason: "spam", at: 35))
        #expect(again.events.isEmpty)
        guard case .ban(let same) = again.outcome else { throw StoreTestError.noMessage }
        #expect(same == expected)
        #expect(try await store.ban(appId: Self.appId, conversationId: "c_g", uid: "bob", now: 50) == expected)
        #expect(try await store.bans(appId: Self.appId, conversationId: "c_g", now: 50) == [expected])

        // Until 100: bob cannot join, nor be added (the whole request is refused, dave with him).
        #expect(try await refusal(store, join("bob", at: 50)) == .banned)
        #expect(try await refusal(store, add(["dave", "bob"], by: "alice", at: 50)) == .banned)
        #expect(try await participantUIDs(store) == ["alice", "carol"])

        // The app's server changes the ban: a new end, no reason; it keeps when it was made, and is sent again.
        let changed = try await apply(store, ban("bob", by: nil, until: 200, at: 60))
        let longer = ConversationBan(conversationId: "c_g", uid: "bob", until: 200, createdAt: 30)
        #expect(changed.events.map(\.event.payload) == [.participantBanned(longer)])
        #expect(changed.events.first?.event.context.createdBy == nil)
        #expect(try await refusal(store, join("bob", at: 150)) == .banned)

        // Past its end it is no ban: not listed, not in the way; bob joins.
        #expect(try await store.ban(appId: Self.appId, conversationId: "c_g", uid: "bob", now: 200) == nil)
        #expect(try await store.bans(appId: Self.appId, conversationId: "c_g", now: 200).isEmpty)
        #expect(try await refusal(store, ban("bob", by: "alice", banned: false, at: 200)) == .banNotFound)
        #expect(try await refusal(store, join("bob", at: 210)) == nil)
        // A new ban replaces the one that ended (made now).
        let rebanned = try await apply(store, ban("bob", by: "alice", at: 220))
        guard case .ban(let again2) = rebanned.outcome else { throw StoreTestError.noMessage }
        #expect(again2.createdAt == 220 && again2.until == nil && again2.reason == nil)
        #expect(rebanned.events.map(\.event.name) == [.participantRemoved, .participantBanned])

        // Someone not in the group, banned beforehand: they are told, the participants too; no membership changes.
        let dave = try await apply(store, ban("dave", by: "alice", reason: "known troll", at: 300))
        #expect(dave.events.map(\.event.name) == [.participantBanned])
        #expect(Set(dave.recipients) == ["alice", "carol", "dave"] && Set(dave.participants) == ["alice", "carol"])
        #expect(try await refusal(store, join("dave", at: 310)) == .banned)
        let bans = try await store.bans(appId: Self.appId, conversationId: "c_g", now: 310)
        #expect(bans.map(\.uid) == ["dave", "bob"])

        // Lifted: the ban as it was is sent to everyone and dave; dave joins. Lifting it again: no ban to lift.
        let lifted = try await apply(store, ban("dave", by: "alice", banned: false, at: 320))
        guard case .ban(let liftedBan) = lifted.outcome else { throw StoreTestError.noMessage }
        #expect(liftedBan.uid == "dave" && liftedBan.reason == "known troll" && liftedBan.createdAt == 300)
        #expect(lifted.events.map(\.event.payload) == [.participantUnbanned(liftedBan)])
        #expect(Set(lifted.recipients) == ["alice", "carol", "dave"])
        #expect(try await refusal(store, ban("dave", by: "alice", banned: false, at: 325)) == .banNotFound)
        #expect(try await refusal(store, join("dave", at: 330)) == nil)
        // Unbanned, bob may be added again.
        _ = try await apply(store, ban("bob", by: "alice", banned: false, at: 340))
        #expect(try await refusal(store, add(["bob"], by: "alice", at: 350)) == nil)
        #expect(try await participantUIDs(store) == ["alice", "bob", "carol", "dave"])
    }

    @Test(arguments: Backend.allCases) func whoMayBanIsWhoMayRemoveAndNobodyBansTheOwnerOrThemself(
        _ backend: Backend
    ) async throws {
        let store = try await prepared(backend, users: ["alice", "bob", "carol", "dave", "erin", "frank"])
        _ = try await group(store, members: ["bob", "carol", "dave"])
        func promote(_ uid: String) async throws {
            _ = try await apply(
                store,
                .updateParticipant(
                    .init(appId: Self.appId, conversationId: "c_g", actor: "alice", uid: uid, role: .admin, now: 20))
            )
        }
        try await promote("carol")
        try await promote("dave")

        // A member bans nobody, in the group or not; nobody bans themself; nobody bans the owner, not even the app's
        // server; an admin does not ban an admin.
        #expect(try await refusal(store, ban("carol", by: "bob", at: 30)) == .forbidden)
        #expect(try await refusal(store, ban("erin", by: "bob", at: 30)) == .forbidden)
        #expect(try await refusal(store, ban("bob", by: "bob", at: 30)) == .badRequest)
        #expect(try await refusal(store, ban("carol", by: "carol", at: 30)) == .badRequest)
        #expect(try await refusal(store, ban("alice", by: "alice", at: 30)) == .badRequest)
        #expect(try await refusal(store, ban("alice", by: "carol", at: 30)) == .forbidden)
        #expect(try await refusal(store, ban("alice", by: nil, at: 30)) == .forbidden)
        #expect(try await refusal(store, ban("dave", by: "carol", at: 30)) == .forbidden)
        // Someone outside a private group sees nothing of it; a user of no one (or of another app) is not found.
        #expect(try await refusal(store, ban("bob", by: "erin", at: 30)) == .conversationNotFound)
        #expect(try await refusal(store, ban("nobody", by: "alice", at: 30)) == .uidNotFound)
        #expect(try await refusal(store, ban("mallory", by: "alice", at: 30)) == .uidNotFound)
        #expect(try await refusal(store, ban("bob", by: nil, appId: Self.otherApp, at: 30)) == .conversationNotFound)
        #expect(try await store.bans(appId: Self.appId, conversationId: "c_g", now: 30).isEmpty)

        // An admin bans a member and someone not in the group, and lifts a ban; the owner bans an admin; the app's
        // server anyone but the owner.
        #expect(try await refusal(store, ban("bob", by: "carol", at: 40)) == nil)
        #expect(try await refusal(store, ban("erin", by: "carol", at: 40)) == nil)
        #expect(try await refusal(store, ban("erin", by: "carol", banned: false, at: 41)) == nil)
        #expect(try await refusal(store, ban("dave", by: "alice", at: 42)) == nil)
        #expect(try await refusal(store, ban("carol", by: nil, at: 43)) == nil)
        #expect(try await participantUIDs(store) == ["alice"])
        // Unbanning follows the same rule: a member cannot (bob is back as a member), the app's server can.
        #expect(try await refusal(store, ban("bob", by: nil, banned: false, at: 50)) == nil)
        #expect(try await refusal(store, add(["bob"], by: "alice", at: 51)) == nil)
        #expect(try await refusal(store, ban("dave", by: "bob", banned: false, at: 52)) == .forbidden)

        // The roles decide: with members allowed to remove members and admins not, bob bans and carol would not.
        let roles = ConversationRolesChange(
            admin: RolePermissionsChange(canRemoveParticipants: false),
            member: RolePermissionsChange(canRemoveParticipants: true)
        )
        _ = try await apply(
            store,
            .updateConversation(
                .init(
                    appId: Self.appId, conversationId: "c_g", actor: "alice",
                    update: UpdateConversationRequest(roles: roles), now: 60))
        )
        #expect(try await refusal(store, ban("frank", by: "bob", at: 61)) == nil)
        _ = try await apply(store, ban("carol", by: nil, banned: false, at: 62))
        _ = try await apply(store, add(["carol"], by: "alice", at: 63))
        try await promote("carol")
        #expect(try await refusal(store, ban("frank", by: "carol", banned: false, at: 64)) == .forbidden)

        // Nobody is banned from a direct conversation.
        _ = try await apply(store, direct(store, "erin", with: "frank", id: "c_dm"))
        #expect(try await refusal(store, ban("frank", by: "erin", in: "c_dm", at: 70)) == .forbidden)
        #expect(try await refusal(store, ban("frank", by: nil, in: "c_dm", at: 70)) == .forbidden)
    }

    @Test(arguments: Backend.allCases) func contactsLeaveOutThoseWhoBlockedTheUser(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])
        _ = try await store.block(appId: Self.appId, blocker: "alice", blocked: "bob", now: 30)
        // bob's presence and profile changes no longer reach alice; alice's still reach bob (he blocked nobody).
        #expect(Set(try await store.contacts(appId: Self.appId, uid: "bob")) == ["carol"])
        #expect(Set(try await store.contacts(appId: Self.appId, uid: "alice")) == ["bob", "carol"])
        let batched = try await store.contacts(of: [
            UserRef(appId: Self.appId, uid: "bob"), UserRef(appId: Self.appId, uid: "alice"),
        ])
        #expect(batched.map(Set.init) == [["carol"], ["bob", "carol"]])
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
