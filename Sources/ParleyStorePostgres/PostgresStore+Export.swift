import Foundation
import NIOCore
import ParleyProtocol
import ParleyStore
import PostgresNIO

// A user's data for an export (``UserExport``): their memberships and, page by page, the messages they sent.

extension PostgresStore {
    public func memberships(appId: String, uid: String) async throws -> [UserMembership] {
        try await withSession { session in
            try await session.transaction(isolation: .repeatableReadOnly) {
                let conversations = try await session.rows(
                    """
                    SELECT \(unescaped: Self.conversationColumns("c")) FROM participants p
                    JOIN conversations c ON c.pk = p.conversation_pk
                    WHERE p.uid = \(uid) AND c.app_id = \(appId) ORDER BY c.pk
                    """
                ).map(Self.conversationRow)
                var participants: [Int64: Participant] = [:]
                for row in try await session.rows(
                    """
                    SELECT p.conversation_pk, \(unescaped: Self.participantColumns("p")) FROM participants p
                    JOIN conversations c ON c.pk = p.conversation_pk
                    WHERE p.uid = \(uid) AND c.app_id = \(appId)
                    """
                ) {
                    let columns = try row.decode(
                        (Int64, String, String, Int64, Int64, Int64, Bool, Int64?).self
                    )
                    participants[columns.0] = Participant(
                        uid: columns.1, role: ParticipantRole(rawValue: columns.2) ?? .member, joinedAt: columns.3,
                        deliveredSeq: columns.4, readSeq: columns.5, muted: columns.6 ? true : nil,
                        mutedUntil: columns.7
                    )
                }
                return conversations.compactMap { row in
                    participants[row.pk].map { UserMembership(conversation: row.conversation, participant: $0) }
                }
            }
        }
    }

    public func exportMessages(appId: String, uid: String, after: UserExport.Position?, limit: Int, scan: Int)
        async throws -> UserExport.Page
    {
        try await withSession { session in
            try await session.transaction(isolation: .repeatableReadOnly) {
                // Every conversation the user ever joined: their stream of joins and departures.
                let conversations = try await session.rows(
                    "SELECT DISTINCT conversation_pk FROM memberships WHERE app_id = \(appId) AND uid = \(uid)"
                ).map { try $0.decode(Int64.self) }
                var walk = UserExport.Walk(conversations: conversations, after: after, limit: limit, scan: scan)
                let decoder = JSONDecoder()
                while let read = walk.next() {
                    // A body is read only for the user's messages.
                    let rows = try await session.rows(
                        """
                        SELECT seq, CASE WHEN actor = \(uid) AND message_index IS NOT NULL THEN body END FROM events
                        WHERE conversation_pk = \(read.conversationPK) AND seq > \(read.afterSeq)
                        ORDER BY seq LIMIT \(read.budget)
                        """
                    )
                    walk.take(
                        try rows.map { row in
                            let (seq, body) = try row.decode((Int64, ByteBuffer?).self)
                            return UserExport.Scanned(
                                position: UserExport.Position(conversationPK: read.conversationPK, seq: seq),
                                message: try body.map {
                                    try MessageLifecycle.message(in: $0.readableBytesView, decoder: decoder)
                                }
                            )
                        }
                    )
                }
                return walk.page
            }
        }
    }
}

extension PostgresStore {
    public func purgeUser(appId: String, uid: String, now: Int64) async throws -> UserPurge {
        try await withSession { session in
            try await session.transaction {
                guard
                    let user = try await session.rows(
                        """
                        SELECT \(unescaped: Self.userColumns) FROM users WHERE app_id = \(appId) AND uid = \(uid)
                        FOR UPDATE
                        """
                    ).first.map(Self.user)
                else { return .notFound }
                let participates = try await session.rows(
                    """
                    SELECT 1 FROM participants p JOIN conversations c ON c.pk = p.conversation_pk
                    WHERE p.uid = \(uid) AND c.app_id = \(appId) LIMIT 1
                    """
                )
                guard participates.isEmpty else { return .stillParticipates }
                for statement in PurgeStatement.allCases {
                    var bindings = PostgresBindings()
                    var sql = ""
                    var number = 0
                    var parameters = statement.parameters.makeIterator()
                    for character in statement.sql {
                        guard character == "?", let parameter = parameters.next() else {
                            sql.append(character)
                            continue
                        }
                        number += 1
                        sql += "$\(number)"
                        switch parameter {
                        case .appId: bindings.append(appId)
                        case .uid: bindings.append(uid)
                        case .now: bindings.append(now)
                        }
                    }
                    try await session.execute(PostgresQuery(unsafeSQL: sql, binds: bindings))
                }
                try await Self.queueUserEvent(appId: appId, user, name: .userDelete, at: now, run: session.rows)
                return .purged(user)
            }
        }
    }
}
