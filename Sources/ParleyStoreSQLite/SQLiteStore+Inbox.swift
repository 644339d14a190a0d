import Foundation
import GRDB
import ParleyProtocol
import ParleyStore

// The inbox on SQLite: one statement lists the user's participations with each conversation's unread and mention
// counts and archive state (and the unread total over all of them), filtered, sorted and cut to the page; then, for
// the page only, one indexed lookup per conversation for its last message and, in a direct conversation, the other
// member. An archive is a row of `conversation_archives` holding the conversation's message count when it was
// archived: a message after it (a higher count) brings the conversation back without writing anything.

extension SQLiteStore {
    public func inbox(_ request: InboxRequest) async throws -> InboxPage {
        let (sql, arguments) = Self.inboxSQL(request)
        return try await pool.read { db in
            var total = 0
            var rows: [InboxRow] = []
            let decoder = JSONDecoder()
            for row in try Row.fetchAll(db.cachedStatement(sql: sql), arguments: arguments) {
                total = row["total_unread"]
                let conversation = try Self.conversationRow(row)
                let pk = conversation.pk
                let lastMessage = try Row.fetchOne(
                    db.cachedStatement(
                        sql: """
                            SELECT e.body FROM events e
                            WHERE e.conversation_pk = ? AND e.message_index IS NOT NULL
                            AND NOT EXISTS (
                                SELECT 1 FROM blocks b WHERE b.app_id = ? AND b.blocker = ? AND b.blocked = e.actor
                            )
                            ORDER BY e.seq DESC LIMIT 1
                            """
                    ),
                    arguments: [pk, request.appId, request.uid]
                ).map { try MessageLifecycle.message(in: $0[0] as Data, decoder: decoder) }
                var other: User?
                if conversation.conversation.type == .direct {
                    other = try Row.fetchOne(
                        db.cachedStatement(
                            sql: """
                                SELECT \(Self.userColumns("u")) FROM participants p CROSS JOIN users u ON u.app_id = ? AND u.uid = p.uid
                                WHERE p.conversation_pk = ? AND p.uid != ?
                                """
                        ),
                        arguments: [request.appId, pk, request.uid]
                    ).map { try Self.user($0, from: 0) }
                }
                rows.append(
                    InboxRow(
                        conversationPK: pk,
                        entry: InboxEntry(
                            conversation: conversation.conversation, lastMessage: lastMessage,
                            unread: row["unread"], unreadMentions: row["unread_mentions"],
                            membership: Self.participant(row), otherMember: other, archived: row["archived"],
                            lastActivityAt: conversation.lastActivityAt
                        )
                    )
                )
            }
            if rows.isEmpty {
                // The page is empty (filters, or past the end): the total is read on its own.
                total = try Self.fetchUnread(db, appId: request.appId, uid: request.uid, conversationIds: nil).total
            }
            return InboxPage(rows: rows, totalUnread: total, request: request)
        }
    }

    /// The page's statement: the user's participations (CROSS JOIN: they lead, not the app's conversations), the
    /// counts of each (unread as ``unread(appId:uid:conversationIds:)`` counts them) and the total over all of them
    /// (a window over the inner query, before the filters), then the filters, the order and the cursor.
    static func inboxSQL(_ request: InboxRequest) -> (String, StatementArguments) {
        var arguments: StatementArguments = [request.uid, request.appId]
        let conditions = request.conditionsSQL { value in
            switch value {
            case .bool(let flag): arguments += [flag]
            case .int(let number): arguments += [number]
            case .text(let text): arguments += [text]
            }
            return "?"
        }
        let order = InboxCursor.orderSQL(request.sort)
        arguments += [request.limit, request.uid]
        // The counts are computed for every participation, the conversation's and participant's columns read for the
        // page only.
        let sql = """
            SELECT c.*, p.uid, p.role, p.joined_at, p.delivered_seq, p.read_seq, p.muted, p.muted_until,
                x.unread, x.unread_mentions, x.archived, x.total_unread
            FROM (
                SELECT * FROM (
                    SELECT *, sum(unread) OVER () AS total_unread FROM (
                        SELECT c.pk, c.id, c.type, c.last_activity_at,
                            max(0, c.message_count - p.read_message_count - CASE WHEN c.deleted_message_count = 0 THEN 0
                            ELSE (
                                SELECT COUNT(*) FROM deleted_messages d
                                WHERE d.conversation_pk = c.pk AND d.message_index > p.read_message_count
                            ) END) AS unread,
                            (
                                SELECT COUNT(*) FROM mentions m
                                WHERE m.app_id = c.app_id AND m.uid = p.uid AND m.conversation_pk = c.pk
                                AND m.seq > p.read_seq
                            ) AS unread_mentions,
                            coalesce(a.message_count >= c.message_count, 0) AS archived
                        FROM participants p CROSS JOIN conversations c ON c.pk = p.conversation_pk
                        LEFT JOIN conversation_archives a ON a.conversation_pk = c.pk AND a.uid = p.uid
                        WHERE p.uid = ? AND c.app_id = ? AND c.deleted_at IS NULL
                    )
                )
                WHERE \(conditions)
                ORDER BY \(order("")) LIMIT ?
            ) x
            CROSS JOIN conversations c ON c.pk = x.pk
            CROSS JOIN participants p ON p.conversation_pk = x.pk AND p.uid = ?
            ORDER BY \(order("x."))
            """
        return (sql, arguments)
    }

    public func setArchived(appId: String, conversationId: String, uid: String, archived: Bool) async throws -> Bool {
        try await pool.write { db in
            guard
                let (pk, messageCount) = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT c.pk, c.message_count FROM conversations c
                        JOIN participants p ON p.conversation_pk = c.pk AND p.uid = ?
                        WHERE c.id = ? AND c.app_id = ? AND c.deleted_at IS NULL
                        """,
                    arguments: [uid, conversationId, appId]
                ).map({ ($0[0] as Int64, $0[1] as Int64) })
            else { return false }
            if archived {
                try db.execute(
                    sql: """
                        INSERT INTO conversation_archives (conversation_pk, uid, message_count) VALUES (?, ?, ?)
                        ON CONFLICT (conversation_pk, uid) DO UPDATE SET message_count = excluded.message_count
                        """,
                    arguments: [pk, uid, messageCount]
                )
            } else {
                try db.execute(
                    sql: "DELETE FROM conversation_archives WHERE conversation_pk = ? AND uid = ?",
                    arguments: [pk, uid]
                )
            }
            return true
        }
    }
}
