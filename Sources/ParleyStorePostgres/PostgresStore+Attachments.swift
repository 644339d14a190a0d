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
            """
            SELECT \(unescaped: Self.attachmentColumns) FROM attachments
            WHERE app_id = \(appId) AND id = \(id) AND removed_at IS NULL
            """
        ).first.map(Self.attachment)
    }

    public func unattachedAttachments(createdBefore: Int64, limit: Int) async throws -> [AttachmentRecord] {
        try await rows(
            """
            SELECT \(unescaped: Self.attachmentColumns) FROM attachments
            WHERE message_id IS NULL AND (created_at < \(createdBefore) OR removed_at IS NOT NULL)
            ORDER BY created_at, id LIMIT \(Int64(limit))
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

/// Uploads in the writer's transactions (``Attachments``).
extension BatchTransaction {
    /// The uploads with these ids that are not removed, by id, locked until the transaction ends: a message that
    /// takes one on another node waits, then finds it taken.
    func lockAttachments(appId: String?, ids: some Collection<String>) async throws -> [String: AttachmentRecord] {
        guard !ids.isEmpty else { return [:] }
        var records: [String: AttachmentRecord] = [:]
        for row in try await rows(
            """
            SELECT \(unescaped: PostgresStore.attachmentColumns) FROM attachments
            WHERE id = ANY(\(Array(ids))) AND removed_at IS NULL AND (\(appId)::text IS NULL OR app_id = \(appId))
            ORDER BY id FOR UPDATE
            """
        ) {
            let record = try PostgresStore.attachment(row)
            records[record.id] = record
        }
        return records
    }

    /// Each message takes its uploads (checked by ``Attachments/resolve(_:records:appId:conversationId:actor:keeping:taken:)``).
    func attachFiles(_ taken: [(ids: [String], messageId: String)]) async throws {
        let pairs = taken.flatMap { entry in entry.ids.map { ($0, entry.messageId) } }
        guard !pairs.isEmpty else { return }
        try await execute(
            """
            UPDATE attachments a SET message_id = u.message_id
            FROM unnest(\(pairs.map(\.0)), \(pairs.map(\.1))) AS u(id, message_id)
            WHERE a.id = u.id AND a.removed_at IS NULL
            """
        )
    }

    /// These uploads leave their message and are removed: no link serves them; the sweeper deletes their bytes.
    func removeFiles(appId: String, ids: [String], now: Int64) async throws {
        guard !ids.isEmpty else { return }
        try await execute(
            """
            UPDATE attachments SET message_id = NULL, removed_at = \(now) WHERE app_id = \(appId) AND id = ANY(\(ids))
            """
        )
    }
}
