import ParleyStore

/// An app with its secrets in clear: only ever shown when the app is created or its keys rotated.
public struct ProvisionedApp: Sendable, Hashable, Codable {
    public var appId: String
    public var name: String
    /// Development key: lets any client log in as any uid of the app.
    public var authKey: String
    /// Server-to-server key: create users, issue and revoke auth tokens.
    public var restAPIKey: String

    public init(appId: String, name: String, authKey: String, restAPIKey: String) {
        self.appId = appId
        self.name = name
        self.authKey = authKey
        self.restAPIKey = restAPIKey
    }
}

/// Creating apps and rotating their keys: what an operator does, from `parley-server` or a test.
public enum AppProvisioning {
    /// Creates an app with fresh keys.
    public static func createApp(in store: any ParleyStore, name: String, appId: String? = nil) async throws
        -> ProvisionedApp
    {
        let app = newApp(name: name, appId: appId)
        try await store.insertApp(record(of: app))
        return app
    }

    /// Creates the default app when the store has no app yet; returns it, or nil when apps exist. Nodes starting
    /// together on one empty database create one default app between them.
    public static func ensureDefaultApp(in store: any ParleyStore) async throws -> ProvisionedApp? {
        let app = newApp(name: "Default app", appId: nil)
        return try await store.insertFirstApp(record(of: app)) ? app : nil
    }

    private static func newApp(name: String, appId: String?) -> ProvisionedApp {
        ProvisionedApp(
            appId: appId ?? Secrets.randomHex(byteCount: 8), name: name,
            authKey: Secrets.randomHex(prefix: "ak_", byteCount: 20),
            restAPIKey: Secrets.randomHex(prefix: "rk_", byteCount: 20)
        )
    }

    private static func record(of app: ProvisionedApp) -> AppRecord {
        AppRecord(
            id: app.appId, name: app.name, authKeyHash: Secrets.hash(app.authKey),
            restAPIKeyHash: Secrets.hash(app.restAPIKey), createdAt: wallClockMilliseconds()
        )
    }

    /// Replaces both keys of an app; the old ones stop working at once.
    public static func rotateKeys(in store: any ParleyStore, appId: String) async throws -> ProvisionedApp? {
        guard let record = try await store.app(id: appId) else { return nil }
        let authKey = Secrets.randomHex(prefix: "ak_", byteCount: 20)
        let restAPIKey = Secrets.randomHex(prefix: "rk_", byteCount: 20)
        guard
            try await store.updateAppKeys(
                appId: appId, authKeyHash: Secrets.hash(authKey), restAPIKeyHash: Secrets.hash(restAPIKey)
            )
        else { return nil }
        return ProvisionedApp(appId: appId, name: record.name, authKey: authKey, restAPIKey: restAPIKey)
    }
}
