import Foundation

/// How the server reaches the Apple Push Notification service (token-based authentication).
///
/// With no APNs configuration (``ServerConfiguration/apns`` nil), push is off: the server logs one line at start
/// and records nothing for pushes. With one, ``buildApplication(_:store:cluster:clock:logger:onServerRunning:)``
/// loads the key first and throws ``PushConfigurationError`` when anything is wrong, so a bad key stops the start
/// instead of failing every push later.
public struct APNsConfiguration: Sendable, Hashable {
    /// Path of the `.p8` signing key from the Apple Developer account (a PKCS #8 P-256 key in PEM).
    public var keyFile: String
    /// The key's 10-character identifier (`kid` of the provider token).
    public var keyId: String
    /// The 10-character Team ID (`iss` of the provider token).
    public var teamId: String
    /// The app's bundle id (`apns-topic`).
    public var topic: String
    /// Where to send instead of Apple's hosts (both environments); for tests and relays. Nil: a device registered
    /// for `production` goes to `https://api.push.apple.com`, one for `sandbox` to `https://api.sandbox.push.apple.com`.
    public var endpoint: URL?
    /// A PEM file of CA certificates to trust instead of the system's (a test stand-in's own CA, say).
    public var trustRootsFile: String?
    /// How long one request may take before it counts as failed (and is retried).
    public var requestTimeout: Duration = .seconds(15)
    /// Most requests in flight at once (HTTP/2 streams over the pooled connections).
    public var maxConcurrentRequests: Int = 64

    public init(keyFile: String, keyId: String, teamId: String, topic: String) {
        self.keyFile = keyFile
        self.keyId = keyId
        self.teamId = teamId
        self.topic = topic
    }

    /// Checks the identifiers, the key file, the endpoint and the trust roots, as the server does at start.
    ///
    /// - Throws: ``PushConfigurationError`` naming what is wrong.
    public func validate() throws {
        _ = try APNsProviderToken.load(self)
        _ = try APNsClient.trustRoots(self)
        try APNsClient.checkEndpoint(self)
    }
}

/// How pushes that could not be sent are tried again.
public struct PushRetryPolicy: Sendable, Hashable {
    /// The wait after the first failure; doubled after each further one.
    public var initialDelay: Duration = .seconds(1)
    /// The longest wait between two attempts.
    public var maximumDelay: Duration = .seconds(600)
    /// Attempts after which a push is given up (logged at warning).
    public var maximumAttempts: Int = 10
    /// A push older than this is given up instead of sent late (APNs `apns-expiration` is set to the same).
    public var expiry: Duration = .seconds(24 * 3600)

    public init() {}

    /// The wait before attempt `attempts + 1`, after `attempts` failures (at least 1).
    public func delay(afterAttempts attempts: Int) -> Duration {
        var delay = initialDelay
        for _ in 1..<max(attempts, 1) {
            delay *= 2
            if delay >= maximumDelay { return maximumDelay }
        }
        return min(delay, maximumDelay)
    }
}

/// Why the push configuration cannot be used; thrown at start.
public struct PushConfigurationError: Error, CustomStringConvertible, Sendable {
    public var description: String

    init(_ description: String) {
        self.description = description
    }
}
