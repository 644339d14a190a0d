import ParleyProtocol

/// Webhooks: the rules and row helpers both stores share.
///
/// Every event a webhook may receive is written to `webhook_outbox` in the transaction that makes it, when the app
/// has an enabled endpoint that wants it: the conversation events by a trigger on `events` (so no write path can
/// forget one; the row points at the stored event, so an edit or a deletion made before it is delivered is what
/// goes out), reports and users by the store calls that make them (the row holds the body). The server's webhook
/// dispatcher turns outbox rows into one delivery per endpoint (``ParleyStore/expandWebhookOutbox(limit:now:)``),
/// then leases and sends the deliveries, in order per endpoint and ordering key (one conversation, one report, one
/// user).
public enum Webhooks {
    /// Endpoints an app may register.
    public static let maxEndpoints = 20
    /// The longest endpoint URL, in bytes.
    public static let maxURLBytes = 2048
    /// The longest description, in bytes.
    public static let maxDescriptionBytes = 256

    /// The names column of an endpoint: `,name,name,` (so that `,<name>,` finds one in SQL).
    public static func namesColumn(_ names: Set<EventName>) -> String {
        "," + names.map(\.rawValue).sorted().joined(separator: ",") + ","
    }

    /// A report event's outbox row: its ordering key and body.
    public static func reportEvent(appId: String, _ report: Report, name: EventName, at timestamp: Int64) throws
        -> (key: String, body: [UInt8])
    {
        let payload = try WireCoding.decode(JSONValue.self, from: try WireCoding.encode(report))
        let event = Event(
            id: "report:\(report.id):\(name == .reportCreate ? "create" : "update:\(timestamp)")", appId: appId,
            name: name, timestamp: timestamp,
            context: EventContext(createdBy: name == .reportCreate ? report.reporter : nil), payload: .unknown(payload)
        )
        return ("r:" + report.id, try WireJSON.encode(event))
    }

    /// A user event's outbox row (`user.create`, `profile.update`): its ordering key and body.
    /// A user's webhook event: its ordering key and body. `at` is when it happened (default: the user's creation for
    /// `user.create`, the profile's change otherwise).
    public static func userEvent(appId: String, _ user: User, name: EventName, at time: Int64? = nil) throws
        -> (key: String, body: [UInt8])
    {
        let timestamp = time ?? (name == .userCreate ? user.createdAt : user.updatedAt)
        let event = Event(
            id: "user:\(user.uid):\(name.rawValue):\(timestamp)", appId: appId, name: name, timestamp: timestamp,
            context: EventContext(createdBy: name == .profileUpdate ? user.uid : nil),
            payload: name == .profileUpdate ? .profileUpdated(user) : .unknown(try userJSON(user))
        )
        return ("u:" + user.uid, try WireJSON.encode(event))
    }

    private static func userJSON(_ user: User) throws -> JSONValue {
        try WireCoding.decode(JSONValue.self, from: try WireCoding.encode(user))
    }

    /// Why an endpoint was disabled after a run of failed attempts.
    public static func disabledReason(_ failures: Int) -> String {
        "Disabled after \(failures) failed attempts in a row."
    }

    /// The delivery id of an outbox row for an endpoint: the same on every attempt.
    public static func deliveryIDSQL(outboxId: String, endpointId: String) -> String {
        "'dlv_' || \(outboxId) || '_' || substr(\(endpointId), 4)"
    }
}

/// A registered endpoint with what only the store and the dispatcher see.
public struct WebhookEndpointRecord: Sendable, Hashable {
    public var appId: String
    public var endpoint: WebhookEndpoint
    /// The signing key (`whsec_...`).
    public var secret: String
    /// The event names its filters select.
    public var eventNames: Set<EventName>

    public init(appId: String, endpoint: WebhookEndpoint, secret: String, eventNames: Set<EventName>) {
        self.appId = appId
        self.endpoint = endpoint
        self.secret = secret
        self.eventNames = eventNames
    }
}

/// A change to an endpoint; nil fields stay.
public struct WebhookEndpointChange: Sendable, Hashable {
    public var url: String?
    /// The filters as given, and the event names they select (both or neither).
    public var filters: [String]?
    public var eventNames: Set<EventName>?
    public var description: String?
    public var enabled: Bool?
    public var secret: String?

    public init(
        url: String? = nil, filters: [String]? = nil, eventNames: Set<EventName>? = nil, description: String? = nil,
        enabled: Bool? = nil, secret: String? = nil
    ) {
        self.url = url
        self.filters = filters
        self.eventNames = eventNames
        self.description = description
        self.enabled = enabled
        self.secret = secret
    }
}

/// One delivery leased to a node for sending, with what sending it needs.
public struct WebhookJob: Sendable, Hashable {
    /// The row (its position in the deliveries table).
    public var rowId: Int64
    public var deliveryId: String
    public var appId: String
    public var endpointId: String
    public var url: String
    public var secret: String
    public var event: EventName
    /// The event as stored (a JSON ``Event``).
    public var body: [UInt8]
    public var attempts: Int
    public var createdAt: Int64

    public init(
        rowId: Int64, deliveryId: String, appId: String, endpointId: String, url: String, secret: String,
        event: EventName, body: [UInt8], attempts: Int, createdAt: Int64
    ) {
        self.rowId = rowId
        self.deliveryId = deliveryId
        self.appId = appId
        self.endpointId = endpointId
        self.url = url
        self.secret = secret
        self.event = event
        self.body = body
        self.attempts = attempts
        self.createdAt = createdAt
    }
}

/// What became of an attempt that failed.
public struct WebhookFailure: Sendable, Hashable {
    /// Attempts made, this one included.
    public var attempts: Int
    /// When to try again; nil: the delivery is given up (state `failed`).
    public var retryAt: Int64?
    public var status: Int?
    public var error: String
    public var now: Int64
    /// Failed attempts in a row after which the endpoint is disabled.
    public var disableAfter: Int

    public init(attempts: Int, retryAt: Int64?, status: Int?, error: String, now: Int64, disableAfter: Int) {
        self.attempts = attempts
        self.retryAt = retryAt
        self.status = status
        self.error = error
        self.now = now
        self.disableAfter = disableAfter
    }
}
