import ParleyProtocol
import ParleyStore
import PostgresNIO

extension PostgresStore {
    static let deviceColumns = "device_id, platform, token, environment, created_at, updated_at"

    public func putDevice(appId: String, uid: String, _ device: Device) async throws -> Device {
        try await withSession { session in
            try await session.transaction {
                // The token moves here: any other device holding it loses it.
                try await session.execute(
                    """
                    DELETE FROM devices WHERE app_id = \(appId) AND platform = \(device.platform.rawValue)
                    AND token = \(device.token) AND NOT (uid = \(uid) AND device_id = \(device.deviceId))
                    """
                )
                // Pushes waiting for the token's earlier holder never reach its new one (another user, maybe).
                try await session.execute(
                    """
                    DELETE FROM push_jobs WHERE app_id = \(appId) AND platform = \(device.platform.rawValue)
                    AND token = \(device.token) AND NOT (uid = \(uid) AND device_id = \(device.deviceId))
                    """
                )
                let rows = try await session.rows(
                    """
                    INSERT INTO devices (app_id, uid, device_id, platform, token, environment, created_at, updated_at)
                    VALUES (\(appId), \(uid), \(device.deviceId), \(device.platform.rawValue), \(device.token),
                        \(device.environment.rawValue), \(device.createdAt), \(device.updatedAt))
                    ON CONFLICT (app_id, uid, device_id) DO UPDATE SET
                        platform = excluded.platform, token = excluded.token, environment = excluded.environment,
                        updated_at = excluded.updated_at
                    RETURNING \(unescaped: Self.deviceColumns)
                    """
                )
                return try Self.device(rows[0])
            }
        }
    }

    public func devices(appId: String, uid: String) async throws -> [Device] {
        try await rows(
            """
            SELECT \(unescaped: Self.deviceColumns) FROM devices WHERE app_id = \(appId) AND uid = \(uid)
            ORDER BY device_id COLLATE "C"
            """
        ).map(Self.device)
    }

    public func deleteDevice(appId: String, uid: String, deviceId: String) async throws -> Bool {
        try await withSession { session in
            try await session.transaction {
                let removed = try await !session.rows(
                    """
                    DELETE FROM devices WHERE app_id = \(appId) AND uid = \(uid) AND device_id = \(deviceId)
                    RETURNING device_id
                    """
                ).isEmpty
                // A signed-out device gets none of the pushes still waiting for it.
                try await session.execute(
                    "DELETE FROM push_jobs WHERE app_id = \(appId) AND uid = \(uid) AND device_id = \(deviceId)"
                )
                return removed
            }
        }
    }

    static func device(_ row: PostgresRow) throws -> Device {
        let (deviceId, platform, token, environment, createdAt, updatedAt) = try row.decode(
            (String, String, String, String, Int64, Int64).self
        )
        guard let platform = PushPlatform(rawValue: platform), let environment = PushEnvironment(rawValue: environment)
        else { throw PostgresStoreError(.database, "Unknown push platform or environment in the devices table.") }
        return Device(
            deviceId: deviceId, platform: platform, token: token, environment: environment, createdAt: createdAt,
            updatedAt: updatedAt
        )
    }
}
