import Logging
import ParleyProtocol
import ParleyStore

/// How a Parley server runs. The `parley-server` executable builds it from its options; tests build their own.
public struct ServerConfiguration: Sendable {
    /// Address to bind.
    public var hostname: String = "127.0.0.1"
    /// Port to bind; 0 picks a free one (see ``ParleyApplication/onServerRunning``).
    public var port: Int = 8080
    /// Folder of the SQLite database (`parley.sqlite`), created if missing.
    public var dataDirectory: String = "parley-data"
    /// Whether a data directory without any app gets a default app on start.
    public var createDefaultApp: Bool = true
    /// How often the server pings each WebSocket; a client that misses about two pings is disconnected.
    public var heartbeatInterval: Duration = .seconds(30)
    /// How long a new WebSocket may take to send its `connect` frame.
    public var handshakeTimeout: Duration = .seconds(10)
    /// How long the server waits for the client's answer to its close frame before it drops the socket.
    public var closeTimeout: Duration = .seconds(5)
    /// Largest WebSocket frame a client may send; larger ones close the connection with 1009.
    public var maxInboundFrameSize: Int = 256 * 1024
    /// Bytes of events that may wait for one connection; past it the connection is closed with 4008.
    public var outboundQueueLimitBytes: Int = 4 * 1024 * 1024
    /// Malformed frames tolerated on one connection before it is closed with 4400.
    public var malformedFrameLimit: Int = 50
    /// A typing indicator with no news for this long turns off by itself.
    public var typingTimeout: Duration = .seconds(5)
    /// Most `typing` frames one connection may send per second; more get `ERR_RATE_LIMITED`.
    public var typingFramesPerSecond: Int = 5
    /// How long a user stays online after their last connection closes (a quick reconnect shows no change).
    public var presenceGrace: Duration = .seconds(5)
    /// `unread.update` pushes a user may get in a row, each at once (on SQLite in the same write as the message that
    /// changed the count); one is earned back per ``unreadPushInterval``. At least 1.
    public var unreadPushBurst: Int = 5
    /// A batch of messages that changes the counts of more users than this connected here (a message to a large group)
    /// pushes each of them once and holds them for ``unreadPushInterval``, as a burst of 1 would: the first messages to
    /// a group of 1,000 then read 1,000 counts, not 5,000.
    public var unreadBurstMaxUsers: Int = 256
    /// How long a user who got ``unreadPushBurst`` pushes in a row waits for the next one (changes meanwhile are
    /// pushed together when it ends); a push is earned back per interval.
    public var unreadPushInterval: Duration = .seconds(1)
    /// How long the search indexer waits after filing before it looks for new messages again (SQLite): a message is
    /// found by a search at most this long (and the filing of what came before it) after it is stored.
    public var searchIndexInterval: Duration = .milliseconds(250)
    /// How long one message search may run before the store stops it (`ERR_SEARCH_TIMEOUT`).
    public var searchTimeLimit: Duration = MessageSearch.timeLimit
    /// Limits on message size.
    public var messageLimits: MessageLimits = .default
    /// Pending TCP connections the kernel queues before the server accepts them.
    public var backlog: Int = 4096
    /// The connection edge: HTTP deadlines and sizes, rate limits (docs/PROTOCOL.md, "Limits").
    public var edge: EdgeLimits = EdgeLimits()
    /// Most accepted connections being set up at once (before their first HTTP request, or until their WebSocket is
    /// live; one second at most each); more wait in the kernel's backlog, so that a reconnection storm cannot starve
    /// established connections.
    public var maxConnectionsInSetup: Int = 128
    /// Most commands committed in one database transaction.
    public var maxCommandBatch: Int = 512
    /// How old the oldest missed event may be for a reconnecting client to get it replayed; past it, `resync`.
    public var resumeWindow: Duration = .seconds(30 * 24 * 3600)
    /// Most missed events replayed for one conversation on reconnect; past it, `resync`.
    public var maxReplayedEventsPerConversation: Int = 1000
    /// Most changes of a user's own stream (joins, departures) looked at on reconnect.
    public var maxReplayedMembershipChanges: Int = 10_000
    /// Push notifications to users without a live socket; nil turns push off.
    public var apns: APNsConfiguration?
    /// How failed pushes are tried again.
    public var pushRetry: PushRetryPolicy = PushRetryPolicy()
    /// How often the push dispatcher looks for work it was not told about (messages another node stored, retries
    /// that came due).
    public var pushPollInterval: Duration = .seconds(5)
    /// How webhooks are delivered to the apps' backends (endpoints are registered with `POST /v1/webhooks`).
    public var webhooks = WebhookConfiguration()
    /// How long `GET /health/ready` waits for the database before it answers 503.
    public var healthCheckTimeout: Duration = .seconds(2)
    /// The web console under `/console/` (docs/CONSOLE.md).
    public var console: ConsoleSource = .bundled
    /// Where `GET /metrics` is served (docs/PROTOCOL.md, "Metrics"); nowhere by default.
    public var metrics = MetricsExposure()
    /// The level of the one-line log of each HTTP request (method, path, status, duration, request id).
    public var requestLogLevel: Logger.Level = .debug
    /// Where spans of requests and WebSocket commands are exported (OTLP/HTTP); nil (the default): no traces.
    public var traces: TraceExport?
    /// Attachments: where their bytes live, how large they may be, how long an unused upload and a download link last.
    public var files = FileSettings()

