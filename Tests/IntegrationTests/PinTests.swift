import Foundation
import Parley
import ParleyServer
import ParleyTesting
import Testing

/// Pinned messages live through the SDK and the REST API: who may pin (the group's roles, both of a direct
/// conversation, the app's server), the events every participant gets and nobody else, the list, the
/// ``MessageList``'s pins, and the answers to bad requests.
@Suite(.timeLimit(.minutes(3))) struct PinTests {
    typealias Party = EventCatalogTests.Party

    func expectError(
        _ code: ErrorCode, status: Int, sourceLocation: SourceLocation = #_sourceLocation,
        _ body: () async throws -> Void
    ) async {
        do {
            try await body()
            Issue.record("expected \(code)", sourceLocation: sourceLocation)
        } catch let error as ParleyError {
            #expect(error.code == code && error.status == status, "\(error)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("unexpected \(error)", sourceLocation: sourceLocation)
        }
    }

    @Test func aPinReachesEveryParticipantAndTheListShowsIt() async throws {
        let party = try await EventCatalogTests().party()
        let group = try await party["alice"].createGroup(name: "Team", participants: ["bob", "carol"])
        let plan = try await party["bob"].sendTextMessage("the plan", to: .conversation(group.id))
        let list = try await party["carol"].messageList(conversationId: group.id)
        try await party.fence()
        party.mark()

        // A member may not pin by default.
        await expectError(.forbidden, status: 403) { try await party["bob"].pinMessage(plan.id, in: group.id) }
        let pin = try await party["alice"].pinMessage(plan.id, in: group.id)
        #expect(pin.messageId == plan.id && pin.messageSeq == plan.seq && pin.pinnedBy == "alice")
        try await party.fence()
        for uid in EventCatalogTests.everyone {
            let observed = party.observed(by: uid)
            if uid == "dave" {
                #expect(observed.isEmpty)
                continue
            }
            #expect(observed.map(\.payload) == [.messagePinned(pin)], "\(uid)")
            #expect(observed.first?.context.createdBy == "alice")
        }
        #expect(party.listeners["bob"]!.everyEventCalledItsMethod)
        #expect(await eventually { list.messages.first { $0.id == plan.id }?.pin == pin })

        let pinned = try await party["carol"].fetchPinnedMessages(in: group.id)
        #expect(pinned.messages.map(\.id) == [plan.id] && pinned.messages.first?.pin == pin)
        #expect(pinned.lastSeq == pin.messageSeq + 1)
        #expect(try await party["carol"].fetchMessage(plan.id, in: group.id).pin == pin)
        // An outsider learns nothing.
        await expectError(.conversationNotFound, status: 404) {
            _ = try await party["dave"].fetchPinnedMessages(in: group.id)
        }
        await expectError(.conversationNotFound, status: 404) {
            try await party["dave"].pinMessage(plan.id, in: group.id)
        }

        // The app's server unpins and pins too; an unpin carries the pin as it was.
        party.mark()
        let admin = ParleyAdmin(serverURL: party.server.baseURL, restAPIKey: party.server.app.restAPIKey)
        try await admin.unpinMessage(plan.id, in: group.id)
        let byApp = try await admin.pinMessage(plan.id, in: group.id)
        #expect(byApp.pinnedBy == nil)
        try await party.fence()
        #expect(party.observed(by: "bob").map(\.payload) == [.messageUnpinned(pin), .messagePinned(byApp)])
        #expect(await eventually { list.messages.first { $0.id == plan.id }?.pin == byApp })
        #expect(try await admin.fetchPinnedMessages(in: group.id).messages.first?.pin == byApp)

        // Deleting the message unpins it, with the deletion as the only event.
        party.mark()
        _ = try await party["bob"].deleteMessage(plan.id, in: group.id)
        try await party.fence()
        #expect(party.observed(by: "carol").map(\.name) == [.messageDelete])
        #expect(try await party["carol"].fetchPinnedMessages(in: group.id).messages.isEmpty)
        #expect(await eventually { list.messages.first { $0.id == plan.id }?.pin == nil })
        list.close()
        await expectError(.messageDeleted, status: 410) { try await party["alice"].pinMessage(plan.id, in: group.id) }
        try await party.stop()
    }

    @Test func bothOfADirectConversationPinAndTheOwnerLetsMembersPin() async throws {
        let party = try await EventCatalogTests().party(["alice", "bob", "carol"])
        let direct = try await party["alice"].directConversation(with: "bob")
        let address = try await party["alice"].sendTextMessage("12 Main St", to: .conversation(direct.id))
        try await party["bob"].pinMessage(address.id, in: direct.id)
        #expect(try await party["alice"].fetchPinnedMessages(in: direct.id).messages.map(\.id) == [address.id])
        try await party["alice"].unpinMessage(address.id, in: direct.id)
        #expect(try await party["bob"].fetchPinnedMessages(in: direct.id).messages.isEmpty)

        let group = try await party["alice"].createGroup(name: "G", participants: ["bob"])
        let note = try await party["bob"].sendTextMessage("note", to: .conversation(group.id))
        await expectError(.forbidden, status: 403) { try await party["bob"].pinMessage(note.id, in: group.id) }
        let roles = try await party["alice"].updateConversation(
            group.id, roles: ConversationRolesChange(member: .init(canPinMessages: true)))
        #expect(roles.roles.member.canPinMessages && roles.roles.owner.canPinMessages)
        try await party["bob"].pinMessage(note.id, in: group.id)
        #expect(try await party["alice"].fetchPinnedMessages(in: group.id).messages.first?.pin?.pinnedBy == "bob")
        try await party.stop()
    }

    @Test func badPinRequestsGetTheirDocumentedAnswers() async throws {
        let server = try await TestServer.start()
        let alice = try await server.login("alice")
        let bob = try await server.login("bob")
        let group = try await server.createConversation(token: alice, with: ["bob"])
        let message = try await server.request(
            "POST", "/v1/conversations/\(group.id)/messages", token: bob,
            body: SendMessageRequest(parts: [.text("hi")])
        ).decode(Message.self)
        let base = "/v1/conversations/\(group.id)/messages"
        // No credentials, a wrong token, a wrong key.
        #expect(try await server.request("PUT", "\(base)/\(message.id)/pin").status == 401)
        #expect(try await server.request("PUT", "\(base)/\(message.id)/pin", token: "pt_wrong").status == 401)
        #expect(try await server.request("GET", "/v1/conversations/\(group.id)/pins", apiKey: "nope").status == 401)
        // An id that is not one, a message or conversation that does not exist.
        let long = String(repeating: "m", count: 5000)
        let tooLong = try await server.request("PUT", "\(base)/\(long)/pin", token: alice)
        #expect(tooLong.status == 400 || tooLong.status == 414 || tooLong.status == 431)
        #expect(try await server.request("PUT", "\(base)/m%00x/pin", token: alice).errorCode == .badRequest)
        #expect(try await server.request("PUT", "\(base)/m_nope/pin", token: alice).errorCode == .messageNotFound)
        let otherConversation = try await server.request(
            "PUT", "/v1/conversations/c_nope/messages/\(message.id)/pin", token: alice)
        #expect(otherConversation.status == 404 && otherConversation.errorCode == .conversationNotFound)
        // A body is not wanted and changes nothing.
        let withBody = try await server.request(
            "PUT", "\(base)/\(message.id)/pin", token: alice, body: ["pinnedBy": "mallory"])
        #expect(withBody.status == 200)
        #expect(try withBody.decode(MessagePin.self).pinnedBy == "alice")
        // Unpinning twice is 204 both times.
        #expect(try await server.request("DELETE", "\(base)/\(message.id)/pin", token: alice).status == 204)
        #expect(try await server.request("DELETE", "\(base)/\(message.id)/pin", token: alice).status == 204)
        // The list of a conversation of another app is not found with this app's key.
        let pins = try await server.request(
            "GET", "/v1/conversations/c_nope/pins", apiKey: server.app.restAPIKey)
        #expect(pins.errorCode == .conversationNotFound)
        try await server.stop()
    }
}
