import Foundation
import GRDB
import ParleyProtocol
import ParleyStore

/// Uploads' records (``AttachmentRecord``): table `attachments` (migration "v12: attachments").
extension SQLiteStore {
    static let attachmentColumns = """
        id, app_id, conversation_id, uploader, name, content_type, size, sha256, width, height, created_at, message_id
        """

    public func insertAttachment(_ record: AttachmentRecord) async throws {
        let file = record.attachment
        try await pool.write { db in
            try db.execute(
                sql: "INSERT INTO attachments (\(Self.attachmentColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                arguments: [
                    file.id, record.appId, file.conversationId, file.uploader, file.name, file.contentType, file.size,
                    file.sha256, file.width, file.height, file.createdAt, record.messageId,
                ]
            )
        }
    }

    public func attachment(appId: String, id: String) async throws -> AttachmentRecord? {
        try await pool.read { db in
            try Row.fetchOne(
                db, sql: "SELECT \(Self.attachmentColumns) FROM attachments WHERE app_id = ? AND id = ?",
                arguments: [appId, id]
            ).map(Self.attachment)
        }
    }

    public func unattachedAttachments(createdBefore: Int64, limit: Int) async throws -> [AttachmentRecord] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.attachmentColumns) FROM attachments
                    WHERE message_id IS NULL AND created_at < ? ORDER BY created_at, id LIMIT ?
                    """,
                arguments: [createdBefore, limit]
            ).map(Self.attachment)
        }
    }

    public func deleteAttachment(appId: String, id: String, unattachedOnly: Bool) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: "DELETE FROM attachments WHERE app_id = ? AND id = ? AND (NOT ? OR message_id IS NULL)",
                arguments: [appId, id, unattachedOnly]
            )
            return db.changesCount > 0
        }
    }

    static func attachment(_ row: Row) -> AttachmentRecord {
        AttachmentRecord(
            appId: row["app_id"],
            attachment: Attachment(
                id: row["id"], conversationId: row["conversation_id"], uploader: row["uploader"], name: row["name"],
                contentType: row["content_type"], size: row["size"], sha256: row["sha256"], width: row["width"],
                height: row["height"], createdAt: row["created_at"]
            ),
            messageId: row["message_id"]
        )
    }
}
