import Foundation
import ParleyProtocol
import ParleyStore
import PostgresNIO

/// Uploads' records (``AttachmentRecord``): table `attachments` (migration 11).
extension PostgresStore {
    static let attachmentColumns = """
        id, app_id, conversation_id, uploader, name, content_type, size, sha256, width, height, created_at, message_id
        """

    public func insertAttachment(_ record: AttachmentRecord) async throws {
        let file = record.attachment
        let width = file.width.map(Int32.init)
        let height = file.height.map(Int32.init)
        try await execute(
            """
            INSERT INTO attachments (\(unescaped: Self.attachmentColumns))
            VALUES (\(file.id), \(record.appId), \(file.conversationId), \(file.uploader), \(file.name),
                \(file.contentType), \(file.size), \(file.sha256), \(width), \(height), \(file.createdAt),
                \(record.messageId))
            """
        )
    }

    public func attachment(appId: String, id: String) async throws -> AttachmentRecord? {
        try await rows(
            "SELECT \(unescaped: Self.attachmentColumns) FROM attachments WHERE app_id = \(appId) AND id = \(id)"
        ).first.map(Self.attachment)
    }

    public func unattachedAttachments(createdBefore: Int64, limit: Int) async throws -> [AttachmentRecord] {
        try await rows(
            """
            SELECT \(unescaped: Self.attachmentColumns) FROM attachments
            WHERE message_id IS NULL AND created_at < \(createdBefore) ORDER BY created_at, id LIMIT \(Int64(limit))
            """
        ).map(Self.attachment)
    }

    public func deleteAttachment(appId: String, id: String, unattachedOnly: Bool) async throws -> Bool {
        try await rows(
            """
            DELETE FROM attachments
            WHERE app_id = \(appId) AND id = \(id) AND (NOT \(unattachedOnly) OR message_id IS NULL)
            RETURNING id
            """
        ).count > 0
    }

    static func attachment(_ row: PostgresRow) throws -> AttachmentRecord {
        let columns = row.makeRandomAccess()
        return AttachmentRecord(
            appId: try columns[1].decode(String.self),
            attachment: Attachment(
                id: try columns[0].decode(String.self), conversationId: try columns[2].decode(String.self),
                uploader: try columns[3].decode(String.self), name: try columns[4].decode(String.self),
                contentType: try columns[5].decode(String.self), size: try columns[6].decode(Int64.self),
                sha256: try columns[7].decode(String.self), width: try columns[8].decode(Int32?.self).map(Int.init),
                height: try columns[9].decode(Int32?.self).map(Int.init), createdAt: try columns[10].decode(Int64.self)
            ),
            messageId: try columns[11].decode(String?.self)
        )
    }
}
