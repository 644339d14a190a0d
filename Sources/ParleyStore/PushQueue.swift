import Foundation
import ParleyProtocol

/// A message that may need pushes: written in the transaction that stores the message (``Command/SendMessage``
/// with `queuesPush`), so a crash cannot lose it, and turned into one ``PushJob`` per device of each recipient
/// without a live socket by the server's push dispatcher.
public struct PushOutboxEntry: Sendable, Hashable {
    public var id: Int64
    public var appId: String
    public var conversationId: String
    public var seq: Int64
    /// The stored message; nil when its event is gone (the entry is then dropped).
    public var message: Message?
    public var createdAt: Int64

    public init(id: Int64, appId: String, conversationId: String, seq: Int64, message: Message?, createdAt: Int64) {
        self.id = id
        self.appId = appId
        self.conversationId = conversationId
        self.seq = seq
        self.message = message
        self.createdAt = createdAt
    }
}

/// One notification to one device, waiting to be sent (or sent again).
public struct PushJob: Sendable, Hashable {
    /// Assigned by the store; ignored when the job is inserted.
    public var id: Int64
    public var appId: String
    public var uid: String
    public var deviceId: String
    public var platform: PushPlatform
    public var token: String
    public var environment: PushEnvironment
    /// Identifies the notification to the push service (`apns-collapse-id`): a notification sent twice shows once.
    public var collapseId: String
    /// The body to send (APNs: the JSON with `aps` and `parley`).
    public var payload: [UInt8]
    public var createdAt: Int64
    /// Sending attempts made so far.
    public var attempts: Int
    /// Not to be sent before this time (epoch milliseconds).
    public var notBefore: Int64

    public init(
        id: Int64 = 0, appId: String, uid: String, deviceId: String, platform: PushPlatform = .apns, token: String,
        environment: PushEnvironment, collapseId: String, payload: [UInt8], createdAt: Int64, attempts: Int = 0,
        notBefore: Int64
    ) {
        self.id = id
        self.appId = appId
        self.uid = uid
        self.deviceId = deviceId
        self.platform = platform
        self.token = token
        self.environment = environment
        self.collapseId = collapseId
        self.payload = payload
        self.createdAt = createdAt
        self.attempts = attempts
        self.notBefore = notBefore
    }
}

/// What became of one outbox entry: the jobs it produced (none when every recipient had a live socket).
public struct PushExpansion: Sendable, Hashable {
    public var entryId: Int64
    public var jobs: [PushJob]

    public init(entryId: Int64, jobs: [PushJob]) {
        self.entryId = entryId
        self.jobs = jobs
    }
}

/// How much push work is waiting.
public struct PushQueueDepth: Sendable, Hashable {
    /// Messages not yet turned into jobs.
    public var outbox: Int
    /// Jobs not yet sent (including those being retried).
    public var jobs: Int

    public init(outbox: Int, jobs: Int) {
        self.outbox = outbox
        self.jobs = jobs
    }
}

/// Row helpers shared by the stores' push queue code.
public enum PushQueueRows {
    /// The columns of `push_jobs` that make a ``PushJob``.
    public static let jobColumns =
        "id, app_id, uid, device_id, platform, token, environment, collapse_id, payload, created_at, attempts, not_before"

    /// The message in a stored `message.sent` event body; nil for any other event.
    public static func message(in body: Data, decoder: JSONDecoder) throws -> Message? {
        let event = try decoder.decode(Event.self, from: body)
        guard case .messageSent(let message) = event.payload else { return nil }
        return message
    }
}
