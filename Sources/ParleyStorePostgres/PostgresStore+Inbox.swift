import Foundation
import NIOCore
import ParleyProtocol
import ParleyStore
import PostgresNIO

// The inbox on PostgreSQL, as on SQLite (SQLiteStore+Inbox.swift): one statement for the page of participations with
// their counts and archive state and the unread total, then one statement for the page's last messages and one for
// the other members of its direct conversations, in one transaction so that the three agree. Every step is a loop
// over keys (the user's participations, then the page's conversations: `LATERAL`, `OFFSET 0` so that the planner
// keeps it): planned as joins of sets, a fresh database's missing statistics made the planner walk every conversation
// of the app and scan the participants (23 ms for a user in 500 conversations instead of a few).

extension PostgresStore {
    public func inbox(_ request: InboxRequest) async throws -> InboxPage {
        let page = Self.inboxQuery(request)
        let found: InboxPage? = try await withSession { session in
            try await session.transaction {
                var total = 0
                var pages: [(row: ConversationRow, membership: Participant, counts: (Int, Int), archived: Bool)] = []
                for row in try await session.rows(page) {
                    let columns = row.makeRandomAccess()
                    let base = Self.conversationColumnCount
                    let membership = Participant(
                        uid: try columns[base].decode(String.self),
                        role: ParticipantRole(rawValue: try columns[base + 1].decode(String.self)) ?? .member,
                        joinedAt: try columns[base + 2].decode(Int64.self),
                        deliveredSeq: try columns[base + 3].decode(Int64.self),
                        readSeq: try columns[base + 4].decode(Int64.self),
                        muted: try columns[base + 5].decode(Bool.self) ? true : nil,
                        mutedUntil: try columns[base + 6].decode(Int64?.self)
                    )
                    let unread = Int(try columns[base + 7].decode(Int64.self))
                    let mentions = Int(try columns[base + 8].decode(Int64.self))
                    let archived = try columns[base + 9].decode(Bool.self)
                    total = Int(try columns[base + 10].decode(Int64.self))
                    pages.append((try Self.conversationRow(row), membership, (unread, mentions), archived))
                }
                guard !pages.isEmpty else { return nil }
                let pks = pages.map(\.row.pk)
                let decoder = JSONDecoder()
                var lastMessages: [Int64: Message] = [:]
                for row in try await session.rows(
                    """
                    SELECT x.pk, e.body FROM unnest(\(pks)::bigint[]) AS x(pk)
                    CROSS JOIN LATERAL (
                        SELECT e.body FROM events e
                        WHERE e.conversation_pk = x.pk AND e.message_index IS NOT NULL
                        AND NOT EXISTS (
                            SELECT 1 FROM blocks b
                            WHERE b.app_id = \(request.appId) AND b.blocker = \(request.uid) AND b.blocked = e.actor
                        )
                        ORDER BY e.seq DESC LIMIT 1
                    ) e
                    """
                ) {
                    let (pk, body) = try row.decode((Int64, ByteBuffer).self)
                    lastMessages[pk] = try MessageLifecycle.message(in: body.readableBytesView, decoder: decoder)
                }
                var others: [Int64: User] = [:]
                let direct = pages.filter { $0.row.conversation.type == .direct }.map(\.row.pk)
                if !direct.isEmpty {
                    for row in try await session.rows(
                        """
                        SELECT x.pk, \(unescaped: Self.userColumns("u"))
                        FROM unnest(\(direct)::bigint[]) AS x(pk)
                        CROSS JOIN LATERAL (
                            SELECT p.uid FROM participants p
                            WHERE p.conversation_pk = x.pk AND p.uid != \(request.uid) LIMIT 1
                        ) other
                        JOIN users u ON u.app_id = \(request.appId) AND u.uid = other.uid
                        """
                    ) {
                        let columns = row.makeRandomAccess()
                        others[try columns[0].decode(Int64.self)] = try Self.user(columns, from: 1)
                    }
                }
                let rows = pages.map { page in
                    InboxRow(
                        conversationPK: page.row.pk,
                        entry: InboxEntry(
                            conversation: page.row.conversation, lastMessage: lastMessages[page.row.pk],
                            unread: page.counts.0, unreadMentions: page.counts.1, membership: page.membership,
                            otherMember: others[page.row.pk], archived: page.archived,
                            lastActivityAt: page.row.lastActivityAt
                        )
                    )
                }
                return InboxPage(rows: rows, totalUnread: total, request: request)
            }
        }
        if let found { return found }
        // The page is empty (filters, or past the end): the total is read on its own.
        let unread = try await unread(appId: request.appId, uid: request.uid, conversationIds: nil)
        return InboxPage(entries: [], totalUnread: unread.total)
    }

