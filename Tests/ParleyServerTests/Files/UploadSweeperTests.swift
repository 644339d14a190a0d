import Foundation
import Logging
import ParleyProtocol
import ParleyStore
import ParleyStoreSQLite
import ParleyTesting
import Testing

@testable import ParleyServer

/// Uploads no message takes are removed after the retention, records and bytes; the rest stay (virtual time).
@Suite(.timeLimit(.minutes(1))) struct UploadSweeperTests {
    @Test func uploadsNoMessageTookGoAfterTheRetentionAndTheOthersStay() async throws {
        let directory = try TemporaryDirectory(prefix: "parley-sweeper").path
        let store = try openSQLiteStore(in: directory)
        let blobs = try DiskBlobStore(root: directory + "/files")
        let clock = ManualClock()
        let time = ServerClock(timeline: Timeline(clock), epochAtStart: 1_000_000)
        let sweeper = UploadSweeper(
            store: store, blobs: blobs, retention: .seconds(3600), interval: .seconds(60), time: time,
            logger: Logger(label: "test")
        )
        func upload(_ id: String, message: String? = nil, at createdAt: Int64) async throws {
            let record = AttachmentRecord(
                appId: "app",
                attachment: Attachment(
                    id: id, conversationId: "c_1", uploader: "alice", name: "\(id).txt", contentType: "text/plain",
                    size: 2, sha256: String(repeating: "0", count: 64), createdAt: createdAt
                ),
                messageId: message
            )
            try await store.insertAttachment(record)
            let spool = directory + "/spool-\(id)"
            try Data("hi".utf8).write(to: URL(fileURLWithPath: spool))
            try await blobs.put(
                key: try BlobKey(record.blobKey), file: spool, size: 2, sha256: [], contentType: "text/plain"
            )
        }
        try await upload("f_abandoned", at: 1_000_000)
        try await upload("f_taken", message: "m_1", at: 1_000_000)
        try await upload("f_later", at: 1_000_000 + 1_800_000)

        #expect(await sweeper.sweep() == 0)
        clock.advance(by: .seconds(3600) + .milliseconds(1))
        #expect(await sweeper.sweep() == 1)
        #expect(try await store.attachment(appId: "app", id: "f_abandoned") == nil)
        #expect(try await blobs.size(of: BlobKey("app/f_abandoned")) == nil)
        #expect(try await store.attachment(appId: "app", id: "f_taken") != nil)
        #expect(try await blobs.size(of: BlobKey("app/f_taken")) == 2)
        #expect(try await blobs.size(of: BlobKey("app/f_later")) == 2)

        // The service looks again every interval.
        let running = Task { try await sweeper.run() }
        _ = await clock.sleeper { _ in true }
        clock.advance(by: .seconds(1800))
        let now = clock.now
        _ = await clock.sleeper { $0 > now }
        #expect(try await store.attachment(appId: "app", id: "f_later") == nil)
        #expect(try await blobs.size(of: BlobKey("app/f_later")) == nil)
        #expect(try await blobs.size(of: BlobKey("app/f_taken")) == 2)
        running.cancel()
        try await running.value
        try await store.close()
    }
}
