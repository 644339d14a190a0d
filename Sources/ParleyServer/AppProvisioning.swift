import ParleyStore

/// An app with its secrets in clear: only ever shown when the app is created or its keys rotated.
public struct ProvisionedApp: Sendable, Hashable, Codable {
    public var appId: String
    public var name: String
    /// Development key: lets any client log in as any uid of the app.
    public var authKey: String
    /// Server-to-server key: create users, issue and revoke auth tokens.
    public var restAPIKey: String
}

/// Creating apps and rotating their keys: what an operator does, from `parley-server` or a test.
public enum AppProvisioning {
    /// Creates an app with fresh keys.
    public static func createApp(in store: any ParleyStore, name: String, appId: String? = nil) async throws
        -> ProvisionedApp
    {
        let app = ProvisionedApp(
            appId: appId ?? Secrets.randomHex(byteCount: 8), name: name,
            authKey: Secrets.randomHex(prefix: "ak_", byteCount: 20),
            restAPIKey: Secrets.randomHex(prefix: "rk_", byteCount: 20)
        )
        try await store.insertApp(
            AppRecord(
                id: app.appId, name: name, authKeyHash: Secrets.hash(app.authKey),
                restAPIKeyHash: Secrets.hash(app.restAPIKey), createdAt: wallClockMilliseconds()
            )
        )
        return app
    }

    /// Creates the default app when the store has no app yet; returns it, or nil when apps exist.
    public static func ensureDefaultApp(in store: any ParleyStore) async throws -> ProvisionedApp? {
        guard try await store.apps().isEmpty else { return nil }
        return try await createApp(in: store, name: "Default app")
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