    /// The page's statement (as `SQLiteStore.inboxSQL`): the user's participations with their counts and the total
    /// over all of them, then the filters, the order and the cursor.
    static func inboxQuery(_ request: InboxRequest) -> PostgresQuery {
        var binds = PostgresBindings()
        func bind(_ value: some PostgresNonThrowingEncodable & Sendable) -> String {
            binds.append(value)
            return "$\(binds.count)"
        }
        let uid = bind(request.uid)
        let app = bind(request.appId)
        let conditions = request.conditionsSQL { value in
            switch value {
            case .bool(let flag): return bind(flag)
            case .int(let number): return bind(number)
            case .text(let text): return bind(text)
            }
        }
        let order = InboxCursor.orderSQL(request.sort)
        let limit = bind(request.limit)
        // The counts are computed for every participation, the conversation's and participant's columns read for the
        // page only.
        let sql = """
            SELECT \(Self.conversationColumns("c")), \(Self.participantColumns("p")),
                x.unread, x.unread_mentions, x.archived, x.total_unread
            FROM (
                SELECT * FROM (
                    SELECT *, (sum(unread) OVER ())::bigint AS total_unread FROM (
                        SELECT c.pk, c.id, c.type, c.last_activity_at,
                            greatest(0, c.message_count - p.read_message_count - CASE WHEN c.deleted_message_count = 0
                            THEN 0 ELSE (
                                SELECT count(*) FROM deleted_messages d
                                WHERE d.conversation_pk = c.pk AND d.message_index > p.read_message_count
                            ) END)::bigint AS unread,
                            (
                                SELECT count(*) FROM mentions m
                                WHERE m.app_id = c.app_id AND m.uid = p.uid AND m.conversation_pk = c.pk
                                AND m.seq > p.read_seq
                            ) AS unread_mentions,
                            coalesce(a.message_count >= c.message_count, false) AS archived
                        FROM participants p CROSS JOIN LATERAL (
                            SELECT * FROM conversations c
                            WHERE c.pk = p.conversation_pk AND c.app_id = \(app) AND c.deleted_at IS NULL OFFSET 0
                        ) c
                        LEFT JOIN conversation_archives a ON a.conversation_pk = c.pk AND a.uid = p.uid
                        WHERE p.uid = \(uid)
                    ) participations
                ) counted
                WHERE \(conditions)
                ORDER BY \(order("")) LIMIT \(limit)
            ) x
            JOIN conversations c ON c.pk = x.pk
            JOIN participants p ON p.conversation_pk = x.pk AND p.uid = \(uid)
            ORDER BY \(order("x."))
            """
        return PostgresQuery(unsafeSQL: sql, binds: binds)
    }

    public func setArchived(appId: String, conversationId: String, uid: String, archived: Bool) async throws -> Bool {
        try await withSession { session in
            try await session.transaction {
                guard
                    let row = try await session.rows(
                        """
                        SELECT c.pk, c.message_count FROM conversations c
                        JOIN participants p ON p.conversation_pk = c.pk AND p.uid = \(uid)
                        WHERE c.id = \(conversationId) AND c.app_id = \(appId) AND c.deleted_at IS NULL
                        """
                    ).first
                else { return false }
                let (pk, messageCount) = try row.decode((Int64, Int64).self)
                if archived {
                    try await session.execute(
                        """
                        INSERT INTO conversation_archives (conversation_pk, uid, message_count)
                        VALUES (\(pk), \(uid), \(messageCount))
                        ON CONFLICT (conversation_pk, uid) DO UPDATE SET message_count = excluded.message_count
                        """
                    )
                } else {
                    try await session.execute(
                        "DELETE FROM conversation_archives WHERE conversation_pk = \(pk) AND uid = \(uid)")
                }
                return true
            }
        }
    }
}
