import Foundation
import ParleyAPI
import ParleyAPIClient

extension ParleyAdmin {
    /// A page of one user's data (docs/PROTOCOL.md, "Exporting a user"): their profile, on the first page the
    /// conversations they are in, and the messages they sent. Follow `nextCursor` until it is nil: a page may hold
    /// fewer messages than `limit`, even none, and still have a next one.
    ///
    /// - Throws: `ERR_UID_NOT_FOUND`, `ERR_BAD_REQUEST` (a cursor that is not one of this call's).
    public func exportUser(_ uid: String, limit: Int = 100, cursor: String? = nil) async throws -> UserExportPage {
        try await rest.call {
            try await $0.exportUser(path: .init(uid: uid), query: .init(limit: limit, cursor: cursor)).ok.body.json
        }
    }

    /// A short-lived link to the bytes of a file of any conversation of the app, with the attachment it names.
    public func fileLink(_ fileId: String, in conversationId: String) async throws -> AttachmentLink {
        try await files.link(fileId, in: conversationId)
    }

    /// Downloads a file of any conversation of the app to `destination` (a file, or an existing folder: then under
    /// the file's name), checking its size and SHA-256; as ``ParleyClient/downloadFile(_:in:to:progress:)-(String,_,_,_)``.
    @discardableResult
    public func downloadFile(
        _ fileId: String, in conversationId: String, to destination: URL,
        progress: (@Sendable (FileTransferProgress) -> Void)? = nil
    ) async throws -> URL {
        try await files.save(try await fileLink(fileId, in: conversationId), to: destination, progress: progress)
    }
}

extension ParleyAdmin {
    /// Deletes a user and their data (docs/PROTOCOL.md, "Deleting a user"): deactivated, taken out of every
    /// conversation (a group they owned passes to another member), each message they sent deleted (or erased, as
    /// ``setDeletedUserMessages(_:)`` says), their files removed, then their reactions, mentions, blocks, reports,
    /// devices, tokens and the user, with a `user.delete` webhook event. When it fails part way, calling it again
    /// finishes it.
    ///
    /// - Throws: `ERR_UID_NOT_FOUND` (no such user, or already deleted), `ERR_INVALID_UID`.
    @discardableResult
    public func deleteUser(uid: String) async throws -> UserDeletion {
        try await rest.call { try await $0.deleteUser(path: .init(uid: uid)).ok.body.json }
    }

    /// Sets what becomes of a deleted user's messages: tombstones that keep their sender (the default), or erased
    /// (tombstones that no longer name them).
    public func setDeletedUserMessages(_ mode: DeletedUserMessages) async throws -> AppOverview {
        let body = UpdateAppSettingsRequest(deletedUserMessages: mode)
        return try await rest.call { try await $0.updateAppSettings(body: .json(body)).ok.body.json }
    }
}
