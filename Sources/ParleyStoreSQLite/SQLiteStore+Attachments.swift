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
                db,
                sql: """
                    SELECT \(Self.attachmentColumns) FROM attachments
                    WHERE app_id = ? AND id = ? AND removed_at IS NULL
                    """,
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
                    WHERE message_id IS NULL AND (created_at < ? OR removed_at IS NOT NULL) ORDER BY created_at, id
                    LIMIT ?
                    """,
                arguments: [createdBefore, limit]
            ).map(Self.attachment)
        }
    }

    // MARK: In the writer's transactions

    /// The uploads with these ids that are not removed, by id.
    static func fetchAttachments(_ db: Database, appId: String, ids: [String]) throws -> [String: AttachmentRecord] {
        var records: [String: AttachmentRecord] = [:]
        for id in ids {
            if let row = try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT \(attachmentColumns) FROM attachments WHERE app_id = ? AND id = ? AND removed_at IS NULL
                        """
                ),
                arguments: [appId, id]
            ) {
                records[id] = attachment(row)
            }
        }
        return records
    }

    /// `messageId` takes these uploads (checked by ``Attachments/resolve(_:records:appId:conversationId:actor:keeping:taken:)``).
    static func attachFiles(_ db: Database, appId: String, ids: some Sequence<String>, messageId: String) throws {
        for id in ids {
            try db.cachedStatement(
                sql: "UPDATE attachments SET message_id = ? WHERE app_id = ? AND id = ? AND removed_at IS NULL"
            ).execute(arguments: [messageId, appId, id])
        }
    }

    /// These uploads leave their message and are removed: no link serves them; the sweeper deletes their bytes.
    static func removeFiles(_ db: Database, appId: String, ids: some Sequence<String>, now: Int64) throws {
        for id in ids {
            try db.cachedStatement(
                sql: "UPDATE attachments SET message_id = NULL, removed_at = ? WHERE app_id = ? AND id = ?"
            ).execute(arguments: [now, appId, id])
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
