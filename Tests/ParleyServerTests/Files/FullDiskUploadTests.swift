import Foundation
import Logging
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyServer
import ParleyTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A folder on a small file system (scripts/with-small-disk mounts one).
private let smallDisk = ProcessInfo.processInfo.environment["PARLEY_TEST_SMALL_DISK"]

/// An upload that fills the disk: the file system's own `ENOSPC`, on a small file system scripts/with-small-disk
/// mounts (a tmpfs of 16 MiB), answered 507 `ERR_STORAGE_FULL` with one log line that names the folder, instead of 500
/// `ERR_INTERNAL`; nothing of the file is left, and uploads are stored again once there is room.
@Suite(
    .timeLimit(.minutes(2)),
    .enabled(if: smallDisk != nil, "needs PARLEY_TEST_SMALL_DISK (scripts/with-small-disk)")
)
struct FullDiskUploadTests {
    /// Bytes free for an unprivileged writer on the file system of `path`.
    static func freeBytes(_ path: String) throws -> Int {
        var stats = statvfs()
        guard statvfs(path, &stats) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        return Int(stats.f_bavail) * Int(stats.f_frsize)
    }

    @Test func anUploadThatFillsTheDiskIsRefusedWith507AndTheNextOneIsStored() async throws {
        let disk = try #require(smallDisk)
        let directory = disk + "/server-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let lines = NIOLockedValueBox([UInt8]())
        let logger = Logger(label: "parley") { label in
            JSONLogHandler.writing(label: label) { bytes in lines.withLockedValue { $0 += bytes } }
        }
        let server = try await TestServer.start(dataDirectory: directory, logger: logger) { configuration in
            configuration.edge.messagesPerUser = nil
        }
        let alice = try await server.login("alice")
        _ = try await server.login("bob")
        let conversation = try await server.createConversation(token: alice, type: .direct, with: ["bob"])

        // More than the disk has left: the spool file's write fails part way with ENOSPC.
        let free = try Self.freeBytes(directory)
        #expect(free < 16 * 1024 * 1024, "not a small disk: \(free) bytes free")
        for attempt in 0..<2 {
            let answer = try await FileTransferTests.upload(
                server, conversation: conversation.id, token: alice, name: "big-\(attempt).bin",
                type: "application/octet-stream", bytes: [UInt8](repeating: 7, count: free + 256 * 1024)
            )
            #expect(answer.status == 507, "\(answer.status) \(String(decoding: answer.body, as: UTF8.self))")
            let error = try? JSONDecoder().decode(ErrorResponse.self, from: Data(answer.body))
            #expect(error?.error.code == .storageFull)
        }
        // Nothing of either file is left: not in the spool, not among the files, and the space is free again.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory + "/spool").isEmpty)
        let files = (try? FileManager.default.subpathsOfDirectory(atPath: directory + "/files")) ?? []
        #expect(
            files.filter { !$0.hasSuffix("/") && !Self.isDirectory(directory + "/files/" + $0) }.isEmpty, "\(files)")
        #expect(try Self.freeBytes(directory) >= free - 1024 * 1024)

        // One line for both refusals, naming the folder; no internal error.
        let log = String(decoding: lines.withLockedValue { $0 }, as: UTF8.self)
        #expect(log.components(separatedBy: "The files' disk is full").count - 1 == 1, "\(log)")
        #expect(log.contains(directory + "/spool"))
        #expect(!log.contains("ERR_INTERNAL"))

        // Room again: a file is stored and reads back whole, and the conversation still takes messages.
        let bytes = FileTransferTests.randomBytes(64 * 1024)
        let stored = try await FileTransferTests.upload(
            server, conversation: conversation.id, token: alice, name: "small.bin", type: "application/octet-stream",
            bytes: bytes)
        #expect(stored.status == 201)
        let attachment = try JSONDecoder().decode(Attachment.self, from: Data(stored.body))
        let link = try await FileTransferTests.link(
            server, conversation: conversation.id, id: attachment.id, token: alice)
        let download = try await FileTransferTests.http(server, "GET", link.url)
        #expect(download.status == 200 && download.body == bytes)
        let sent = try await server.request(
            "POST", "/v1/conversations/\(conversation.id)/messages", token: alice,
            body: SendMessageRequest(parts: [.text("after the full disk")]))
        #expect(sent.status == 201)
        try await server.stop()
    }

    static func isDirectory(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue
    }
}
