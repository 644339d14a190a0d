import Foundation
import GRDB
import ParleyProtocol
import ParleyStore

extension SQLiteStore {
    public func removeInvalidToken(
        appId: String, uid: String, deviceId: String, token: String, invalidSince: Int64?
    ) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: """
                    DELETE FROM devices WHERE app_id = ? AND uid = ? AND device_id = ? AND token = ?
                    AND (? IS NULL OR updated_at <= ?)
                    """,
                arguments: [appId, uid, deviceId, token, invalidSince, invalidSince]
            )
            let removed = db.changesCount > 0
            if removed {
                try db.execute(
                    sql: "DELETE FROM push_jobs WHERE app_id = ? AND token = ?", arguments: [appId, token]
                )
            }
            return removed
        }
    }

    public func pushOutbox(limit: Int) async throws -> [PushOutboxEntry] {
        try await pool.read { db in
            let decoder = JSONDecoder()
            return try Row.fetchAll(
                db,
                sql: """
                    SELECT o.id, o.app_id, c.id AS conversation_id, o.seq, o.created_at, e.body
                    FROM push_outbox o
                    JOIN conversations c ON c.pk = o.conversation_pk
                    LEFT JOIN events e ON e.conversation_pk = o.conversation_pk AND e.seq = o.seq
                    ORDER BY o.id LIMIT ?
                    """,
                arguments: [limit]
            ).map { row in
                let body: Data? = row["body"]
                return PushOutboxEntry(
                    id: row["id"], appId: row["app_id"], conversationId: row["conversation_id"], seq: row["seq"],
                    message: try body.flatMap { try PushQueueRows.message(in: $0, decoder: decoder) },
                    createdAt: row["created_at"]
                )
            }
        }
    }

    @discardableResult
    public func expandPushOutbox(_ expansions: [PushExpansion]) async throws -> Int {
        guard !expansions.isEmpty else { return 0 }
        return try await pool.write { db in
            var inserted = 0
            for expansion in expansions {
                let delete = try db.cachedStatement(sql: "DELETE FROM push_outbox WHERE id = ?")
                try delete.execute(arguments: [expansion.entryId])
                guard db.changesCount > 0 else { continue }
                for job in expansion.jobs {
                    try db.cachedStatement(
                        sql: """
                            INSERT INTO push_jobs (app_id, uid, device_id, platform, token, environment, collapse_id,
                                payload, created_at, attempts, not_before)
                            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                            """
                    ).execute(
                        arguments: [
                            job.appId, job.uid, job.deviceId, job.platform.rawValue, job.token,
                            job.environment.rawValue, job.collapseId, Data(job.payload), job.createdAt, job.attempts,
                            job.notBefore,
                        ]
                    )
                    inserted += 1
                }
            }
            return inserted
        }
    }

    public func claimPushJobs(owner: String, now: Int64, leaseUntil: Int64, limit: Int) async throws -> [PushJob] {
        try await pool.write { db in
            try Row.fetchAll(
                db,
                sql: """
                    UPDATE push_jobs SET lease_owner = ?, lease_until = ?
                    WHERE id IN (
                        SELECT id FROM push_jobs WHERE not_before <= ? AND lease_until <= ? ORDER BY id LIMIT ?
                    )
                    RETURNING \(PushQueueRows.jobColumns)
                    """,
                arguments: [owner, leaseUntil, now, now, limit]
            ).map(Self.pushJob).sorted { $0.id < $1.id }
        }
    }

    public func completePushJob(id: Int64) async throws {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM push_jobs WHERE id = ?", arguments: [id])
        }
    }

    public func retryPushJob(id: Int64, attempts: Int, notBefore: Int64) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    UPDATE push_jobs SET attempts = ?, not_before = ?, lease_owner = NULL, lease_until = 0 WHERE id = ?
                    """,
                arguments: [attempts, notBefore, id]
            )
        }
    }

    public func releasePushJobs(owner: String?) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    UPDATE push_jobs SET lease_owner = NULL, lease_until = 0
                    WHERE lease_owner IS NOT NULL AND (? IS NULL OR lease_owner = ?)
                    """,
                arguments: [owner, owner]
            )
        }
    }

    public func nextPushJobDue() async throws -> Int64? {
        try await pool.read { db in
            try Int64.fetchOne(db, sql: "SELECT MIN(MAX(not_before, lease_until)) FROM push_jobs")
        }
    }

    public func pushQueueDepth() async throws -> PushQueueDepth {
        try await pool.read { db in
            PushQueueDepth(
                outbox: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM push_outbox") ?? 0,
                jobs: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM push_jobs") ?? 0
            )
        }
    }

    static func pushJob(_ row: Row) throws -> PushJob {
        let platform: String = row["platform"]
        let environment: String = row["environment"]
        guard let platform = PushPlatform(rawValue: platform), let environment = PushEnvironment(rawValue: environment)
        else { throw DatabaseError(message: "Unknown push platform or environment in the push_jobs table.") }
        let payload: Data = row["payload"]
        return PushJob(
            id: row["id"], appId: row["app_id"], uid: row["uid"], deviceId: row["device_id"], platform: platform,
            token: row["token"], environment: environment, collapseId: row["collapse_id"], payload: [UInt8](payload),
            createdAt: row["created_at"], attempts: row["attempts"], notBefore: row["not_before"]
        )
    }
}
