import Crypto
import Foundation
import NIOConcurrencyHelpers
import Parley
import ParleyServer
import ParleyStore
import ParleyTesting
import Testing

/// docs/SDK.md, "Files": the SDK uploads a file with progress, sends it through the durable outbox exactly once (across
/// server and app restarts, with the copy it keeps removed afterwards), and downloads it checked against its SHA-256.
@Suite(.timeLimit(.minutes(3))) struct FileAttachmentSDKTests {
    typealias Member = ResumeTests.Member

    /// A manual-mode client (the test decides when it connects), logged in unless `login` is false (a saved session).
    func member(_ uid: String, on server: TestServer, storage: TemporaryDirectory? = nil, login: Bool = true)
        async throws -> Member
    {
        try await ResumeTests().member(uid, on: server, storage: storage, login: login)
    }

    /// A file of `count` random bytes.
    static func file(_ name: String, _ count: Int) throws -> (url: URL, bytes: [UInt8]) {
        let bytes = TestBytes.random(count)
        let url = try TemporaryDirectory(prefix: "parley-file").url.appendingPathComponent(name)
        try Data(bytes).write(to: url)
        return (url, bytes)
    }

    static func sha256(_ bytes: [UInt8]) -> String {
        SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
    }

    /// The copies the outbox keeps in a storage directory.
    static func storedCopies(_ storage: TemporaryDirectory) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: storage.path)) ?? []
        return names.filter { $0.hasPrefix("outbox-files-") }.flatMap { folder in
            (try? FileManager.default.contentsOfDirectory(atPath: storage.path + "/" + folder)) ?? []
        }
    }

    /// Records progress reports.
    final class ProgressLog: Sendable {
        private let reports = NIOLockedValueBox<[FileTransferProgress]>([])
        func record(_ progress: FileTransferProgress) { reports.withLockedValue { $0.append(progress) } }
        var all: [FileTransferProgress] { reports.withLockedValue { $0 } }
    }

    /// Waits for the outbox update of `clientMessageId` that `matches`.
    static func update(
        _ updates: AsyncStream<OutgoingMessage>, of clientMessageId: String,
        where matches: (OutgoingMessage) -> Bool
    ) async -> OutgoingMessage? {
        for await update in updates where update.clientMessageId == clientMessageId && matches(update) {
            return update
        }
        return nil
    }

    /// Sent, or failed (the test then fails on what it checks next, instead of waiting for ever).
    static func isDone(_ message: OutgoingMessage) -> Bool { message.state != .pending }

    // MARK: Upload, send, receive, download

    @Test func anUploadReportsProgressAndTheOtherParticipantDownloadsTheSameBytes() async throws {
        let server = try await TestServer.start()
        try await uploadSendReceiveDownload(on: server)
        try await server.stop()
    }

    @Test(.enabled(if: PostgresTestDatabase.isConfigured, "needs PARLEY_TEST_DATABASE_URL (scripts/test)"))
    func anUploadSentAndDownloadedOnPostgreSQL() async throws {
        let database = try await PostgresTestDatabase.create(prefix: "parley_sdk_files")
        let server = try await TestServer.start(databaseURL: database.url)
        try await uploadSendReceiveDownload(on: server)
        try await server.stop()
        try await database.drop()
    }

    func uploadSendReceiveDownload(on server: TestServer) async throws {
        let alice = try await member("alice", on: server)
        let bob = try await member("bob", on: server)
        let carol = try await member("carol", on: server)
        let group = try await alice.client.createGroup(name: "Team", participants: ["bob"])
        let other = try await alice.client.createGroup(name: "Other", participants: ["carol"])
        let (url, bytes) = try Self.file("report.pdf", 700 * 1024)

        let log = ProgressLog()
        let attachment = try await alice.client.uploadFile(at: url, to: group.id) { log.record($0) }
        #expect(attachment.name == "report.pdf" && attachment.contentType == "application/pdf")
        #expect(attachment.size == Int64(bytes.count) && attachment.sha256 == Self.sha256(bytes))
        #expect(
            log.all.last == FileTransferProgress(completedBytes: Int64(bytes.count), totalBytes: Int64(bytes.count)))
        #expect(log.all.map(\.completedBytes) == log.all.map(\.completedBytes).sorted())

        let sent = try await alice.client.sendMessage(
            parts: [.file(attachment, preview: "LEHV6nWB2yk8"), .text("the report")], to: .conversation(group.id)
        )
        let received = try #require(
            await bob.recorder.next { event in
                if case .messageSent(let message) = event.payload { return message.id == sent.id }
                return false
            }
        )
        guard case .messageSent(let message) = received.payload else { return }
        let file = try #require(message.files.first)
        #expect(file == FileInfo(attachment, preview: "LEHV6nWB2yk8"))
        #expect(message.text == "the report")

        let downloads = try TemporaryDirectory(prefix: "parley-downloads")
        let bobLog = ProgressLog()
        let saved = try await bob.client.downloadFile(file, in: group.id, to: downloads.url) { bobLog.record($0) }
        #expect(saved.lastPathComponent == "report.pdf")
        let downloaded = try [UInt8](Data(contentsOf: saved))
        #expect(downloaded == bytes && Self.sha256(downloaded) == attachment.sha256)
        #expect(bobLog.all.last?.isComplete == true)
        #expect(try FileManager.default.contentsOfDirectory(atPath: downloads.path) == ["report.pdf"])

        // Not a participant: the conversation does not exist for carol. Another conversation: no such file there.
        await #expect(throws: ParleyError.self) {
            try await carol.client.downloadFile(file, in: group.id, to: downloads.url.appendingPathComponent("x"))
        }
        do {
            _ = try await carol.client.fileLink(file.id, in: group.id)
            Issue.record("a non-participant got a link")
        } catch let error as ParleyError {
            #expect(error.code == .conversationNotFound)
        }
        do {
            _ = try await carol.client.fileLink(file.id, in: other.id)
            Issue.record("a link of another conversation's file")
        } catch let error as ParleyError {
            #expect(error.code == .attachmentNotFound)
        }
        #expect(!FileManager.default.fileExists(atPath: downloads.path + "/x"))
        for member in [alice, bob, carol] { await member.client.shutdown() }
    }

    @Test func badFilesAreRefusedWithClearCodes() async throws {
        let server = try await TestServer.start { $0.files.maxFileBytes = 64 * 1024 }
        let alice = try await member("alice", on: server)
        let group = try await alice.client.createGroup(name: "Team")
        let missing = URL(fileURLWithPath: "/nonexistent/parley/file.txt")
        for call in [
            { try await alice.client.uploadFile(at: missing, to: group.id).id },
            { try alice.client.queueFile(at: missing, to: .conversation(group.id)).clientMessageId },
            { try await alice.client.uploadFile(at: FileManager.default.temporaryDirectory, to: group.id).id },
        ] as [@Sendable () async throws -> String] {
            do {
                _ = try await call()
                Issue.record("a missing file or a folder was accepted")
            } catch let error as ParleyError {
                #expect(error.code == .fileUnreadable)
            }
        }
        let (large, _) = try Self.file("large.bin", 200 * 1024)
        do {
            _ = try await alice.client.uploadFile(at: large, to: group.id)
            Issue.record("a file over the server's limit was accepted")
        } catch let error as ParleyError {
            #expect(error.code == .fileTooLarge)
        }
        // Through the outbox the refusal fails the entry, and the awaiting form reports it and leaves nothing.
        do {
            _ = try await alice.client.sendFile(at: large, to: .conversation(group.id))
            Issue.record("a file over the server's limit was sent")
        } catch let error as ParleyError {
            #expect(error.code == .fileTooLarge)
        }
        #expect(alice.client.outgoingMessages().isEmpty && Self.storedCopies(alice.storage).isEmpty)
        await alice.client.shutdown()
        try await server.stop()
    }

    // MARK: The outbox

    @Test func sendFileUploadsThenSendsAndRemovesItsCopy() async throws {
        let server = try await TestServer.start()
        let alice = try await member("alice", on: server)
        let group = try await alice.client.createGroup(name: "Team")
        let (url, bytes) = try Self.file("photo.bin", 300 * 1024)
        let updates = alice.client.outboxUpdates()
        let message = try await alice.client.sendFile(
            at: url, to: .conversation(group.id), contentType: "application/x-test", caption: "look",
            clientMessageId: "cm-f1"
        )
        #expect(message.clientMessageId == "cm-f1" && message.text == "look")
        #expect(message.files.map(\.name) == ["photo.bin"] && message.files.first?.size == Int64(bytes.count))
        #expect(message.files.first?.contentType == "application/x-test")
        #expect(Self.storedCopies(alice.storage).isEmpty)
        // The progress went through the outbox's updates, up to the whole file.
        var progress: [FileTransferProgress] = []
        for await update in updates where update.clientMessageId == "cm-f1" {
            if let done = update.uploadProgress { progress.append(done) }
            if Self.isDone(update) { break }
        }
        #expect(progress.last?.completedBytes == Int64(bytes.count))
        let record = try #require(try await server.store.attachment(appId: server.app.appId, id: message.files[0].id))
        #expect(record.messageId == message.id)
        await alice.client.shutdown()
        try await server.stop()
    }

    @Test func aFileQueuedWhileTheServerIsDownIsSentOnceAfterAServerAndAnAppRestart() async throws {
        let server = try await TestServer.start(port: RestartablePort.take())
        let alice = try await member("alice", on: server)
        let group = try await alice.client.createGroup(name: "Team")
        let port = server.port
        try await server.stop()
        let (url, bytes) = try Self.file("notes.txt", 100 * 1024)
        let queued = try alice.client.queueFile(
            at: url, to: .conversation(group.id), caption: "offline", clientMessageId: "cm-f2"
        )
        #expect(queued.file?.name == "notes.txt" && queued.file?.contentType == "text/plain")
        #expect(queued.file?.attachmentId == nil && Self.storedCopies(alice.storage).count == 1)
        try FileManager.default.removeItem(at: url)  // the app's own copy may go: the outbox has one
        await alice.client.shutdown()  // the app is killed before the server is back

        let restarted = try await TestServer.start(dataDirectory: server.dataDirectory, port: port)
        let reopened = try await member("alice", on: restarted, storage: alice.storage, login: false)
        let updates = reopened.client.outboxUpdates()
        if !reopened.client.outgoingMessages().isEmpty {
            _ = await Self.update(updates, of: "cm-f2", where: Self.isDone)
        }
        let page = try await reopened.client.fetchMessages(conversationId: group.id)
        let sent = try #require(page.messages.last)
        #expect(page.messages.filter { $0.sender == "alice" && $0.clientMessageId != nil }.count == 1)
        #expect(sent.clientMessageId == "cm-f2" && sent.text == "offline")
        #expect(sent.files.map(\.sha256) == [Self.sha256(bytes)])
        #expect(Self.storedCopies(alice.storage).isEmpty)
        let unused = try await restarted.store.unattachedAttachments(createdBefore: .max, limit: 10)
        #expect(unused.isEmpty)
        await reopened.client.shutdown()
        try await restarted.stop()
    }

    /// The upload is done and its id saved, the send is refused for the rate; the app is closed then. The next start
    /// sends the message with that upload, without uploading again; or, when the server no longer has the upload
    /// (removed as unused), uploads it again once.
    @Test(arguments: [false, true])
    func anAppClosedAfterTheUploadSendsTheMessageOnce(uploadRemoved: Bool) async throws {
        // One message (or upload) per 1000 s: the upload takes it, the send is refused with ERR_RATE_LIMITED.
        let server = try await TestServer.start(port: RestartablePort.take()) {
            $0.edge.messagesPerUser = RateLimit(perSecond: 0.001, burst: 1)
        }
        let alice = try await member("alice", on: server)
        let group = try await alice.client.createGroup(name: "Team")
        let (url, _) = try Self.file("clip.bin", 50 * 1024)
        let updates = alice.client.outboxUpdates()
        _ = try alice.client.queueFile(at: url, to: .conversation(group.id), clientMessageId: "cm-f3")
        let uploaded = try #require(await Self.update(updates, of: "cm-f3") { $0.file?.attachmentId != nil })
        let attachmentId = try #require(uploaded.file?.attachmentId)
        #expect(alice.client.outgoingMessages().first?.file?.attachmentId == attachmentId)  // saved
        await alice.client.shutdown()
        if uploadRemoved {
            // What the sweeper does to an upload no message carries after a day.
            #expect(
                try await server.store.deleteAttachment(appId: server.app.appId, id: attachmentId, unattachedOnly: true)
            )
        }
        let port = server.port
        try await server.stop()

        let restarted = try await TestServer.start(dataDirectory: server.dataDirectory, port: port)
        let reopened = try await member("alice", on: restarted, storage: alice.storage, login: false)
        let reopenedUpdates = reopened.client.outboxUpdates()
        if !reopened.client.outgoingMessages().isEmpty {
            _ = await Self.update(reopenedUpdates, of: "cm-f3", where: Self.isDone)
        }
        let messages = try await reopened.client.fetchMessages(conversationId: group.id).messages
            .filter { $0.clientMessageId != nil }
        #expect(messages.map(\.clientMessageId) == ["cm-f3"])
        let fileId = try #require(messages.first?.files.first?.id)
        #expect((fileId == attachmentId) == !uploadRemoved)
        #expect(try await restarted.store.unattachedAttachments(createdBefore: .max, limit: 10).isEmpty)
        #expect(Self.storedCopies(alice.storage).isEmpty)
        await reopened.client.shutdown()
        try await restarted.stop()
    }

    @Test func cancellingAQueuedFileRemovesItsCopy() async throws {
        let server = try await TestServer.start()
        let alice = try await member("alice", on: server)
        let group = try await alice.client.createGroup(name: "Team")
        await alice.client.disconnect()
        try await server.stop()
        let (url, _) = try Self.file("draft.txt", 1024)
        let queued = try alice.client.queueFile(at: url, to: .conversation(group.id))
        #expect(Self.storedCopies(alice.storage).count == 1)
        // The outbox may be between two steps of an attempt (the server is down): cancelling waits for it to give up.
        let deadline = ContinuousClock.now + .seconds(10)
        while true {
            do {
                try alice.client.cancelMessage(clientMessageId: queued.clientMessageId)
                break
            } catch let error as ParleyError where error.code == .outboxMessageSending && ContinuousClock.now < deadline
            {
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        #expect(alice.client.outgoingMessages().isEmpty && Self.storedCopies(alice.storage).isEmpty)
        #expect(FileManager.default.fileExists(atPath: url.path))  // the app's own file is not touched
        await alice.client.shutdown()
    }

    @Test func cancellingAFileWhileItUploadsStopsTheUploadAndSendsNothing() async throws {
        let server = try await TestServer.start()
        // The server's answer to the upload never comes: the proxy loses every byte while stalled.
        let proxy = try await TCPProxy.start(targetPort: server.port)
        let storage = try TemporaryDirectory(prefix: "parley-files")
        let client = try ParleyClient(
            appId: server.app.appId,
            settings: testSettings(
                serverURL: URL(string: "http://127.0.0.1:\(proxy.port)")!, storage: storage, autoConnect: false
            )
        )
        try await client.start()
        try await client.login(uid: "alice", authKey: server.app.authKey)
        let group = try await client.createGroup(name: "Team")
        let updates = client.outboxUpdates()
        proxy.stall(true)
        let (url, _) = try Self.file("video.mp4", 200 * 1024)
        let queued = try client.queueFile(at: url, to: .conversation(group.id))
        let uploading = await Self.update(updates, of: queued.clientMessageId) { $0.uploadProgress != nil }
        #expect(uploading?.file?.attachmentId == nil)

        try client.cancelMessage(clientMessageId: queued.clientMessageId)
        #expect(client.outgoingMessages().isEmpty && Self.storedCopies(storage).isEmpty)
        let cancelled = await Self.update(updates, of: queued.clientMessageId) { $0.state == .cancelled }
        #expect(cancelled != nil)
        // The outbox goes on with the next entry; the cancelled file never becomes a message.
        proxy.stall(false)
        _ = try await client.sendTextMessage("after", to: .conversation(group.id))
        let messages = try await client.fetchMessages(conversationId: group.id).messages.filter {
            $0.clientMessageId != nil
        }
        #expect(messages.map(\.text) == ["after"] && messages.allSatisfy { $0.files.isEmpty })
        await client.shutdown()
        try await proxy.stop()
        try await server.stop()
    }

    @Test func anOutboxSavedBeforeFilesStillLoads() throws {
        let saved = """
            {"clientMessageId":"cm-old","receiver":{"conversation":{"_0":"c_1"}},"action":{"send":{}},
             "parts":[{"type":"text","text":"hi"}],"createdAt":1,"state":{"pending":{}},"attempts":0}
            """
        let message = try JSONDecoder().decode(OutgoingMessage.self, from: Data(saved.utf8))
        #expect(message.file == nil && message.parts.map(\.text) == ["hi"])
        let file = OutgoingFile(
            storedFileName: "x", name: "a.txt", contentType: "text/plain", size: 3, attachmentId: "f_1",
            progress: FileTransferProgress(completedBytes: 1, totalBytes: 3))
        var withFile = message
        withFile.file = file
        let again = try JSONDecoder().decode(OutgoingMessage.self, from: JSONEncoder().encode(withFile))
        // Progress is not saved: it starts again after a restart.
        #expect(again.file?.attachmentId == "f_1" && again.file?.progress == nil)
    }
}
