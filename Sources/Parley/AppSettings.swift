import Foundation
import Logging

/// How a ``ParleyClient`` talks to its server and manages its socket, built with ``AppSettings/Builder``.
///
/// ```swift
/// let settings = AppSettings.Builder()
///     .serverURL(URL(string: "http://127.0.0.1:8080")!)
///     .setRegion(region: "eu")
///     .autoEstablishSocketConnection(true)
///     .build()
/// ```
public struct AppSettings: Sendable {
    /// The Parley server (`http` or `https`); the WebSocket uses the same host (`ws`/`wss`).
    public var serverURL: URL
    /// A label for the deployment the app talks to (the reference SDKs' region). Informational.
    public var region: String?
    /// Auto mode (true, the default): the SDK connects in the foreground and disconnects in the background.
    /// Manual mode (false): the app calls `connect()`, `disconnect()` and `ping()`.
    public var autoEstablishSocketConnection: Bool
    /// Receive presence for every user of the app, not only for users who share a conversation.
    public var subscribePresenceForAllUsers: Bool
    /// Folder of what the SDK keeps on the device: the saved session, the outbox, stream positions and the offline
    /// store.
    public var storageDirectory: URL
    /// How many of each conversation's newest messages the device keeps to show offline
    /// (``ParleyClient/storedMessages(conversationId:)``); older ones are evicted first. 0 keeps no messages and no
    /// conversation list. Default: 200.
    public var offlineMessageLimit: Int = 200
    /// The queue on which listeners are called. Defaults to the main queue on Apple platforms and to a private
    /// serial queue elsewhere.
    public var callbackQueue: DispatchQueue
    /// Timing of the connection: heartbeat, timeouts, backoff.
    public var connectionTuning: ConnectionTuning
    /// Where the SDK learns that the app moves between foreground and background (UIKit on iOS, none elsewhere).
    public var appLifecycle: (any AppLifecycleSource)?
    /// Where the SDK learns that the network comes and goes (`NWPathMonitor` on Apple platforms, none elsewhere).
    public var networkReachability: (any NetworkReachabilitySource)?
    /// Hide what users you blocked write in groups (true, the default): their messages, edits and reactions are not
    /// passed to listeners, `events()` or ``MessageList``. The server already keeps them from writing to you
    /// directly, and from showing you their typing and presence.
    public var hidesBlockedUsersMessages: Bool = true
    /// Where ``ParleyClient/openLink(_:)`` opens links the delegate allows: the system's on iOS and macOS, none on
    /// Linux.
    public var linkOpener: (any LinkOpener)? = AppSettings.defaultLinkOpener
    /// The WebSocket; nil: ``URLSessionWebSocketTransport`` on Apple platforms, `WSClientTransport` elsewhere.
    public var webSocketTransport: (any WebSocketTransport)?
    /// Where the signed-in user's auth token is kept; nil: the Keychain on Apple platforms
    /// (`KeychainCredentialStore`), `credentials/` in the storage directory elsewhere (``FileCredentialStore``).
    public var credentialStore: (any CredentialStore)?
    /// Where the SDK asks for time to finish sends and uploads after the app leaves the foreground: UIKit's
    /// background tasks on iOS (`UIApplicationBackgroundTime`), none elsewhere (docs/SDK.md, "Background time").
    public var backgroundTime: (any BackgroundTimeSource)? = AppSettings.defaultBackgroundTime
    /// Where the SDK gets a fresh auth token when the signed-in user's expires or is refused
    /// (``ParleyClient/setTokenProvider(_:)``; docs/SDK.md, "Tokens that expire"). Nil: a refused token stops the
    /// connection until the next login.
    public var tokenProvider: TokenProvider?
    /// Where the client takes the token given to the static ``ParleyClient/setDeviceToken(_:environment:)`` from.
    @_spi(Testing) public var deviceTokenCenter: DeviceTokenCenter = .shared

    /// CometChat-style spelling of ``Builder``.
    public typealias AppSettingsBuilder = Builder

    /// Builds ``AppSettings``; every method returns an updated builder.
    public struct Builder: Sendable {
        private var settings = AppSettings(
            serverURL: URL(string: "http://127.0.0.1:8080")!, region: nil, autoEstablishSocketConnection: true,
            subscribePresenceForAllUsers: false, storageDirectory: AppSettings.defaultStorageDirectory,
            callbackQueue: AppSettings.defaultCallbackQueue, connectionTuning: ConnectionTuning(),
            appLifecycle: AppSettings.defaultAppLifecycle, networkReachability: AppSettings.defaultReachability
        )

