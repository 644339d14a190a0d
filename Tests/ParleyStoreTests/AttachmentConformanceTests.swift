import Foundation
import ParleyProtocol
import ParleyStore
import Testing

/// Uploads' records on every backend: kept per app, found by id, swept when no message carries them.
extension StoreConformanceTests {
    @Test(arguments: Backend.allCases) func uploadsAreKeptPerAppAndSweptWhenNoMessageCarriesThem(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        let photo = AttachmentRecord(
            appId: Self.appId,
            attachment: Attachment(
                id: "f_photo", conversationId: "c_1", uploader: "alice", name: "café.png", contentType: "image/png",
                size: 5_000_000_000, sha256: String(repeating: "ab", count: 32), width: 4032, height: 3024,
                createdAt: 100
            )
        )
        var report = photo
        report.attachment = Attachment(
            id: "f_report", conversationId: "c_1", uploader: "alice", name: "report.pdf",
            contentType: "application/pdf", size: 0, sha256: String(repeating: "cd", count: 32), createdAt: 200
        )
        var carried = photo
        carried.attachment.id = "f_carried"
        carried.attachment.createdAt = 50
        carried.messageId = "m_1"
        var theirs = photo
        theirs.attachment.id = "f_theirs"
        theirs.appId = Self.otherApp
        theirs.attachment.createdAt = 150
        for record in [photo, report, carried, theirs] { try await store.insertAttachment(record) }

        #expect(try await store.attachment(appId: Self.appId, id: "f_photo") == photo)
        #expect(try await store.attachment(appId: Self.appId, id: "f_report") == report)
        #expect(try await store.attachment(appId: Self.appId, id: "f_theirs") == nil)
        #expect(try await store.attachment(appId: Self.otherApp, id: "f_theirs") == theirs)
        #expect(try await store.attachment(appId: Self.appId, id: "f_none") == nil)
        // The sweeper sees every app's uploads that no message carries, oldest first, before the given time.
        #expect(
            try await store.unattachedAttachments(createdBefore: 1_000, limit: 10).map(\.id) == [
                "f_photo", "f_theirs", "f_report",
            ])
        #expect(try await store.unattachedAttachments(createdBefore: 150, limit: 10).map(\.id) == ["f_photo"])
        #expect(try await store.unattachedAttachments(createdBefore: 1_000, limit: 1).map(\.id) == ["f_photo"])
        // Another app's id is not this app's to delete; the sweeper's delete leaves an upload a message carries.
        #expect(try await !store.deleteAttachment(appId: Self.appId, id: "f_theirs", unattachedOnly: false))
        #expect(try await !store.deleteAttachment(appId: Self.appId, id: "f_carried", unattachedOnly: true))
        #expect(try await store.attachment(appId: Self.appId, id: "f_carried") == carried)
        #expect(try await store.deleteAttachment(appId: Self.appId, id: "f_photo", unattachedOnly: true))
        #expect(try await !store.deleteAttachment(appId: Self.appId, id: "f_photo", unattachedOnly: false))
        #expect(try await store.deleteAttachment(appId: Self.appId, id: "f_carried", unattachedOnly: false))
        #expect(try await store.attachment(appId: Self.appId, id: "f_photo") == nil)
        #expect(
            try await store.unattachedAttachments(createdBefore: 1_000, limit: 10).map(\.id) == [
                "f_theirs", "f_report",
            ])
        // A duplicate id is refused.
        await #expect(throws: (any Error).self) { try await store.insertAttachment(report) }
    }
}
