import Foundation
import ParleyProtocol
import ParleyStore
import Testing

/// Silent and system messages on every backend: docs/PROTOCOL.md, "Silent and system messages".
extension StoreConformanceTests {
    /// A send of `sender` (empty: a system message of the app's server), silent or not, with push queued as the server
    /// does when push is on.
    func special(
        _ conversationId: String = "c_g", from sender: String, text: String = "hi", silent: Bool = false,
        mentions: [String]? = nil, replyTo: String? = nil, parts: [MessagePart]? = nil, clientId: String? = nil,
        at now: Int64 = 20
    ) -> Command {
        var send = Command.SendMessage(
            appId: Self.appId, conversationId: conversationId, sender: sender,
            messageId: "m_\(UUID().uuidString.prefix(8))", clientMessageId: clientId, parts: parts ?? [.text(text)],
            metadata: nil, alert: nil, replyTo: replyTo, mentions: mentions, now: now, queuesPush: true
        )
        send.silent = silent
        send.system = sender.isEmpty
        return .sendMessage(send)
    }

    func sent(_ store: any ParleyStore, _ command: Command) async throws -> Message {
        guard case .message(let message, _) = try await apply(store, command).outcome else {
            throw StoreTestError.noMessage
        }
        return message
    }

    func unreadOf(_ store: any ParleyStore, _ uid: String) async throws -> Int {
        try await store.unread(appId: Self.appId, uid: uid, conversationIds: nil).total
    }

    @Test(arguments: Backend.allCases) func aSilentMessageRaisesNoUnreadMentionOrPush(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])
        let loud = try await sent(store, special(from: "alice", text: "one"))
        #expect(try await unreadOf(store, "bob") == 1)
        #expect(try await store.pushQueueDepth().outbox == 1)
        let quiet = try await sent(store, special(from: "alice", text: "two @bob", silent: true, mentions: ["bob"]))
        #expect(quiet.silent == true && quiet.system == nil && quiet.mentions == ["bob"])
        // Stored and delivered like any message, counted by nobody.
        #expect(try await history(store).map(\.text) == ["one", "two @bob"])
        #expect(try await history(store).last?.silent == true)
        #expect(try await unreadOf(store, "bob") == 1)
        #expect(try await unreadOf(store, "carol") == 1)
        #expect(try await store.unreadMentions(appId: Self.appId, uid: "bob", after: nil, limit: 10).isEmpty)
        #expect(try await store.pushQueueDepth().outbox == 1)
        // The next loud message counts one more; reading up to the silent one reads what was before it.
        _ = try await sent(store, special(from: "carol", text: "three"))
        #expect(try await unreadOf(store, "bob") == 2)
        let mark = Command.markReceipt(
            .init(appId: Self.appId, conversationId: "c_g", uid: "bob", deliveredSeq: nil, readSeq: quiet.seq, now: 30))
        _ = try await apply(store, mark)
        #expect(try await unreadOf(store, "bob") == 1)
        // An edit records no unread mention of a silent message either; deleting it changes no count.
        _ = try await apply(store, edit(quiet, by: "alice", text: "two @carol", mentions: ["carol"]))
        #expect(try await store.unreadMentions(appId: Self.appId, uid: "carol", after: nil, limit: 10).isEmpty)
        _ = try await apply(store, delete(quiet, by: "alice"))
        #expect(try await unreadOf(store, "bob") == 1)
        // carol's own message read everything before it.
        #expect(try await unreadOf(store, "carol") == 0)
        #expect(try await history(store).first { $0.id == quiet.id }?.silent == true)
        _ = loud
    }

    @Test(arguments: Backend.allCases) func aSilentReplyCountsInItsThread(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])
        let parent = try await sent(store, special(from: "alice", text: "question"))
        let reply = try await sent(store, special(from: "bob", text: "quiet answer", silent: true, replyTo: parent.id))
        #expect(try await history(store).first?.replyCount == 1)
        _ = try await apply(store, delete(reply, by: "bob"))
        #expect(try await history(store).first?.replyCount == nil)
        #expect(try await unreadOf(store, "alice") == 0)
    }

    @Test(arguments: Backend.allCases) func aSystemMessageNeedsNoParticipantAndCountsForEveryone(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])
        let result = try await apply(store, special(from: "", text: "Maintenance at 22:00", clientId: "notice-1"))
        guard case .message(let notice, false) = result.outcome else { throw StoreTestError.noMessage }
        #expect(notice.system == true && notice.sender == "" && notice.silent == nil)
        #expect(result.events.first?.event.context.createdBy == nil)
        #expect(Set(result.recipients) == ["alice", "bob"])
        // Unread for every participant (nobody sent it); a push is queued.
        #expect(try await unreadOf(store, "alice") == 1)
        #expect(try await unreadOf(store, "bob") == 1)
        #expect(try await store.pushQueueDepth().outbox == 1)
        // A retry is stored once.
        guard
            case .message(let again, true) = try await apply(
                store, special(from: "", text: "Maintenance at 22:00", clientId: "notice-1")
            ).outcome
        else { throw StoreTestError.noMessage }
        #expect(again.id == notice.id)
        // Silent too; no file; not to a deleted, unknown or other app's conversation.
        let quiet = try await sent(store, special(from: "", text: "log rotated", silent: true))
        #expect(quiet.system == true && quiet.silent == true)
        #expect(try await unreadOf(store, "bob") == 1)
        let file = MessagePart(
            type: .file, file: FileInfo(id: "f_1", name: "a", contentType: "text/plain", size: 1, sha256: "ab"))
        #expect(try await refusal(store, special(from: "", parts: [file])) == .badRequest)
        #expect(try await refusal(store, special("c_nope", from: "")) == .conversationNotFound)
        var foreign = Command.SendMessage(
            appId: Self.otherApp, conversationId: "c_g", sender: "", messageId: "m_x", clientMessageId: nil,
            parts: [.text("x")], metadata: nil, alert: nil, now: 20)
        foreign.system = true
        #expect(try await refusal(store, .sendMessage(foreign)) == .conversationNotFound)
        _ = try await apply(
            store, .deleteConversation(.init(appId: Self.appId, conversationId: "c_g", actor: "alice", now: 40)))
        #expect(try await refusal(store, special(from: "")) == .conversationNotFound)
        // An empty sender is never a participant's send.
        var forged = Command.SendMessage(
            appId: Self.appId, conversationId: "c_g", sender: "", messageId: "m_y", clientMessageId: nil,
            parts: [.text("x")], metadata: nil, alert: nil, now: 20)
        forged.system = false
        #expect(try await refusal(store, .sendMessage(forged)) == .conversationNotFound)
    }
}