        /// A builder with the defaults: `http://127.0.0.1:8080`, auto mode, the platform's storage, lifecycle, network
        /// and link sources.
        public init() {}

        /// The Parley server (``AppSettings/serverURL``), http or https; kept in one spelling
        /// (``AppSettings/normalizedServerURL(_:)``).
        public func serverURL(_ url: URL) -> Builder {
            with { $0.serverURL = AppSettings.normalizedServerURL(url.absoluteString) ?? url }
        }
        /// A label for the deployment (``AppSettings/region``); informational.
        public func setRegion(region: String) -> Builder { with { $0.region = region } }
        /// Auto mode (true, the default) or manual mode (``AppSettings/autoEstablishSocketConnection``).
        public func autoEstablishSocketConnection(_ enabled: Bool) -> Builder {
            with { $0.autoEstablishSocketConnection = enabled }
        }
        /// Receive presence for every user of the app (``AppSettings/subscribePresenceForAllUsers``).
        public func subscribePresenceForAllUsers() -> Builder { with { $0.subscribePresenceForAllUsers = true } }
        /// Where the SDK keeps the session, the outbox and the offline store (``AppSettings/storageDirectory``).
        public func storageDirectory(_ url: URL) -> Builder { with { $0.storageDirectory = url } }
        /// How many messages per conversation the device keeps (``AppSettings/offlineMessageLimit``); 0 for none.
        public func offlineMessageLimit(_ limit: Int) -> Builder { with { $0.offlineMessageLimit = max(0, limit) } }
        /// The queue listeners are called on (``AppSettings/callbackQueue``).
        public func callbackQueue(_ queue: DispatchQueue) -> Builder { with { $0.callbackQueue = queue } }
        /// Timing of the connection (``AppSettings/connectionTuning``).
        public func connectionTuning(_ tuning: ConnectionTuning) -> Builder { with { $0.connectionTuning = tuning } }
        /// The source of foreground/background changes; nil for none (always foreground).
        public func appLifecycle(_ source: (any AppLifecycleSource)?) -> Builder { with { $0.appLifecycle = source } }
        /// The source of network changes; nil for none (always available).
        public func networkReachability(_ source: (any NetworkReachabilitySource)?) -> Builder {
            with { $0.networkReachability = source }
        }
        /// Whether to hide what blocked users write in groups (``AppSettings/hidesBlockedUsersMessages``); default true.
        public func hideBlockedUsersMessages(_ hide: Bool) -> Builder { with { $0.hidesBlockedUsersMessages = hide } }
        /// The WebSocket transport; nil for the platform's default.
        public func webSocketTransport(_ transport: (any WebSocketTransport)?) -> Builder {
            with { $0.webSocketTransport = transport }
        }
        /// Where the auth token is kept (``CredentialStore``); nil for the platform's default.
        public func credentialStore(_ store: (any CredentialStore)?) -> Builder { with { $0.credentialStore = store } }
        /// Where ``ParleyClient/openLink(_:)`` opens links; nil for nowhere.
        public func linkOpener(_ opener: (any LinkOpener)?) -> Builder { with { $0.linkOpener = opener } }
        /// Where background time comes from (``AppSettings/backgroundTime``); nil: none.
        public func backgroundTime(_ source: (any BackgroundTimeSource)?) -> Builder {
            with { $0.backgroundTime = source }
        }
        /// Where fresh auth tokens come from (``AppSettings/tokenProvider``).
        public func tokenProvider(_ provider: TokenProvider?) -> Builder { with { $0.tokenProvider = provider } }
        /// The settings built so far.
        public func build() -> AppSettings { settings }

        private func with(_ change: (inout AppSettings) -> Void) -> Builder {
            var copy = self
            change(&copy.settings)
            return copy
        }
    }

    /// A server URL in one spelling: scheme and host in lower case, no default port, no trailing `/`, no query or
    /// fragment; nil when `text` is not an http(s) URL with a host. A saved session belongs to a server: a client set
    /// up with `HTTP://Chat.example.com:443/` finds the session saved at `https://chat.example.com`.
    public static func normalizedServerURL(_ text: String) -> URL? {
        guard var parts = URLComponents(string: text.trimmingCharacters(in: .whitespaces)),
            let scheme = parts.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = parts.host, !host.isEmpty
        else { return nil }
        parts.scheme = scheme
        parts.host = host.lowercased()
        if (scheme == "http" && parts.port == 80) || (scheme == "https" && parts.port == 443) { parts.port = nil }
        while parts.path.hasSuffix("/") { parts.path.removeLast() }
        parts.query = nil
        parts.fragment = nil
        return parts.url
    }

