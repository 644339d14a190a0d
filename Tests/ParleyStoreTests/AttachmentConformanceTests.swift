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

/// Messages taking uploads (``Attachments``): a `file` part names an upload of the sender's in the conversation that no
/// message carries yet; edits keep, add and drop files; a deletion removes them.
extension StoreConformanceTests {
    func upload(
        _ store: any ParleyStore, _ id: String, by uploader: String, in conversationId: String = "c_g",
        type: String = "image/png", at createdAt: Int64 = 10
    ) async throws {
        try await store.insertAttachment(
            AttachmentRecord(
                appId: Self.appId,
                attachment: Attachment(
                    id: id, conversationId: conversationId, uploader: uploader, name: "\(id).png", contentType: type,
                    size: 1234, sha256: String(repeating: "0f", count: 32), width: 3, height: 2, createdAt: createdAt
                )
            )
        )
    }

    func fileSend(
        _ conversationId: String = "c_g", from sender: String, files: [String], preview: String? = nil,
        clientId: String? = nil, id: String = "m_\(UUID().uuidString.prefix(8))"
    ) -> Command {
        // A sender names the upload alone: the store fills in the rest.
        let parts = files.map {
            MessagePart(
                type: .file,
                file: FileInfo(id: $0, name: "", contentType: "text/plain", size: 0, sha256: "", preview: preview))
        }
        return .sendMessage(
            .init(
                appId: Self.appId, conversationId: conversationId, sender: sender, messageId: id,
                clientMessageId: clientId, parts: parts, metadata: nil, alert: nil, now: 20, queuesPush: false
            )
        )
    }

    @Test(arguments: Backend.allCases) func aMessageTakesItsSendersUploadOnce(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])
        _ = try await group(store, id: "c_other", members: ["bob"])
        try await upload(store, "f_1", by: "bob")
        try await upload(store, "f_2", by: "bob")
        try await upload(store, "f_elsewhere", by: "bob", in: "c_other")
        try await upload(store, "f_carols", by: "carol")

        let sent = try await apply(
            store, fileSend(from: "bob", files: ["f_1", "f_2"], preview: "LEHV6nWB2yk8", clientId: "k1"))
        guard case .message(let message, false) = sent.outcome else { throw StoreTestError.noMessage }
        #expect(message.files.map(\.id) == ["f_1", "f_2"])
        let file = try #require(message.files.first)
        #expect(file.name == "f_1.png" && file.contentType == "image/png" && file.size == 1234)
        #expect(file.sha256 == String(repeating: "0f", count: 32) && file.width == 3 && file.height == 2)
        #expect(file.preview == "LEHV6nWB2yk8")
        #expect(sent.events.first?.event.payload.message?.files == message.files)
        #expect(try await history(store).last?.files == message.files)
        #expect(try await store.attachment(appId: Self.appId, id: "f_1")?.messageId == message.id)

        // A repeat of the same client message id is the message stored, not a refusal.
        let repeated = try await apply(store, fileSend(from: "bob", files: ["f_1"], clientId: "k1"))
        guard case .message(let again, true) = repeated.outcome else { throw StoreTestError.noMessage }
        #expect(again.id == message.id)
        // Another message may not take it, nor may anyone but the uploader, another conversation or another app.
        #expect(try await refusal(store, fileSend(from: "bob", files: ["f_1"])) == .attachmentInUse)
        #expect(try await refusal(store, fileSend(from: "alice", files: ["f_carols"])) == .attachmentNotFound)
        #expect(try await refusal(store, fileSend(from: "bob", files: ["f_elsewhere"])) == .attachmentNotFound)
        #expect(try await refusal(store, fileSend(from: "bob", files: ["f_none"])) == .attachmentNotFound)
        #expect(try await refusal(store, fileSend(from: "carol", files: ["f_carols", "f_carols"])) == .badRequest)
        // Two sends of one batch naming the same upload: the first takes it.
        let results = try await store.apply([
            fileSend(from: "carol", files: ["f_carols"]), fileSend(from: "carol", files: ["f_carols"]),
        ])
        #expect(results[0].failureCode == nil)
        #expect(results[1].failureCode == .attachmentInUse)
        // A refused message took nothing: the upload it named in another conversation is free.
        #expect(try await store.attachment(appId: Self.appId, id: "f_elsewhere")?.messageId == nil)
    }

    @Test(arguments: Backend.allCases) func editsKeepAddAndDropFilesAndADeletionRemovesThem(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])
        for id in ["f_a", "f_b", "f_c"] { try await upload(store, id, by: "bob") }
        try await upload(store, "f_alices", by: "alice")
        let sent = try await apply(store, fileSend(from: "bob", files: ["f_a", "f_b"]))
        guard case .message(let message, _) = sent.outcome else { throw StoreTestError.noMessage }

        func edit(_ files: [String], by actor: String = "bob") -> Command {
            .editMessage(
                .init(
                    appId: Self.appId, conversationId: "c_g", actor: actor, messageId: message.id,
                    parts: [.text("see")]
                        + files.map {
                            MessagePart(
                                type: .file, file: FileInfo(id: $0, name: "", contentType: "", size: 0, sha256: ""))
                        },
                    now: 30
                )
            )
        }
        // Keep f_b, add f_c, drop f_a: f_a is removed (no link finds it; the sweeper takes it at once).
        let edited = try await apply(store, edit(["f_b", "f_c"]))
        guard case .message(let second, false) = edited.outcome else { throw StoreTestError.noMessage }
        #expect(second.files.map(\.id) == ["f_b", "f_c"] && second.files.allSatisfy { $0.size == 1234 })
        #expect(try await store.attachment(appId: Self.appId, id: "f_a") == nil)
        #expect(try await store.attachment(appId: Self.appId, id: "f_c")?.messageId == message.id)
        #expect(try await store.unattachedAttachments(createdBefore: 0, limit: 10).map(\.id) == ["f_a"])
        // A removed upload is gone for good; another's upload is not the editor's to add.
        #expect(try await refusal(store, edit(["f_a"])) == .attachmentNotFound)
        #expect(try await refusal(store, edit(["f_b", "f_alices"])) == .attachmentNotFound)
        // The same edit again is a repeat.
        let repeated = try await apply(store, edit(["f_b", "f_c"]))
        #expect(repeated.events.isEmpty)

        _ = try await apply(store, delete(message, by: "bob"))
        #expect(try await store.attachment(appId: Self.appId, id: "f_b") == nil)
        #expect(try await store.attachment(appId: Self.appId, id: "f_c") == nil)
        #expect(
            Set(try await store.unattachedAttachments(createdBefore: 0, limit: 10).map(\.id)) == ["f_a", "f_b", "f_c"])
        // The sweeper's conditional delete takes removed uploads.
        #expect(try await store.deleteAttachment(appId: Self.appId, id: "f_b", unattachedOnly: true))
    }
}
