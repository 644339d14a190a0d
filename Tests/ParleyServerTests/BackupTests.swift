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

    /// `parley-server backup FOLDER` of a server taking messages and uploads: restored into a new data directory, every
    /// message and file acknowledged before the backup began is there, the files byte for byte; the manifest counts them.
    @Test func aBackupOfALiveServerRestoresEveryAcknowledgedMessageAndFile() async throws {
        let server = try await TestServer.start { $0.edge.messagesPerUser = nil }
        let alice = try await server.login("alice")
        _ = try await server.login("bob")
        let conversation = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        func send(_ text: String) async throws -> String {
            let answer = try await server.request(
                "POST", "/v1/conversations/\(conversation.id)/messages", token: alice,
                body: SendMessageRequest(parts: [.text(text)]))
            #expect(answer.status == 201)
            return try answer.decode(Message.self).id
        }
        func upload(_ index: Int) async throws -> (id: String, bytes: [UInt8]) {
            let bytes = TestBytes.random(20_000 + index * 1_000)
            let answer = try await FileTransferTests.upload(
                server, conversation: conversation.id, token: alice, name: "f\(index).bin",
                type: "application/octet-stream", bytes: bytes)
            #expect(answer.status == 201)
            return (try JSONDecoder().decode(Attachment.self, from: Data(answer.body)).id, bytes)
        }
        var messages: [String] = []
        var files: [(id: String, bytes: [UInt8])] = []
        for index in 0..<30 { messages.append(try await send("before \(index)")) }
        for index in 0..<6 { files.append(try await upload(index)) }
        // Load goes on while the backup runs.
        let load = Task {
            for index in 0..<60 {
                _ = try await send("during \(index)")
                if index % 10 == 0 { _ = try await upload(100 + index) }
            }
        }
        let folder = try TemporaryDirectory(prefix: "parley-backup").path + "/backup"
        let data = server.dataDirectory
        let manifest = try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(
                    with: Result {
                        try DataBackup.backup(dataDirectory: data, filesDirectory: data + "/files", into: folder)
                    })
            }
        }
        try await load.value
        try await server.stop()
        #expect(manifest.missingFiles.isEmpty)
        #expect(manifest.files >= files.count && manifest.files <= files.count + 6)
        #expect(try DataBackup.manifest(in: folder) == manifest)
        // A second backup into the same folder is refused.
        #expect(throws: BackupError.destinationExists(folder)) {
            try DataBackup.backup(dataDirectory: data, filesDirectory: data + "/files", into: folder)
        }

        let restored = try TemporaryDirectory(prefix: "parley-restored").path + "/data"
        let result = try DataBackup.restore(
            from: folder, into: restored, filesDirectory: restored + "/files", replacing: false)
        #expect(result.files == manifest.files && result.replacedInto == nil)
        try FileManager.default.copyItem(atPath: data + "/test-app.json", toPath: restored + "/test-app.json")
        let again = try await TestServer.start(dataDirectory: restored)
        let token = try await again.login("alice")
        let page = try await again.request(
            "GET", "/v1/conversations/\(conversation.id)/messages?limit=200", token: token
        ).decode(MessagePage.self)
        let found = Set(page.messages.map(\.id))
        #expect(messages.allSatisfy(found.contains), "\(messages.filter { !found.contains($0) })")
        for file in files {
            let link = try await FileTransferTests.link(again, conversation: conversation.id, id: file.id, token: token)
            let download = try await FileTransferTests.http(again, "GET", link.url)
            #expect(download.status == 200 && download.body == file.bytes, "\(file.id)")
        }
        try await again.stop()
    }

    /// A backup that fails (here: no database where it was told to look) leaves no folder behind.
    @Test func aFailedBackupLeavesNoFolder() throws {
        let empty = try TemporaryDirectory(prefix: "parley-empty").path
        let folder = try TemporaryDirectory(prefix: "parley-backup").path + "/backup"
        #expect(throws: SQLiteBackupError.self) {
            try DataBackup.backup(dataDirectory: empty, filesDirectory: empty + "/files", into: folder)
        }
        #expect(!FileManager.default.fileExists(atPath: folder))
    }

    /// A restore never goes into a directory a server is using, nor over data already there unless told to replace
    /// it, which moves that data aside instead of deleting it.
    @Test func aRestoreRefusesARunningServersDirectoryAndMovesOldDataAsideWhenAsked() async throws {
        let source = try await TestServer.start()
        let alice = try await source.login("alice")
        let conversation = try await source.createConversation(token: alice, type: .group, with: [])
        let folder = try TemporaryDirectory(prefix: "parley-backup").path + "/backup"
        let sourceData = source.dataDirectory
        try DataBackup.backup(dataDirectory: sourceData, filesDirectory: sourceData + "/files", into: folder)
        try await source.stop()

        let running = try await TestServer.start()
        let data = running.dataDirectory
        do {
            try DataBackup.restore(from: folder, into: data, filesDirectory: data + "/files", replacing: true)
            Issue.record("restored into a running server's directory")
        } catch let error as SQLiteStoreError {
            #expect(error.code == "ERR_DATA_DIRECTORY_LOCKED")
        }
        try await running.stop()
        let before = try Data(contentsOf: URL(fileURLWithPath: data + "/parley.sqlite"))
        #expect(throws: BackupError.dataDirectoryInUse(data)) {
            try DataBackup.restore(from: folder, into: data, filesDirectory: data + "/files", replacing: false)
        }
        let replaced = try DataBackup.restore(
            from: folder, into: data, filesDirectory: data + "/files", replacing: true)
        let aside = try #require(replaced.replacedInto)
        #expect(try Data(contentsOf: URL(fileURLWithPath: aside + "/parley.sqlite")) == before)
        // The restored directory is the backup's: its conversation is there.
        try FileManager.default.removeItem(atPath: data + "/test-app.json")
        try FileManager.default.copyItem(atPath: sourceData + "/test-app.json", toPath: data + "/test-app.json")
        let again = try await TestServer.start(dataDirectory: data)
        let token = try await again.login("alice")
        let answer = try await again.request("GET", "/v1/conversations/\(conversation.id)", token: token)
        #expect(answer.status == 200)
        try await again.stop()
    }
}
