import GRDB
import ParleyProtocol
import ParleyStore

extension SQLiteStore {
    static let deviceColumns = "device_id, platform, token, environment, created_at, updated_at"

    public func putDevice(appId: String, uid: String, _ device: Device) async throws -> Device {
        try await pool.write { db in
            // The token moves here: any other device holding it loses it.
            try db.execute(
                sql: """
                    DELETE FROM devices WHERE app_id = ? AND platform = ? AND token = ?
                    AND NOT (uid = ? AND device_id = ?)
                    """,
                arguments: [appId, device.platform.rawValue, device.token, uid, device.deviceId]
            )
            // Pushes waiting for the token's earlier holder never reach its new one (another user, maybe).
            try db.execute(
                sql: """
                    DELETE FROM push_jobs WHERE app_id = ? AND platform = ? AND token = ?
                    AND NOT (uid = ? AND device_id = ?)
                    """,
                arguments: [appId, device.platform.rawValue, device.token, uid, device.deviceId]
            )
            try db.execute(
                sql: """
                    INSERT INTO devices (app_id, uid, device_id, platform, token, environment, created_at, updated_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (app_id, uid, device_id) DO UPDATE SET
                        platform = excluded.platform, token = excluded.token, environment = excluded.environment,
                        updated_at = excluded.updated_at
                    """,
                arguments: [
                    appId, uid, device.deviceId, device.platform.rawValue, device.token, device.environment.rawValue,
                    device.createdAt, device.updatedAt,
                ]
            )
            let row = try Row.fetchOne(
                db,
                sql: "SELECT \(Self.deviceColumns) FROM devices WHERE app_id = ? AND uid = ? AND device_id = ?",
                arguments: [appId, uid, device.deviceId]
            )
            return try Self.device(row!)
        }
    }

    public func devices(appId: String, uid: String) async throws -> [Device] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT \(Self.deviceColumns) FROM devices WHERE app_id = ? AND uid = ? ORDER BY device_id",
                arguments: [appId, uid]
            ).map(Self.device)
        }
    }

    public func deleteDevice(appId: String, uid: String, deviceId: String) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: "DELETE FROM devices WHERE app_id = ? AND uid = ? AND device_id = ?",
                arguments: [appId, uid, deviceId]
            )
            let removed = db.changesCount > 0
            // A signed-out device gets none of the pushes still waiting for it.
            try db.execute(
                sql: "DELETE FROM push_jobs WHERE app_id = ? AND uid = ? AND device_id = ?",
                arguments: [appId, uid, deviceId]
            )
            return removed
        }
    }

    static func device(_ row: Row) throws -> Device {
        let platform: String = row["platform"]
        let environment: String = row["environment"]
        guard let platform = PushPlatform(rawValue: platform), let environment = PushEnvironment(rawValue: environment)
        else { throw DatabaseError(message: "Unknown push platform or environment in the devices table.") }
        return Device(
            deviceId: row["device_id"], platform: platform, token: row["token"], environment: environment,
            createdAt: row["created_at"], updatedAt: row["updated_at"]
        )
    }
}
