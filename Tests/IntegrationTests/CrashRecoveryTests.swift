import Foundation
import ParleyProtocol
import ParleyServer
import ParleyTesting
import Testing

/// A server on SQLite killed with SIGKILL, its log's tail not filed yet (the message-id and client-message-id tables
/// are filed every 256 events, SQLiteStore+LogIndex.swift), restarts on the same data directory with every message:
/// found by id, in history, counted once in unread counts, and a repeat of any client message id is still the first
/// message, never a second one.
@Suite struct CrashRecoveryTests {
    @Test func aKilledServerRestartsWithEveryMessageAndEveryClientIdOnce() async throws {
        let directory = try TemporaryDirectory(prefix: "parley-crash")
        let store = try openSQLiteStore(in: directory.path)
        let app = try await AppProvisioning.createApp(in: store, name: "Crash")
        try await store.close()
        let arguments = ["--data-dir", directory.path, "--messages-per-second-per-user", "0"]
        let first = try await ServerProcess.start(label: "before-kill", app: app, arguments: arguments)
        let alice = try await first.login("alice")
        _ = try await first.login("bob")
        let conversation = try await first.createConversation(token: alice, with: ["bob"])
        // More than one filing's worth, so that some are filed and the last ones are in the tail when it dies.
        let count = 300
        var sent: [String: Message] = [:]
        for number in 0..<count {
            let clientId = TimeOrderedUUID.make().uuidString
            let answer = try await first.request(
                "POST", "/v1/conversations/\(conversation.id)/messages", token: alice,
                body: SendMessageRequest(clientMessageId: clientId, parts: [.text("message \(number)")])
            )
            #expect(answer.status == 201)
            sent[clientId] = try answer.decode(Message.self)
        }
        first.kill()
        await first.stop()

        let second = try await ServerProcess.start(label: "after-kill", app: app, arguments: arguments)
        defer { second.kill() }
        let token = try await second.login("alice")
        for (clientId, message) in sent {
            let repeated = try await second.request(
                "POST", "/v1/conversations/\(conversation.id)/messages", token: token,
                body: SendMessageRequest(clientMessageId: clientId, parts: [.text("again")])
            )
            #expect(repeated.status == 200, "a repeat of \(clientId) after the restart")
            let first = try repeated.decode(Message.self)
            #expect(first.id == message.id && first.seq == message.seq && first.text == message.text)
            let byId = try await second.request(
                "GET", "/v1/conversations/\(conversation.id)/messages/\(message.id)", token: token)
            #expect(byId.status == 200 && (try? byId.decode(Message.self).seq) == message.seq)
        }
        var history: [Message] = []
        var cursor: String?
        repeat {
            let page: MessagePage = try await second.request(
                "GET",
                "/v1/conversations/\(conversation.id)/messages?limit=200" + (cursor.map { "&cursor=\($0)" } ?? ""),
                token: token
            ).decode()
            history += page.messages
            cursor = page.nextCursor
        } while cursor != nil && history.count <= count
        #expect(history.count == count)
        #expect(Set(history.map(\.id)) == Set(sent.values.map(\.id)))
        // Counted once: bob has all 300 unread, alice none, her read position at her last message.
        let bobsUnread: UnreadSummary = try await second.request(
            "GET", "/v1/me/unread", token: try await second.login("bob")
        ).decode()
        #expect(bobsUnread.total == count)
        let alicesUnread: UnreadSummary = try await second.request("GET", "/v1/me/unread", token: token).decode()
        #expect(alicesUnread.total == 0)
        #expect(alicesUnread.conversations.first?.readSeq == sent.values.map(\.seq).max())
        let next = try await second.request(
            "POST", "/v1/conversations/\(conversation.id)/messages", token: token,
            body: SendMessageRequest(clientMessageId: TimeOrderedUUID.make().uuidString, parts: [.text("after")])
        )
        #expect(try next.decode(Message.self).seq == sent.values.map(\.seq).max()! + 1)
        await second.stop()
    }
}
