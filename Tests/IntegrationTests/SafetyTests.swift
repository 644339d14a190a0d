import Foundation
import NIOConcurrencyHelpers
import Parley
import ParleyServer
import ParleyTesting
import Testing

/// Blocks, reports, mutes and bans live, through the SDK and raw REST: docs/PROTOCOL.md, "Blocks and reports".
@Suite(.timeLimit(.minutes(2))) struct SafetyTests {
    typealias Party = EventCatalogTests.Party

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

    @Test func aBlockStopsDirectWritingBothWays() async throws {
        let party = try await EventCatalogTests().party()
        let (alice, bob) = (party["alice"], party["bob"])
        let hello = try await alice.sendTextMessage("hello", to: .user("bob"))
        try await alice.blockUser("bob")
        #expect(alice.isBlocked("bob"))

        // Over the socket (the SDK's way) and over REST, from either side; reactions too.
        #expect(await code { try await bob.sendTextMessage("hi?", to: .user("alice")) } == .blocked)
        #expect(await code { try await alice.sendTextMessage("bye", to: .user("bob")) } == .blocked)
        #expect(await code { try await bob.addReaction("👍", to: .id(hello.id), in: hello.conversationId) } == .blocked)
        let bobsToken = try await party.server.login("bob")
        let overREST = try await party.server.request(
            "POST", "/v1/conversations/\(hello.conversationId)/messages", token: bobsToken,
            body: SendMessageRequest(parts: [.text("still?")])
        )
        #expect(overREST.status == 403 && overREST.errorCode == .blocked)
        // The blocked user learns no more than that: the message does not say who blocked whom.
        #expect(try overREST.decode(ErrorResponse.self).error.message == "You cannot write to this user.")
        // No new direct conversation either, whoever starts it.
        try await alice.blockUser("dave")
        #expect(await code { try await party["dave"].sendTextMessage("hi", to: .user("alice")) } == .blocked)
        #expect(Set(try await alice.fetchBlockedUsers().map(\.uid)) == ["dave", "bob"])

        // Lifted: they write again; nothing was stored meanwhile.
        try await alice.unblockUser("bob")
        let after = try await bob.sendTextMessage("hi again", to: .user("alice"))
        let history = try await alice.fetchMessages(conversationId: hello.conversationId).messages
        #expect(history.map(\.text) == ["hello", "hi again"] && history.last?.id == after.id)
        try await party.stop()
    }

    @Test func theBlockerGetsNoTypingPresenceOrGroupMessagesOfTheBlocked() async throws {
        // alice also subscribes to every user's presence: a block holds there too.
        let party = try await EventCatalogTests().party(presenceForAll: ["alice"])
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob", "carol"])
        let before = try await party["bob"].sendTextMessage("before", to: .conversation(group.id))
        try await party.fence()
        party.mark()
        try await party["alice"].blockUser("bob")
        // What alice's client showed of bob goes offline at once.
        let offline = await party.waitFor("alice") { $0.name == .presenceUpdate }
        #expect(offline?.payload == .presenceUpdated(Presence(uid: "bob", online: false)))
        #expect(try await !party["alice"].presence(of: "bob").online)
        #expect(try await party["carol"].presence(of: "bob").online)

        party.mark()
        // bob goes away for good and comes back.
        await party["bob"].disconnect()
        await party.clock.sleeper(at: party.clock.now.offset + .seconds(5))
        party.clock.advance(by: .seconds(5))
        let carolSawOffline = await party.waitFor("carol") { event in
            if case .presenceUpdated(let presence) = event.payload { return presence.uid == "bob" && !presence.online }
            return false
        }
        #expect(carolSawOffline != nil)
        try await party["bob"].connect()
        let carolSawOnline = await party.waitFor("carol") { event in
            if case .presenceUpdated(let presence) = event.payload { return presence.uid == "bob" && presence.online }
            return false
        }
        #expect(carolSawOnline != nil)
        await party["bob"].waitUntilConnected()
        #expect(await party["bob"].startTyping(in: group.id))
        let bobs = try await party["bob"].sendTextMessage("from bob", to: .conversation(group.id))
        let carols = try await party["carol"].sendTextMessage("from carol", to: .conversation(group.id))
        try await party.fence()

        // carol sees all of it; alice only carol's message.
        let carolSaw = party.observed(by: "carol", ignoring: [.unreadUpdate]).map(\.name)
        #expect(carolSaw.contains(.participantTyping) && carolSaw.contains(.presenceUpdate))
        #expect(carolSaw.contains(.messageSent))
        let aliceSaw = party.observed(by: "alice", ignoring: [.unreadUpdate])
        #expect(aliceSaw.map(\.payload) == [.messageSent(carols)], "\(aliceSaw.map(\.name))")
        // alice's list of the group leaves bob's messages out; carol's has them.
        let alicesList = try await party["alice"].messageList(conversationId: group.id)
        #expect(!alicesList.messages.contains { $0.sender == "bob" })
        #expect(alicesList.messages.map(\.id).contains(carols.id))
        let carolsList = try await party["carol"].messageList(conversationId: group.id)
        #expect(carolsList.messages.map(\.id).contains(bobs.id) && carolsList.messages.map(\.id).contains(before.id))
        // Sends in groups are not refused: bob's message is stored.
        #expect(try await party["carol"].fetchMessage(bobs.id, in: group.id).text == "from bob")
        for list in [alicesList, carolsList] { list.close() }
        try await party.stop()
    }

    @Test func anIndicatorOnWhenTheBlockIsMadeGoesOffAndNoneComesOnAfter() async throws {
        let party = try await EventCatalogTests().party()
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob", "carol"])
        try await party.fence()
        party.mark()
        #expect(await party["bob"].startTyping(in: group.id))
        let on = await party.waitFor("alice") { $0.name == .participantTyping }
        #expect(on?.context.createdBy == "bob")
        try await party["alice"].blockUser("bob")
        party.mark()
        #expect(await party["bob"].stopTyping(in: group.id))
        let off = await party.waitFor("alice") { $0.name == .participantTypingOff }
        #expect(off?.payload == .participantTypingOff(TypingIndicator(uid: "bob")))
        // From now on, nothing of bob's typing reaches alice; carol still sees it.
        party.clock.advance(by: .seconds(5))
        party.mark()
        #expect(await party["bob"].startTyping(in: group.id))
        #expect(await party["bob"].stopTyping(in: group.id))
        _ = await party.waitFor("carol") { $0.name == .participantTypingOff }
        try await party.fence()
        #expect(party.observed(by: "alice", ignoring: [.unreadUpdate, .presenceUpdate]).isEmpty)
        try await party.stop()
    }

    @Test func aMutedParticipantReadsButCannotSendOrType() async throws {
        let server = try await TestServer.startForEdgeTests(configure: TestServer.patientDeadlines)
        let alice = try await server.login("alice")
        let bob = try await server.login("bob")
        let carol = try await server.login("carol")
        let group = try await server.createConversation(token: alice, with: ["bob", "carol"])
        let mutePath = "/v1/conversations/\(group.id)/participants/bob/mute"
        let carolsSocket = WebSocketProbe(url: server.webSocketURL, token: carol)
        let bobsSocket = WebSocketProbe(url: server.webSocketURL, token: bob)
        for socket in [carolsSocket, bobsSocket] { _ = try await socket.nextFrame() }

        // Refused: a member muting, a time in the past, a direct conversation, no credentials.
        let byMember = try await server.request(
            "PUT", "/v1/conversations/\(group.id)/participants/alice/mute", token: carol, body: MuteRequest()
        )
        #expect(byMember.status == 403, "\(byMember.status) \(String(decoding: byMember.body, as: UTF8.self))")
        #expect(
            try await server.request("PUT", mutePath, token: alice, body: MuteRequest(until: 1)).errorCode
                == .badRequest)
        #expect(try await server.request("PUT", mutePath, body: MuteRequest()).status == 401)
        let direct = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        let inDirect = try await server.request(
            "PUT", "/v1/conversations/\(direct.id)/participants/bob/mute", token: alice, body: MuteRequest()
        )
        #expect(inDirect.status == 403)

        // The owner mutes bob: everyone is told; bob can read, not send (REST or socket) nor type.
        let muted = try await server.request("PUT", mutePath, token: alice, body: MuteRequest())
        #expect(muted.status == 200 && (try? muted.decode(Participant.self))?.muted == true)
        let told = try await carolsSocket.nextFrame { frame in
            if case .event(let event) = frame { return event.event.name == .participantUpdated }
            return false
        }
        guard case .event(let update) = told, case .participantUpdated(let participant) = update.event.payload else {
            Issue.record("no participantUpdated")
            return
        }
        #expect(participant.uid == "bob" && participant.muted == true && participant.mutedUntil == nil)
        let refused = try await server.request(
            "POST", "/v1/conversations/\(group.id)/messages", token: bob, body: SendMessageRequest(parts: [.text("x")])
        )
        #expect(refused.status == 403 && refused.errorCode == .muted)
        try await bobsSocket.send(.send(SendFrame(ref: "s1", conversationId: group.id, parts: [.text("x")])))
        try await bobsSocket.send(.typing(TypingFrame(conversationId: group.id, isTyping: true)))
        var codes: [ErrorCode] = []
        while codes.count < 2 {
            if case .error(let error) = try await bobsSocket.nextFrame() { codes.append(error.code) }
        }
        #expect(codes == [.muted, .muted])
        #expect(try await server.request("GET", "/v1/conversations/\(group.id)/messages", token: bob).status == 200)

        // The app's server lifts it (and could mute anyone): bob writes again.
        let lifted = try await server.request("DELETE", mutePath, apiKey: server.app.restAPIKey)
        #expect(lifted.status == 200 && (try? lifted.decode(Participant.self)).map { $0.muted == nil } == true)
        let sent = try await server.request(
            "POST", "/v1/conversations/\(group.id)/messages", token: bob, body: SendMessageRequest(parts: [.text("ok")])
        )
        #expect(sent.status == 201)
        for socket in [carolsSocket, bobsSocket] { await socket.close() }
        try await server.stop()
    }

    /// The stores a live test runs on: SQLite, and PostgreSQL when the run has one (scripts/test starts it).
    enum LiveStore: String, CaseIterable, CustomTestStringConvertible {
        case sqlite
        case postgres

        static var allCases: [LiveStore] { PostgresTestDatabase.isConfigured ? [.sqlite, .postgres] : [.sqlite] }
        var testDescription: String { rawValue }

        /// A server on this store, and the database to drop once it is stopped (PostgreSQL).
        func server(clock: any Clock<Duration>) async throws -> (TestServer, PostgresTestDatabase?) {
            switch self {
            case .sqlite:
                return (
                    try await TestServer.startForEdgeTests(clock: clock, configure: TestServer.patientDeadlines), nil
                )
            case .postgres:
                let database = try await PostgresTestDatabase.create()
                return (
                    try await TestServer.startForEdgeTests(
                        databaseURL: database.url, clock: clock, configure: TestServer.patientDeadlines), database
                )
            }
        }
    }

    /// Reads a socket's frames until `name`'s event; returns the events named in `names` it read on the way, in order.
    func events(_ names: Set<EventName>, until name: EventName, on socket: WebSocketProbe) async throws -> [Event] {
        var seen: [Event] = []
        while seen.last?.name != name {
            if case .event(let frame) = try await socket.nextFrame(), names.contains(frame.event.name) {
                seen.append(frame.event)
            }
        }
        return seen
    }

    @Test(arguments: LiveStore.allCases) func aBanRemovesAndKeepsOutUntilLiftedOrOver(_ live: LiveStore) async throws {
        let clock = ManualClock()
        let (server, database) = try await live.server(clock: clock)
        let key = server.app.restAPIKey
        var tokens: [String: String] = [:]
        for uid in ["alice", "bob", "carol", "dave", "erin"] { tokens[uid] = try await server.login(uid) }
        let (alice, bob, carol) = (tokens["alice"]!, tokens["bob"]!, tokens["carol"]!)
        let (dave, erin) = (tokens["dave"]!, tokens["erin"]!)
        let group = try await server.createConversation(token: alice, with: ["bob", "carol", "dave"], isPublic: true)
        let groupPath = "/v1/conversations/\(group.id)"
        func banPath(_ uid: String) -> String { "\(groupPath)/bans/\(uid)" }
        let promoted = try await server.request(
            "PATCH", "\(groupPath)/participants/carol", token: alice, body: UpdateParticipantRequest(role: .admin)
        )
        #expect(promoted.status == 200)
        let bobsSocket = WebSocketProbe(url: server.webSocketURL, token: bob)
        let carolsSocket = WebSocketProbe(url: server.webSocketURL, token: carol)
        let erinsSocket = WebSocketProbe(url: server.webSocketURL, token: erin)
        for socket in [bobsSocket, carolsSocket, erinsSocket] { _ = try await socket.nextFrame() }

        // Refused, by every caller that must be: a member (a member, someone not in the group), an admin and the
        // app's server banning the owner, oneself, an outsider of the public group, no credentials; a direct
        // conversation. Listing: a member, an outsider, no credentials.
        let refusals: [(token: String?, apiKey: String?, uid: String, status: Int, code: ErrorCode)] = [
            (dave, nil, "bob", 403, .forbidden), (dave, nil, "erin", 403, .forbidden),
            (carol, nil, "alice", 403, .forbidden), (nil, key, "alice", 403, .forbidden),
            (alice, nil, "alice", 400, .badRequest), (erin, nil, "bob", 403, .notAParticipant),
        ]
        for refusal in refusals {
            let answer = try await server.request(
                "PUT", banPath(refusal.uid), token: refusal.token, apiKey: refusal.apiKey, body: BanRequest()
            )
            #expect(
                answer.status == refusal.status && answer.errorCode == refusal.code,
                "\(refusal.uid): \(answer.status) \(answer.errorCode?.rawValue ?? "")")
        }
        #expect(try await server.request("PUT", banPath("bob"), body: BanRequest()).status == 401)
        let direct = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        let inDirect = try await server.request(
            "PUT", "/v1/conversations/\(direct.id)/bans/bob", token: alice, body: BanRequest()
        )
        #expect(inDirect.status == 403 && inDirect.errorCode == .forbidden)
        #expect(try await server.request("GET", "\(groupPath)/bans", token: dave).errorCode == .forbidden)
        #expect(try await server.request("GET", "\(groupPath)/bans", token: erin).errorCode == .notAParticipant)
        #expect(try await server.request("GET", "\(groupPath)/bans").status == 401)

        // The admin bans bob: his socket and the others' get his removal, then the ban, one after the other.
        let answer = try await server.request(
            "PUT", banPath("bob"), token: carol, body: BanRequest(reason: "spam, again")
        )
        #expect(answer.status == 200)
        let made = try answer.decode(ConversationBan.self)
        #expect(made.uid == "bob" && made.bannedBy == "carol" && made.reason == "spam, again" && made.until == nil)
        for socket in [bobsSocket, carolsSocket] {
            let seen = try await events(
                [.participantRemoved, .participantBanned], until: .participantBanned, on: socket
            )
            #expect(seen.map(\.name) == [.participantRemoved, .participantBanned])
            guard seen.count == 2, case .participantRemoved(let removed) = seen[0].payload else { continue }
            #expect(removed.uid == "bob" && seen[1].payload == .participantBanned(made))
            #expect(seen[0].seq != nil && seen[1].seq == seen[0].seq.map { $0 + 1 })
            #expect(seen.allSatisfy { $0.context.createdBy == "carol" })
        }

        // bob is out: he cannot join, read the group (details, history, participants, events) or be added back (the
        // whole request is refused, naming him).
        for (method, path) in [
            ("POST", "/join"), ("GET", ""), ("GET", "/messages"), ("GET", "/participants"), ("GET", "/events?after=0"),
        ] {
            let refused = try await server.request(method, groupPath + path, token: bob)
            #expect(refused.status == 403 && refused.errorCode == .banned, "\(method) \(path): \(refused.status)")
        }
        let added = try await server.request(
            "POST", "\(groupPath)/participants", token: alice,
            body: AddParticipantsRequest(participants: [.init(uid: "erin"), .init(uid: "bob")])
        )
        #expect(added.status == 403 && added.errorCode == .banned)
        #expect(try added.decode(ErrorResponse.self).error.message.contains("bob"))
        let participants = try await server.request("GET", "\(groupPath)/participants", token: alice)
            .decode(ParticipantList.self).participants.map(\.uid)
        #expect(Set(participants) == ["alice", "carol", "dave"])

        // The owner and the app's server list it; the app's server lifts it: bob is told, and joins again.
        #expect(try await server.request("GET", "\(groupPath)/bans", token: alice).decode(BanList.self).bans == [made])
        #expect(try await server.request("GET", "\(groupPath)/bans", apiKey: key).decode(BanList.self).bans == [made])
        let lifted = try await server.request("DELETE", banPath("bob"), apiKey: key)
        #expect(lifted.status == 200 && (try? lifted.decode(ConversationBan.self)) == made)
        let unbanned = try await events([.participantUnbanned], until: .participantUnbanned, on: bobsSocket)
        #expect(unbanned.first?.payload == .participantUnbanned(made) && unbanned.first?.context.createdBy == nil)
        #expect(try await server.request("POST", "\(groupPath)/join", token: bob).status == 200)
        let again = try await server.request("DELETE", banPath("bob"), apiKey: key)
        #expect(again.status == 404 && again.errorCode == .banNotFound)

        // The app's server bans erin beforehand, for a minute: she is told (she is in no group), and kept out until
        // the minute has passed on the server's clock.
        let now = made.createdAt  // the server's clock has not moved since
        let timed = try await server.request("PUT", banPath("erin"), apiKey: key, body: BanRequest(until: now + 60_000))
        let erinsBan = try timed.decode(ConversationBan.self)
        #expect(timed.status == 200 && erinsBan.bannedBy == nil && erinsBan.until == now + 60_000)
        let told = try await events([.participantBanned], until: .participantBanned, on: erinsSocket)
        #expect(told.first?.payload == .participantBanned(erinsBan))
        #expect(try await server.request("POST", "\(groupPath)/join", token: erin).errorCode == .banned)
        for socket in [bobsSocket, carolsSocket, erinsSocket] { await socket.close() }
        clock.advance(by: .seconds(61))
        #expect(try await server.request("POST", "\(groupPath)/join", token: erin).status == 200)
        #expect(try await server.request("GET", "\(groupPath)/bans", apiKey: key).decode(BanList.self).bans.isEmpty)
        try await server.stop()
        try await database?.drop()
    }

    @Test(arguments: LiveStore.allCases) func bansRefuseHostileInput(_ live: LiveStore) async throws {
        let (server, database) = try await live.server(clock: ContinuousClock())
        let alice = try await server.login("alice")
        _ = try await server.login("bob")
        let group = try await server.createConversation(token: alice, with: ["bob"])
        let other = try await AppProvisioning.createApp(in: server.store, name: "Other")
        let refusals: [(path: String, body: BanRequest, apiKey: String?, status: Int, code: ErrorCode)] = [
            ("/v1/conversations/\(group.id)/bans/bob", BanRequest(until: 1), nil, 400, .badRequest),
            (
                "/v1/conversations/\(group.id)/bans/bob", BanRequest(reason: String(repeating: "x", count: 1_025)), nil,
                400, .fieldTooLarge
            ),
            ("/v1/conversations/\(group.id)/bans/bob", BanRequest(reason: "bell \u{7}"), nil, 400, .badRequest),
            ("/v1/conversations/\(group.id)/bans/a%00b", BanRequest(), nil, 400, .badRequest),
            ("/v1/conversations/\(group.id)/bans/bad%20uid", BanRequest(), nil, 400, .invalidUID),
            ("/v1/conversations/\(group.id)/bans/nobody", BanRequest(), nil, 404, .uidNotFound),
            ("/v1/conversations/c_nope/bans/bob", BanRequest(), nil, 404, .conversationNotFound),
            ("/v1/conversations/c%01x/bans/bob", BanRequest(), nil, 400, .badRequest),
            // Another app's server does not see this app's conversations, nor this app's users.
            ("/v1/conversations/\(group.id)/bans/bob", BanRequest(), other.restAPIKey, 404, .conversationNotFound),
            ("/v1/conversations/\(group.id)/bans/bob", BanRequest(), "rk_wrong", 401, .apiKeyInvalid),
        ]
        for refusal in refusals {
            let answer = try await server.request(
                "PUT", refusal.path, token: refusal.apiKey == nil ? alice : nil, apiKey: refusal.apiKey,
                body: refusal.body
            )
            #expect(
                answer.status == refusal.status && answer.errorCode == refusal.code,
                "\(refusal.path): \(answer.status) \(answer.errorCode?.rawValue ?? "")")
        }
        let notJSON = try await server.request("PUT", "/v1/conversations/\(group.id)/bans/bob", token: alice, body: "x")
        #expect(notJSON.status == 400)
        for (path, status) in [("/v1/conversations/c_nope/bans", 404), ("/v1/conversations/\(group.id)/bans", 404)] {
            #expect(try await server.request("GET", path, apiKey: other.restAPIKey).status == status, "\(path)")
        }
        #expect(try await server.request("DELETE", "/v1/conversations/c_nope/bans/bob", token: alice).status == 404)
        // Nothing of it was stored.
        let bans = try await server.request("GET", "/v1/conversations/\(group.id)/bans", token: alice)
        #expect(try bans.status == 200 && bans.decode(BanList.self).bans.isEmpty)
        try await server.stop()
        try await database?.drop()
    }

    @Test func theSDKBansUnbansAndListsAndTellsTheBannedClient() async throws {
        let party = try await EventCatalogTests().party()
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob", "carol"], isPublic: true)
        let recorder = BanRecorder()
        party["bob"].addEventListener("bans", recorder)
        try await party.fence()
        party.mark()

        // alice bans bob: everyone in the group, bob included, is told he was removed, then banned; dave nothing.
        let made = try await party["alice"].ban("bob", in: group.id, reason: "spam")
        #expect(made.uid == "bob" && made.bannedBy == "alice" && made.reason == "spam" && made.until == nil)
        for uid in ["alice", "bob", "carol"] { _ = await party.waitFor(uid) { $0.name == .participantBanned } }
        try await party.fence()
        for uid in ["alice", "bob", "carol"] {
            let seen = party.observed(by: uid)
            #expect(seen.map(\.name) == [.participantRemoved, .participantBanned], "\(uid)")
            #expect(seen.last?.payload == .participantBanned(made), "\(uid)")
        }
        #expect(party.observed(by: "dave").isEmpty)
        #expect(recorder.banned == [made])
        #expect(await code { try await party["bob"].joinConversation(group.id) } == .banned)
        #expect(await code { try await party["bob"].fetchMessages(conversationId: group.id) } == .banned)
        #expect(try await party["alice"].bans(in: group.id) == [made])
        #expect(await code { try await party["carol"].bans(in: group.id) } == .forbidden)
        #expect(await code { try await party["alice"].ban("alice", in: group.id) } == .badRequest)

        // The app's server lists and lifts it: bob is told, and joins again; it bans dave for an hour, beforehand.
        let admin = ParleyAdmin(serverURL: party.server.baseURL, restAPIKey: party.server.app.restAPIKey)
        #expect(try await admin.bans(in: group.id) == [made])
        party.mark()
        #expect(try await admin.unban("bob", in: group.id) == made)
        let unbanned = await party.waitFor("bob") { $0.name == .participantUnbanned }
        #expect(unbanned?.payload == .participantUnbanned(made))
        _ = try await party["bob"].joinConversation(group.id)
        #expect(await code { try await party["alice"].unban("bob", in: group.id) } == .banNotFound)
        #expect(await code { try await party["bob"].unban("bob", in: group.id) } == .badRequest)
        let until = Date().addingTimeInterval(3_600)
        let daves = try await admin.ban("dave", in: group.id, until: until)
        #expect(daves.bannedBy == nil && daves.until == Int64((until.timeIntervalSince1970 * 1000).rounded()))
        let toldDave = await party.waitFor("dave") { $0.name == .participantBanned }
        #expect(toldDave?.payload == .participantBanned(daves))
        #expect(await code { try await party["dave"].joinConversation(group.id) } == .banned)
        try await party.fence()
        #expect(recorder.unbanned == [made])
        try await party.stop()
    }

    @Test func blocksRefuseWhatIsNotAUserToBlock() async throws {
        let server = try await TestServer.startForEdgeTests(configure: TestServer.patientDeadlines)
        let alice = try await server.login("alice")
        for (path, status, code) in [
            ("/v1/me/blocks/alice", 400, ErrorCode.badRequest),
            ("/v1/me/blocks/nobody", 404, .uidNotFound),
            ("/v1/me/blocks/bad%20uid", 400, .invalidUID),
            ("/v1/me/blocks/a%00b", 400, .badRequest),
        ] {
            let answer = try await server.request("PUT", path, token: alice)
            #expect(
                answer.status == status && answer.errorCode == code,
                "\(path): \(answer.status) \(answer.errorCode?.rawValue ?? "")")
        }
        #expect(try await server.request("PUT", "/v1/me/blocks/bob").status == 401)
        #expect(try await server.request("GET", "/v1/me/blocks", token: alice).decode(BlockList.self).blocks.isEmpty)
        #expect(try await server.request("DELETE", "/v1/me/blocks/nobody", token: alice).status == 204)
        try await server.stop()
    }

    @Test func reportsReachTheAppsModeratorsAndRefuseWhatTheyShould() async throws {
        let server = try await TestServer.startForEdgeTests(configure: TestServer.patientDeadlines)
        let alice = try await server.login("alice")
        let bob = try await server.login("bob")
        let mallory = try await server.login("mallory")
        let group = try await server.createConversation(token: alice, with: ["bob"])
        let message = try await server.request(
            "POST", "/v1/conversations/\(group.id)/messages", token: bob,
            body: SendMessageRequest(parts: [.text("buy now")])
        ).decode(Message.self)
        let messageReport = CreateReportRequest(
            conversationId: group.id, messageId: message.id, reason: .spam, details: "third time today\nsame link"
        )
        let created = try await server.request("POST", "/v1/reports", token: alice, body: messageReport)
        #expect(created.status == 201)
        let report = try created.decode(Report.self)
        #expect(report.uid == "bob" && report.reporter == "alice" && report.message?.text == "buy now")
        #expect(report.state == .open && report.messageId == message.id)
        // Again while open: the same report, 200.
        let again = try await server.request("POST", "/v1/reports", token: alice, body: messageReport)
        let repeated = try again.decode(Report.self)
        #expect(again.status == 200 && repeated.id == report.id)
        let userReport = try await server.request(
            "POST", "/v1/reports", token: alice, body: CreateReportRequest(uid: "bob", reason: .harassment)
        )
        #expect(userReport.status == 201)

        // Refusals: the message of a conversation mallory is not in, no target or two, oneself, long or control
        // characters in the details, an unknown reason, no credentials.
        let refusals: [(String, any Encodable & Sendable, Int, ErrorCode)] = [
            (
                "mallory", CreateReportRequest(conversationId: group.id, messageId: message.id, reason: .spam), 404,
                .conversationNotFound
            ),
            (
                "alice", CreateReportRequest(conversationId: group.id, messageId: "m_nope", reason: .spam), 404,
                .messageNotFound
            ),
            ("alice", CreateReportRequest(reason: .spam), 400, .badRequest),
            (
                "alice",
                CreateReportRequest(conversationId: group.id, messageId: message.id, uid: "bob", reason: .spam), 400,
                .badRequest
            ),
            ("alice", CreateReportRequest(uid: "alice", reason: .spam), 400, .badRequest),
            ("alice", CreateReportRequest(uid: "nobody", reason: .spam), 404, .uidNotFound),
            (
                "alice", CreateReportRequest(uid: "bob", reason: .spam, details: String(repeating: "x", count: 1_025)),
                400, .fieldTooLarge
            ),
            ("alice", CreateReportRequest(uid: "bob", reason: .spam, details: "bell \u{7}"), 400, .badRequest),
            ("alice", ["uid": "bob", "reason": "boring"], 400, .badRequest),
        ]
        let tokens = ["alice": alice, "mallory": mallory]
        for (who, body, status, code) in refusals {
            let answer = try await server.request("POST", "/v1/reports", token: tokens[who], body: AnyEncodable(body))
            #expect(
                answer.status == status && answer.errorCode == code,
                "\(body): \(answer.status) \(answer.errorCode?.rawValue ?? "")")
        }
        #expect(try await server.request("POST", "/v1/reports", body: messageReport).status == 401)

        // The app's server lists and resolves them with the REST API key; a user's token is not enough.
        let key = server.app.restAPIKey
        #expect(try await server.request("GET", "/v1/reports", token: alice).status == 401)
        let firstPage = try await server.request("GET", "/v1/reports?limit=1", apiKey: key).decode(ReportList.self)
        #expect(firstPage.reports.map(\.id) == [report.id])
        let next = try #require(firstPage.nextCursor)
        let secondPage = try await server.request("GET", "/v1/reports?limit=1&cursor=\(next)", apiKey: key)
            .decode(ReportList.self)
        #expect(secondPage.reports.map(\.uid) == ["bob"] && secondPage.reports.first?.messageId == nil)
        #expect(try await server.request("GET", "/v1/reports?cursor=x", apiKey: key).errorCode == .badRequest)
        #expect(try await server.request("GET", "/v1/reports?state=closed", apiKey: key).status == 400)
        let resolved = try await server.request(
            "PATCH", "/v1/reports/\(report.id)", apiKey: key,
            body: UpdateReportRequest(state: .resolved, resolution: "message removed")
        ).decode(Report.self)
        #expect(resolved.state == .resolved && resolved.resolution == "message removed" && resolved.resolvedAt != nil)
        let open = try await server.request("GET", "/v1/reports?state=open", apiKey: key).decode(ReportList.self)
        let reportOfBob = try userReport.decode(Report.self)
        #expect(open.reports.map(\.id) == [reportOfBob.id])
        let unknown = try await server.request(
            "PATCH", "/v1/reports/r_nope", apiKey: key, body: UpdateReportRequest(state: .resolved)
        )
        #expect(unknown.status == 404 && unknown.errorCode == .reportNotFound)
        // The app's server deletes the message (a wrong key is refused): its report keeps what it said.
        let path = "/v1/conversations/\(group.id)/messages/\(message.id)"
        #expect(try await server.request("DELETE", path, apiKey: "rk_wrong").status == 401)
        let removed = try await server.request("DELETE", path, apiKey: key)
        let tombstone = try removed.decode(Message.self)
        #expect(removed.status == 200 && tombstone.isDeleted && tombstone.deletedBy == nil)
        let history = try await server.request("GET", "/v1/conversations/\(group.id)/messages", token: alice)
            .decode(MessagePage.self).messages
        #expect(history.map(\.isDeleted) == [true])
        let kept = try await server.request("GET", "/v1/reports?limit=1", apiKey: key).decode(ReportList.self)
        #expect(kept.reports.first?.message?.text == "buy now")
        try await server.stop()
    }
}

/// Records the bans and unbans its client's listener methods are given.
final class BanRecorder: ParleyEventListener {
    private let bans = NIOLockedValueBox<(banned: [ConversationBan], unbanned: [ConversationBan])>(([], []))

    var banned: [ConversationBan] { bans.withLockedValue { $0.banned } }
    var unbanned: [ConversationBan] { bans.withLockedValue { $0.unbanned } }

    func onParticipantBanned(_ ban: ConversationBan, event: Event) { bans.withLockedValue { $0.banned.append(ban) } }
    func onParticipantUnbanned(_ ban: ConversationBan, event: Event) {
        bans.withLockedValue { $0.unbanned.append(ban) }
    }
}

/// Any encodable value, to send bodies of several types from one list.
struct AnyEncodable: Encodable, Sendable {
    let value: any Encodable & Sendable
    init(_ value: any Encodable & Sendable) { self.value = value }
    func encode(to encoder: any Encoder) throws { try value.encode(to: encoder) }
}
