import Foundation
import GRDB
import ParleyProtocol
import ParleyServer
import ParleyStoreSQLite
import ParleyTesting
import Testing

/// `parley-server backup`: a consistent copy of the SQLite database taken while the server writes (README, "Backup
/// and restore").
@Suite(.timeLimit(.minutes(2))) struct BackupTests {
    @Test func aBackupTakenWhileMessagesFlowRestoresToOneConsistentMoment() async throws {
        let server = try await TestServer.start { $0.edge.messagesPerUser = nil }
        let alice = try await server.login("alice")
        let bob = try await server.login("bob")
        let conversation = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        func send(_ text: String) async throws {
            let answer = try await server.request(
                "POST", "/v1/conversations/\(conversation.id)/messages", token: bob,
                body: SendMessageRequest(parts: [.text(text)])
            )
            #expect(answer.status == 201)
        }
        for index in 0..<20 { try await send("before \(index)") }
        let writing = Task {
            for index in 0..<100 { try await send("during \(index)") }
        }
        let destination = try TemporaryDirectory(prefix: "parley-backup").path + "/copy.sqlite"
        // On a thread of its own, as the command runs it: not on one of the two threads every test's tasks share.
        let source = server.dataDirectory + "/parley.sqlite"
        let bytes = try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try SQLiteBackup.copy(databaseAt: source, to: destination) })
            }
        }
        #expect(bytes > 0)
        try await writing.value
        // A second backup into the same file is refused rather than overwriting it.
        #expect(throws: SQLiteBackupError.self) {
            try SQLiteBackup.copy(databaseAt: server.dataDirectory + "/parley.sqlite", to: destination)
        }
        try await server.stop()

        let check = try DatabaseQueue(path: destination)
        #expect(try await check.read { try String.fetchOne($0, sql: "PRAGMA integrity_check") } == "ok")
        try check.close()
        // Restore: the copy as parley.sqlite of a new data directory (the test's own key file beside it).
        let restored = try TemporaryDirectory(prefix: "parley-restored").path
        try FileManager.default.copyItem(atPath: destination, toPath: restored + "/parley.sqlite")
        try FileManager.default.copyItem(
            atPath: server.dataDirectory + "/test-app.json", toPath: restored + "/test-app.json"
        )
        let again = try await TestServer.start(dataDirectory: restored)
        let token = try await again.login("alice")
        let page = try await again.request(
            "GET", "/v1/conversations/\(conversation.id)/messages?limit=200", token: token
        ).decode(MessagePage.self)
        // Every message up to one moment, none after a gap: the 20 before, then some of those sent during.
        let seqs = page.messages.map(\.seq).sorted()
        #expect(seqs.count >= 20 && seqs.count <= 120)
        #expect(seqs == Array(seqs.first!...seqs.last!))
        #expect(page.messages.filter { $0.parts.first == .text("before 0") }.count == 1)
        try await again.stop()
    }
}