    /// Whether a saved session's server (`saved`, as written then) is this settings' server, in any spelling.
    func isServer(_ saved: String) -> Bool {
        let mine = Self.normalizedServerURL(serverURL.absoluteString)?.absoluteString ?? serverURL.absoluteString
        return (Self.normalizedServerURL(saved)?.absoluteString ?? saved) == mine
    }

    static var defaultStorageDirectory: URL {
        let base =
            FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
            ?? FileManager.default.temporaryDirectory
        return base.appendingPathComponent("Parley", isDirectory: true)
    }

    static var defaultAppLifecycle: (any AppLifecycleSource)? {
        #if canImport(UIKit) && !os(watchOS)
            return UIApplicationLifecycle()
        #else
            return nil
        #endif
    }

    /// SwiftNIO's WebSocket where the SDK links it (Linux: libcurl, under URLSession there, has none); URLSession's on
    /// Apple platforms.
    static var defaultWebSocketTransport: any WebSocketTransport {
        #if canImport(WSClient)
            return WSClientTransport(logger: Logger(label: "parley.sdk"))
        #else
            return URLSessionWebSocketTransport()
        #endif
    }

    /// The Keychain on Apple platforms; `credentials/` in `storageDirectory` elsewhere.
    static func defaultCredentialStore(_ storageDirectory: URL) -> any CredentialStore {
        #if canImport(Security)
            return KeychainCredentialStore()
        #else
            return FileCredentialStore(directory: storageDirectory.appendingPathComponent("credentials"))
        #endif
    }

    static var defaultBackgroundTime: (any BackgroundTimeSource)? {
        #if canImport(UIKit) && !os(watchOS)
            return UIApplicationBackgroundTime()
        #else
            return nil
        #endif
    }

    static var defaultLinkOpener: (any LinkOpener)? {
        #if canImport(UIKit) && !os(watchOS)
            return UIApplicationLinkOpener()
        #elseif canImport(AppKit) && !targetEnvironment(macCatalyst)
            return WorkspaceLinkOpener()
        #else
            return nil
        #endif
    }

    static var defaultReachability: (any NetworkReachabilitySource)? {
        #if canImport(Network)
            return NWPathReachability()
        #else
            return nil
        #endif
    }

    static var defaultCallbackQueue: DispatchQueue {
        #if canImport(Darwin)
            return .main
        #else
            return DispatchQueue(label: "parley.callbacks")
        #endif
    }
}

/// Returns a fresh auth token for the user `uid`: your app asks your server, which issues one with its REST API key
/// (`POST /v1/users/{uid}/auth-tokens`, ``ParleyAdmin/issueAuthToken(uid:ttlSeconds:)``). Called by the SDK before the
/// current token expires and when the server refuses it, one call at a time; throw when no token can be had now (the
/// SDK retries after a backoff).
public typealias TokenProvider = @Sendable (_ uid: String) async throws -> String

/// Timing of the real-time connection. The defaults suit mobile apps; tests shorten them.
public struct ConnectionTuning: Sendable, Hashable {
    /// Time between heartbeat pings while no frame arrives.
    public var heartbeatInterval: Duration = .seconds(25)
    /// How long to wait for the server to answer a ping before the connection counts as lost.
    public var pongTimeout: Duration = .seconds(10)
    /// How long a connection attempt may take.
    public var connectTimeout: Duration = .seconds(15)
    /// Manual mode: how long the socket stays up in the background without `ping()`.
    public var backgroundGrace: Duration = .seconds(30)
    /// First reconnection delay ceiling; each failed attempt doubles it up to ``maximumBackoff``.
    public var initialBackoff: Duration = .milliseconds(500)
    /// The longest delay between reconnection attempts.
    public var maximumBackoff: Duration = .seconds(30)
    /// How long a WebSocket request (a send) waits for the server's answer before falling back to HTTP.
    public var requestTimeout: Duration = .seconds(10)
    /// With a token provider: how long before the token expires the SDK asks for a fresh one (at half the time left
    /// when that is shorter).
    public var tokenRefreshLead: Duration = .seconds(60)
    /// How long the token provider may take before the attempt counts as failed.
    public var tokenRefreshTimeout: Duration = .seconds(30)
    /// Failed refreshes in a row (each retried after a backoff) before the status is
    /// ``ConnectionStatus/failed(_:)`` with `ERR_TOKEN_REFRESH_FAILED`.
    public var maximumTokenRefreshFailures = 5

    /// The defaults, suited to mobile apps.
    public init() {}
}
