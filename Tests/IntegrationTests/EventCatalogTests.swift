import Foundation
import NIOConcurrencyHelpers
import Parley
import ParleyServer
import ParleyTesting
import Testing

/// One live test per row of the event catalog: the action through the SDK, then the exact event, with its
/// payload, at every client that should get it, and at no client that should not.
@Suite(.timeLimit(.minutes(2))) struct EventCatalogTests {
    /// Logged-in SDK clients with listeners, each with a private "notes" group used as a fence.
    struct Party {
        let server: TestServer
        let clock: ManualClock
        let clients: [String: ParleyClient]
        let listeners: [String: RecordingListener]
        let notes: [String: String]
        private let marks = NIOLockedValueBox([String: Int]())

        init(
            server: TestServer, clock: ManualClock, clients: [String: ParleyClient],
            listeners: [String: RecordingListener], notes: [String: String]
        ) {
            self.server = server
            self.clock = clock
            self.clients = clients
            self.listeners = listeners
            self.notes = notes
        }

        subscript(uid: String) -> ParleyClient { clients[uid]! }

        /// Starts a new observation window: events before it are ignored by ``observed(by:)``.
        func mark() {
            marks.withLockedValue { marks in
                for (uid, listener) in listeners { marks[uid] = listener.receivedEvents.count }
            }
        }

        /// Every client (of `only`, when given) posts to its own notes group and waits for the echo. Events published
        /// before the fence (and after the action completed) have then reached every client they were sent to.
        func fence(_ only: Set<String>? = nil) async throws {
            for (uid, client) in clients where only?.contains(uid) ?? true {
                let text = "fence \(UUID().uuidString)"
                let sent = try await client.sendTextMessage(text, to: .conversation(notes[uid]!))
                _ = await listeners[uid]!.next { event in
                    if case .messageSent(let message) = event.payload { return message.id == sent.id }
                    return false
                }
            }
        }

        /// What a client received in the window, without fences and the given noise.
        func observed(by uid: String, ignoring noise: Set<EventName> = [.presenceUpdate, .unreadUpdate]) -> [Event] {
            let start = marks.withLockedValue { $0[uid] ?? 0 }
            return listeners[uid]!.receivedEvents.dropFirst(start).filter { event in
                guard !noise.contains(event.name) else { return false }
                if case .messageSent(let message) = event.payload, message.text.hasPrefix("fence ") { return false }
                if event.conversationId.map(Set(notes.values).contains) == true { return false }
                return true
            }
        }

        /// The unread counts of a conversation pushed to `uid` in the window, in order.
        func unreadPushes(to uid: String, in conversationId: String) -> [Int] {
            observed(by: uid, ignoring: []).compactMap { event in
                guard case .unreadUpdated(let summary) = event.payload else { return nil }
                return summary.conversations.first { $0.conversationId == conversationId }?.unread
            }
        }

        /// Waits until `uid` is pushed an unread count of `count` for the conversation.
        func waitForUnread(_ uid: String, _ count: Int, in conversationId: String) async -> UnreadSummary? {
            let pushed = await waitFor(uid) { event in
                guard case .unreadUpdated(let summary) = event.payload else { return false }
                return summary.conversations.contains { $0.conversationId == conversationId && $0.unread == count }
            }
            guard case .unreadUpdated(let summary) = pushed?.payload else { return nil }
            return summary
        }

        /// Waits until `uid` receives an event satisfying `matches`.
        func waitFor(_ uid: String, _ matches: @escaping (Event) -> Bool) async -> Event? {
            if let seen = observed(by: uid, ignoring: []).last(where: matches) { return seen }
            return await listeners[uid]!.next(where: matches)
        }

        func stop() async throws {
            for client in clients.values { await client.shutdown() }
            try await server.stop()
            // Every event each user got called its kind's listener method too, and carried the app's id.
            for (uid, listener) in listeners {
                #expect(listener.everyEventCalledItsMethod, "\(uid): \(listener.kindCalls.map(\.method))")
                #expect(listener.receivedEvents.allSatisfy { $0.appId == server.app.appId }, "\(uid)")
            }
        }
    }

    static let everyone = ["alice", "bob", "carol", "dave"]

    func party(
        _ uids: [String] = everyone, presenceForAll: Set<String> = [], databaseURL: String? = nil,
        configure: (inout ServerConfiguration) -> Void = { _ in }
    ) async throws -> Party {
        let clock = ManualClock()
        let server = try await TestServer.start(databaseURL: databaseURL, clock: clock, configure: configure)
        var clients: [String: ParleyClient] = [:]
        var listeners: [String: RecordingListener] = [:]
        var notes: [String: String] = [:]
        for uid in uids {
            var builder = AppSettings.Builder()
                .serverURL(server.baseURL)
                .storageDirectory(try TemporaryDirectory().url)
                .appLifecycle(nil)
                .networkReachability(nil)
            if presenceForAll.contains(uid) { builder = builder.subscribePresenceForAllUsers() }
            // The clients share the server's virtual clock: typing throttles and server timers move together.
            let client = try ParleyClient(appId: server.app.appId, settings: builder.build(), clock: clock)
            try await client.start()
            try await client.login(uid: uid, authKey: server.app.authKey)
            await client.waitUntilConnected()
            let listener = RecordingListener()
            client.addEventListener("recorder", listener)
            notes[uid] = try await client.createGroup(name: "\(uid)'s notes").id
            clients[uid] = client
            listeners[uid] = listener
        }
        let party = Party(server: server, clock: clock, clients: clients, listeners: listeners, notes: notes)
        try await party.fence()
        party.mark()
        return party
    }

    // MARK: profile

    @Test func profileUpdateReachesTheUserAndEveryoneSharingAConversation() async throws {
        let party = try await party()
        _ = try await party["alice"].createGroup(name: "Team", participants: ["bob"])
        try await party.fence()
        party.mark()
        let updated = try await party["bob"].updateProfile(name: "Bobby", avatarURL: "https://example.com/b.png")
        try await party.fence()
        for uid in ["alice", "bob"] {
            let events = party.observed(by: uid)
            #expect(events.map(\.name) == [.profileUpdate], "\(uid)")
            #expect(events.first?.payload == .profileUpdated(updated) && events.first?.context.createdBy == "bob")
        }
        for uid in ["carol", "dave"] { #expect(party.observed(by: uid).isEmpty, "\(uid)") }
        #expect(party["bob"].getLoggedInUser()?.name == "Bobby")
        try await party.stop()
    }

    // MARK: conversation

    @Test func creatingAGroupTellsItsParticipantsIncludingTheOwnersParticipantAdded() async throws {
        let party = try await party()
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob"], description: "d")
        try await party.fence()
        for uid in ["alice", "bob"] {
            let events = party.observed(by: uid)
            #expect(events.map(\.name) == [.conversationCreate, .participantAdded, .participantAdded], "\(uid)")
            #expect(events.map(\.seq) == [1, 2, 3])
            guard case .conversationCreated(let created) = events.first?.payload else { continue }
            #expect(
                created.id == group.id && created.name == "Team" && created.description == "d"
                    && created.createdBy == "alice")
            let added = events.dropFirst().compactMap {
                if case .participantAdded(let p) = $0.payload { p } else { nil }
            }
            #expect(added.map(\.uid) == ["alice", "bob"] && added.map(\.role) == [.owner, .member])
        }
        for uid in ["carol", "dave"] { #expect(party.observed(by: uid).isEmpty, "\(uid)") }
        try await party.stop()
    }

    @Test func updatingAGroupTellsItsParticipants() async throws {
        let party = try await party()
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob"])
        try await party.fence()
        party.mark()
        let updated = try await party["alice"].updateConversation(
            group.id, name: "Dream team", metadata: ["color": "blue"])
        try await party.fence()
        for uid in ["alice", "bob"] {
            let events = party.observed(by: uid)
            #expect(events.map(\.name) == [.conversationUpdate], "\(uid)")
            #expect(events.first?.payload == .conversationUpdated(updated))
            #expect(updated.name == "Dream team" && updated.metadata == ["color": "blue"] && events.first?.seq == 4)
        }
        for uid in ["carol", "dave"] { #expect(party.observed(by: uid).isEmpty, "\(uid)") }
        try await party.stop()
    }

    @Test func deletingAGroupTellsItsParticipantsHidesItAndRefusesMessagesUntilUndeleted() async throws {
        let party = try await party()
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob"])
        let before = try await party["bob"].sendTextMessage("keep me", to: .conversation(group.id))
        try await party.fence()
        party.mark()
        try await party["alice"].deleteConversation(group.id)
        try await party.fence()
        for uid in ["alice", "bob"] {
            let events = party.observed(by: uid)
            #expect(events.map(\.name) == [.conversationDelete], "\(uid)")
            guard case .conversationDeleted(let deleted) = events.first?.payload else { continue }
            #expect(deleted.id == group.id && deleted.deletedAt != nil)
        }
        for uid in ["carol", "dave"] { #expect(party.observed(by: uid).isEmpty, "\(uid)") }
        let refused = await #expect(throws: ParleyError.self) {
            try await party["bob"].sendTextMessage("hello?", to: .conversation(group.id))
        }
        #expect(refused?.code == .conversationNotFound)
        #expect(try await !party["bob"].conversations().conversations.contains { $0.id == group.id })

        party.mark()
        let restored = try await party["alice"].undeleteConversation(group.id)
        try await party.fence()
        for uid in ["alice", "bob"] {
            let events = party.observed(by: uid)
            #expect(events.map(\.name) == [.conversationUndelete], "\(uid)")
            #expect(events.first?.payload == .conversationUndeleted(restored) && restored.deletedAt == nil)
        }
        #expect(try await party["bob"].fetchMessages(conversationId: group.id).messages.map(\.id) == [before.id])
        try await party.stop()
    }

    // MARK: participants

    @Test func addingAndJoiningTellEveryParticipantAndTheNewOne() async throws {
        let party = try await party()
        let group = try await party["alice"].createGroup(name: "Public", participants: ["bob"], isPublic: true)
        try await party.fence()
        party.mark()
        try await party["alice"].addParticipants(["carol"], to: group.id, role: .admin)
        try await party.fence()
        for uid in ["alice", "bob", "carol"] {
            let events = party.observed(by: uid)
            #expect(events.map(\.name) == [.participantAdded], "\(uid)")
            guard case .participantAdded(let added) = events.first?.payload else { continue }
            #expect(added.uid == "carol" && added.role == .admin && events.first?.context.createdBy == "alice")
        }
        #expect(party.observed(by: "dave").isEmpty)

        party.mark()
        let joined = try await party["dave"].joinConversation(group.id)
        try await party.fence()
        for uid in Self.everyone {
            let events = party.observed(by: uid)
            #expect(events.map(\.name) == [.participantAdded], "\(uid)")
            #expect(events.first?.payload == .participantAdded(joined) && joined.role == .member)
        }
        try await party.stop()
    }

    @Test func aRoleChangeTellsEveryParticipant() async throws {
        let party = try await party()
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob", "carol"])
        try await party.fence()
        party.mark()
        let promoted = try await party["alice"].setRole(.admin, of: "bob", in: group.id)
        try await party.fence()
        for uid in ["alice", "bob", "carol"] {
            let events = party.observed(by: uid)
            #expect(events.map(\.name) == [.participantUpdated], "\(uid)")
            #expect(events.first?.payload == .participantUpdated(promoted) && promoted.role == .admin)
        }
        #expect(party.observed(by: "dave").isEmpty)
        try await party.stop()
    }

    @Test func removingAndLeavingTellTheParticipantsAndTheOneWhoGoes() async throws {
        let party = try await party()
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob", "carol"])
        try await party.fence()
        party.mark()
        try await party["alice"].removeParticipant("carol", from: group.id)
        try await party.fence()
        for uid in ["alice", "bob", "carol"] {
            let events = party.observed(by: uid)
            #expect(events.map(\.name) == [.participantRemoved], "\(uid)")
            guard case .participantRemoved(let removed) = events.first?.payload else { continue }
            #expect(removed.uid == "carol" && removed.role == .member && events.first?.context.createdBy == "alice")
        }
        #expect(party.observed(by: "dave").isEmpty)
        let gone = await #expect(throws: ParleyError.self) {
            _ = try await party["carol"].fetchMessages(conversationId: group.id)
        }
        #expect(gone?.code == .conversationNotFound)

        party.mark()
        try await party["bob"].leaveConversation(group.id)
        try await party.fence()
        for uid in ["alice", "bob"] {
            let events = party.observed(by: uid)
            #expect(events.map(\.name) == [.participantRemoved], "\(uid)")
            #expect(events.first?.context.createdBy == "bob")
        }
        for uid in ["carol", "dave"] { #expect(party.observed(by: uid).isEmpty, "\(uid)") }
        try await party.stop()
    }

    // MARK: typing

    @Test func typingReachesTheOtherParticipantsAndTurnsOffWhenAsked() async throws {
        let party = try await party()
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob", "carol"])
        try await party.fence()
        party.mark()
        #expect(await party["bob"].startTyping(in: group.id))
        for uid in ["alice", "carol"] {
            let typing = await party.waitFor(uid) { $0.name == .participantTyping }
            #expect(
                typing?.payload == .participantTyping(TypingIndicator(uid: "bob")) && typing?.conversationId == group.id
            )
            #expect(typing?.seq == nil)
        }
        // Repeated calls within 3 s send nothing more.
        #expect(await !party["bob"].startTyping(in: group.id))
        #expect(await party["bob"].stopTyping(in: group.id))
        for uid in ["alice", "carol"] {
            let off = await party.waitFor(uid) { $0.name == .participantTypingOff }
            #expect(off?.payload == .participantTypingOff(TypingIndicator(uid: "bob")))
        }
        try await party.fence()
        for uid in ["alice", "carol"] {
            #expect(party.observed(by: uid).map(\.name) == [.participantTyping, .participantTypingOff], "\(uid)")
        }
        for uid in ["bob", "dave"] { #expect(party.observed(by: uid).isEmpty, "\(uid)") }
        try await party.stop()
    }

    @Test func typingTurnsOffAfterFiveSilentSecondsOnASentMessageAndOnDisconnect() async throws {
        let party = try await party()
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob"])
        try await party.fence()

        // Silence: no frame for 5 s.
        _ = await party["bob"].startTyping(in: group.id)
        _ = await party.waitFor("alice") { $0.name == .participantTyping }
        // The expiry was scheduled before the event went out: time can move at once.
        party.clock.advance(by: .seconds(5))
        let expired = await party.waitFor("alice") { $0.name == .participantTypingOff }
        #expect(expired?.payload == .participantTypingOff(TypingIndicator(uid: "bob")))

        // A message ends it.
        party.mark()
        party.clock.advance(by: .seconds(3))
        _ = await party["bob"].startTyping(in: group.id)
        _ = await party.waitFor("alice") { $0.name == .participantTyping }
        try await party["bob"].sendTextMessage("done", to: .conversation(group.id))
        let afterSend = await party.waitFor("alice") { $0.name == .participantTypingOff }
        #expect(afterSend != nil)

        // A lost connection ends it.
        party.mark()
        party.clock.advance(by: .seconds(3))
        _ = await party["bob"].startTyping(in: group.id)
        _ = await party.waitFor("alice") { $0.name == .participantTyping }
        await party["bob"].disconnect()
        let afterDisconnect = await party.waitFor("alice") { $0.name == .participantTypingOff }
        #expect(afterDisconnect != nil)
        try await party.stop()
    }

    // MARK: receipts and unread counts

    @Test func deliveryAndReadReceiptsReachEveryParticipantAndUpdateUnreadCounts() async throws {
        let party = try await party()
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob", "carol"])
        var sent: [Message] = []
        for index in 1...3 {
            sent.append(try await party["alice"].sendTextMessage("m\(index)", to: .conversation(group.id)))
        }
        let seq = sent[2].seq
        #expect(
            try await party["bob"].unreadCounts().conversations.first { $0.conversationId == group.id }?.unread == 3)
        try await party.fence()
        party.mark()

        try await party["bob"].markDelivered(upTo: seq, in: group.id)
        try await party["bob"].markRead(upTo: seq - 1, in: group.id)
        for uid in ["alice", "carol", "bob"] {
            _ = await party.waitFor(uid) { $0.name == .messageRead }
        }
        try await party.fence()
        for uid in ["alice", "bob", "carol"] {
            let events = party.observed(by: uid)
            #expect(events.map(\.name) == [.messageDelivered, .messageRead], "\(uid)")
            // Each names the message it reaches: the catalog's messageId and timestamp.
            #expect(
                events.map(\.payload) == [
                    .messageDelivered(Receipt(uid: "bob", seq: seq, messageId: sent[2].id, timestamp: sent[2].sentAt)),
                    .messageRead(Receipt(uid: "bob", seq: seq - 1, messageId: sent[1].id, timestamp: sent[1].sentAt)),
                ])
        }
        #expect(party.observed(by: "dave").isEmpty)
        let unread = try await party["bob"].unreadCounts()
        #expect(unread.conversations.first { $0.conversationId == group.id }?.unread == 1)
        // Bob's own devices hear about his unread count (at once while his push budget lasts, else when the interval
        // ends).
        party.clock.advance(by: .seconds(1))
        #expect(await party.waitForUnread("bob", 1, in: group.id) != nil)
        // Moving a position backwards changes nothing.
        party.mark()
        try await party["bob"].markRead(upTo: 1, in: group.id)
        try await party.fence()
        #expect(party.observed(by: "alice").isEmpty)
        try await party.stop()
    }

    @Test func newMessagesPushTheRecipientsUnreadCount() async throws {
        let party = try await party()
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob"])
        try await party.fence()
        party.mark()
        // While Bob's budget lasts, each count goes out at once, with its message (the clock does not move).
        let burst = ServerConfiguration().unreadPushBurst
        for count in 1...burst {
            try await party["alice"].sendTextMessage("\(count)", to: .conversation(group.id))
            let summary = await party.waitForUnread("bob", count, in: group.id)
            #expect(summary?.conversations.map(\.conversationId) == [group.id])
        }
        // Spent: the next changes wait for the interval's end and are pushed together.
        try await party["alice"].sendTextMessage("more", to: .conversation(group.id))
        try await party["alice"].sendTextMessage("and more", to: .conversation(group.id))
        try await party.fence()
        #expect(party.unreadPushes(to: "bob", in: group.id) == Array(1...burst))
        party.clock.advance(by: .seconds(1))
        #expect(await party.waitForUnread("bob", burst + 2, in: group.id) != nil)
        #expect(party.unreadPushes(to: "bob", in: group.id) == Array(1...burst) + [burst + 2])
        try await party.stop()
    }

    @Test func aBatchDueForMoreUsersThanTheBurstAllowsHoldsEachAfterOnePush() async throws {
        // Two members connected here are "more" than one.
        let party = try await party { $0.unreadBurstMaxUsers = 1 }
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob", "carol"])
        try await party.fence()
        party.mark()
        try await party["alice"].sendTextMessage("one", to: .conversation(group.id))
        for uid in ["bob", "carol"] { _ = await party.waitForUnread(uid, 1, in: group.id) }
        try await party["alice"].sendTextMessage("two", to: .conversation(group.id))
        try await party.fence()
        // The first count went out at once; the second waits for the interval, as with a burst of 1.
        #expect(party.unreadPushes(to: "bob", in: group.id) == [1])
        #expect(party.unreadPushes(to: "carol", in: group.id) == [1])
        party.clock.advance(by: .seconds(1))
        for uid in ["bob", "carol"] {
            #expect(await party.waitForUnread(uid, 2, in: group.id) != nil)
            #expect(party.unreadPushes(to: uid, in: group.id) == [1, 2])
        }
        try await party.stop()
    }

    @Test func aCountPushedWithItsMessageIsNotPushedAgainWhenTheIntervalEnds() async throws {
        let party = try await party()
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob"])
        try await party.fence()
        party.mark()
        try await party["alice"].sendTextMessage("one", to: .conversation(group.id))
        _ = await party.waitForUnread("bob", 1, in: group.id)
        // Nothing changed since the push, so nothing more is pushed for it. Had the first message been recorded again
        // (as a change still to push), its count would have gone out a second time: [1, 1, 2].
        party.clock.advance(by: .seconds(1))
        try await party["alice"].sendTextMessage("two", to: .conversation(group.id))
        #expect(await party.waitForUnread("bob", 2, in: group.id) != nil)
        #expect(party.unreadPushes(to: "bob", in: group.id) == [1, 2])
        try await party.stop()
    }

    // MARK: messages

    @Test func aMessageWithPartsMetadataAndAlertReachesEveryParticipantOnce() async throws {
        let party = try await party()
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob"])
        try await party.fence()
        party.mark()
        let parts: [MessagePart] = [.text("Here"), .data(["lat": 48.85, "lon": 2.35], name: "location")]
        let message = try await party["bob"].sendMessage(
            parts: parts, to: .conversation(group.id), metadata: ["priority": "high"], alert: "Bob shared a location"
        )
        try await party.fence()
        for uid in ["alice", "bob"] {
            let events = party.observed(by: uid)
            #expect(events.map(\.payload) == [.messageSent(message)], "\(uid)")
            // What was sent, not only what the server answered: a server that dropped a part, the metadata or the
            // alert would answer and publish the same wrong message.
            guard case .messageSent(let received) = events.first?.payload else { continue }
            #expect(received.parts == parts && received.sender == "bob" && received.conversationId == group.id)
            #expect(received.metadata == ["priority": "high"] && received.alert == "Bob shared a location")
            #expect(events.first?.seq == message.seq && events.first?.id == "\(group.id):\(message.seq)")
        }
        for uid in ["carol", "dave"] { #expect(party.observed(by: uid).isEmpty, "\(uid)") }
        try await party.stop()
    }

    // MARK: presence

    @Test func presenceReachesContactsAndAllUserSubscribersWithoutFlapping() async throws {
        let party = try await party(["alice", "bob", "carol", "erin"], presenceForAll: ["erin"])
        _ = try await party["alice"].createGroup(name: "Team", participants: ["bob"])
        try await party.fence()
        party.mark()
        #expect(try await party["alice"].presence(of: "bob").online)

        // A quick reconnect (within the 5 s grace) shows nothing, whichever the server handles first.
        await party["bob"].disconnect()
        try await party["bob"].connect()
        party.clock.advance(by: .seconds(10))
        try await party.fence()
        for uid in ["alice", "carol", "erin"] {
            #expect(party.observed(by: uid, ignoring: [.unreadUpdate]).isEmpty, "\(uid)")
        }

        // Gone for good: offline after the grace, to contacts and subscribers only.
        party.mark()
        await party["bob"].disconnect()
        // The offline timer starts when the server sees the socket close; wait for it, then let the grace pass.
        await party.clock.sleeper(at: party.clock.now.offset + .seconds(5))
        party.clock.advance(by: .seconds(5))
        for uid in ["alice", "erin"] {
            let offline = await party.waitFor(uid) { $0.name == .presenceUpdate }
            guard case .presenceUpdated(let presence) = offline?.payload else {
                Issue.record("\(uid)")
                continue
            }
            #expect(presence.uid == "bob" && !presence.online && presence.lastSeenAt != nil)
        }
        #expect(try await !party["alice"].presence(of: "bob").online)

        try await party["bob"].connect()
        for uid in ["alice", "erin"] {
            let online = await party.waitFor(uid) { event in
                if case .presenceUpdated(let presence) = event.payload { return presence.online }
                return false
            }
            #expect(online?.payload == .presenceUpdated(Presence(uid: "bob", online: true)))
        }
        try await party.fence()
        #expect(party.observed(by: "carol", ignoring: [.unreadUpdate]).isEmpty)
        try await party.stop()
    }
}