    public init() {}
}

/// Attachments (docs/PROTOCOL.md, "Attachments").
public struct FileSettings: Sendable {
    /// Where the bytes live.
    public enum Storage: Sendable {
        /// A folder (nil: `files` in the data directory): one node.
        case disk(String?)
        /// S3-compatible object storage: every node of a deployment reads and writes one bucket.
        case s3(S3BlobStore.Configuration)
    }

    public var storage: Storage = .disk(nil)
    /// Largest upload. A larger `Content-Length` is refused with 413 `ERR_FILE_TOO_LARGE` before the body is read.
    public var maxFileBytes: Int64 = 100 * 1024 * 1024

    /// The largest upload of an app: its own limit when below the server's.
    static func limit(server: Int64, app: Int64?) -> Int64 { min(server, app ?? server) }
    /// An upload that no message carries this long after it was made is removed.
    public var unusedUploadRetention: Duration = .seconds(24 * 3600)
    /// How often the server looks for such uploads.
    public var sweepInterval: Duration = .seconds(600)
    /// How long a download link stays valid.
    public var linkLifetime: Duration = .seconds(3600)
    /// The slowest a file may travel, on average, in bytes per second: an upload's body past
    /// ``EdgeLimits/requestBodyTimeout`` plus its length at this rate is refused with 408; a download not taken by then
    /// (a client that stops reading) is cut off. Bounds how long a slow (or malicious) client holds a connection.
    public var minimumTransferRate: Int = 64 * 1024

    public init() {}
}

/// Where the Prometheus text of the server's metrics is served. Both may be on; with neither, `/metrics` is 404.
public struct MetricsExposure: Sendable {
    /// `GET /metrics` on the main port answers requests with `Authorization: Bearer <token>` (others: 401).
    public var token: String?
    /// A listener of its own (address, port; port 0 picks one) that answers `GET /metrics` without a token: bind it
    /// to an address only the monitoring system reaches.
    public var listener: (hostname: String, port: Int)?

    public init(token: String? = nil, listener: (hostname: String, port: Int)? = nil) {
        self.token = token
        self.listener = listener
    }
}

/// Where the web console's files come from.
public enum ConsoleSource: Sendable, Hashable {
    /// The files shipped with the server (`Sources/ParleyServer/Console/web`); the console is off, with a warning, if
    /// they are not next to the executable.
    case bundled
    /// Another folder (a customized console); the server refuses to start if it cannot be read.
    case directory(String)
    /// No console: `/console/` answers 404.
    case off
}

/// A token bucket: `burst` actions at once, refilled at `perSecond`.
public struct RateLimit: Sendable, Hashable {
    public var perSecond: Double
    public var burst: Int

    public init(perSecond: Double, burst: Int) {
        self.perSecond = perSecond
        self.burst = burst
    }
}
