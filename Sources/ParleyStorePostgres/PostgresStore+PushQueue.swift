import Foundation
import ParleyProtocol
import ParleyStore
import PostgresNIO

extension PostgresStore {
    public func removeInvalidToken(
        appId: String, uid: String, deviceId: String, token: String, invalidSince: Int64?
    ) async throws -> Bool {
        try await withSession { session in
            try await session.transaction {
                let removed = try await !session.rows(
                    """
                    DELETE FROM devices WHERE app_id = \(appId) AND uid = \(uid) AND device_id = \(deviceId)
                    AND token = \(token) AND (\(invalidSince)::bigint IS NULL OR updated_at <= \(invalidSince))
                    RETURNING device_id
                    """
                ).isEmpty
                if removed {
                    try await session.execute("DELETE FROM push_jobs WHERE app_id = \(appId) AND token = \(token)")
                }
                return removed
            }
        }
    }

    public func pushOutbox(limit: Int) async throws -> [PushOutboxEntry] {
        let decoder = JSONDecoder()
        return try await rows(
            """
            SELECT o.id, o.app_id, c.id, o.seq, o.created_at, e.body
            FROM push_outbox o
            JOIN conversations c ON c.pk = o.conversation_pk
            LEFT JOIN events e ON e.conversation_pk = o.conversation_pk AND e.seq = o.seq
            ORDER BY o.id LIMIT \(limit)
            """
        ).map { row in
            let (id, appId, conversationId, seq, createdAt, body) = try row.decode(
                (Int64, String, String, Int64, Int64, ByteBuffer?).self
            )
            return PushOutboxEntry(
                id: id, appId: appId, conversationId: conversationId, seq: seq,
                message: try body.flatMap {
                    try PushQueueRows.message(in: Data($0.readableBytesView), decoder: decoder)
                },
                createdAt: createdAt
            )
        }
    }

    @discardableResult
    public func expandPushOutbox(_ expansions: [PushExpansion]) async throws -> Int {
        guard !expansions.isEmpty else { return 0 }
        return try await withSession { session in
            try await session.transaction {
                // Only the entries this transaction deleted yield jobs: another node expanding the same entries at
                // the same time deletes nothing and inserts nothing.
                let taken = Set(
                    try await session.rows(
                        "DELETE FROM push_outbox WHERE id = ANY(\(expansions.map(\.entryId))) RETURNING id"
                    ).map { try $0.decode(Int64.self) }
                )
                let jobs = expansions.filter { taken.contains($0.entryId) }.flatMap(\.jobs)
                guard !jobs.isEmpty else { return 0 }
                try await session.execute(
                    """
                    INSERT INTO push_jobs (app_id, uid, device_id, platform, token, environment, collapse_id, payload,
                        created_at, attempts, not_before)
                    SELECT * FROM unnest(\(jobs.map(\.appId)), \(jobs.map(\.uid)), \(jobs.map(\.deviceId)),
                        \(jobs.map(\.platform.rawValue)), \(jobs.map(\.token)), \(jobs.map(\.environment.rawValue)),
                        \(jobs.map(\.collapseId)), \(jobs.map { ByteBuffer(bytes: $0.payload) }),
                        \(jobs.map(\.createdAt)), \(jobs.map { Int32($0.attempts) }), \(jobs.map(\.notBefore)))
                    """
                )
                return jobs.count
            }
        }
    }

    public func claimPushJobs(owner: String, now: Int64, leaseUntil: Int64, limit: Int) async throws -> [PushJob] {
        // SKIP LOCKED: nodes claiming at once take different jobs instead of waiting for each other.
        try await rows(
            """
            UPDATE push_jobs SET lease_owner = \(owner), lease_until = \(leaseUntil)
            WHERE id IN (
                SELECT id FROM push_jobs WHERE not_before <= \(now) AND lease_until <= \(now)
                ORDER BY id LIMIT \(limit) FOR UPDATE SKIP LOCKED
            )
            RETURNING \(unescaped: PushQueueRows.jobColumns)
            """
        ).map(Self.pushJob).sorted { $0.id < $1.id }
    }

    public func completePushJob(id: Int64) async throws {
        try await execute("DELETE FROM push_jobs WHERE id = \(id)")
    }

    public func retryPushJob(id: Int64, attempts: Int, notBefore: Int64) async throws {
        try await execute(
            """
            UPDATE push_jobs SET attempts = \(Int32(attempts)), not_before = \(notBefore), lease_owner = NULL,
                lease_until = 0
            WHERE id = \(id)
            """
        )
    }

    public func releasePushJobs(owner: String?) async throws {
        try await execute(
            """
            UPDATE push_jobs SET lease_owner = NULL, lease_until = 0
            WHERE lease_owner IS NOT NULL AND (\(owner)::text IS NULL OR lease_owner = \(owner))
            """
        )
    }

    public func nextPushJobDue() async throws -> Int64? {
        try await rows("SELECT MIN(GREATEST(not_before, lease_until)) FROM push_jobs")[0].decode(Int64?.self)
    }

    public func pushQueueDepth() async throws -> PushQueueDepth {
        let row = try await rows("SELECT (SELECT count(*) FROM push_outbox), (SELECT count(*) FROM push_jobs)")[0]
        let (outbox, jobs) = try row.decode((Int64, Int64).self)
        return PushQueueDepth(outbox: Int(outbox), jobs: Int(jobs))
    }

    static func pushJob(_ row: PostgresRow) throws -> PushJob {
        let (
            id, appId, uid, deviceId, platform, token, environment, collapseId, payload, createdAt, attempts, notBefore
        ) =
            try row.decode(
                (Int64, String, String, String, String, String, String, String, ByteBuffer, Int64, Int32, Int64).self
            )
        guard let platform = PushPlatform(rawValue: platform), let environment = PushEnvironment(rawValue: environment)
        else { throw PostgresStoreError(.database, "Unknown push platform or environment in the push_jobs table.") }
        return PushJob(
            id: id, appId: appId, uid: uid, deviceId: deviceId, platform: platform, token: token,
            environment: environment, collapseId: collapseId, payload: Array(payload.readableBytesView),
            createdAt: createdAt, attempts: Int(attempts), notBefore: notBefore
        )
    }
}
