/// What a webhook endpoint receives: groups of event names (`messages`, `conversations`, `participants`, `reports`,
/// `users`), or single event names of those groups.
public enum WebhookTopic: String, Codable, Sendable, Hashable, CaseIterable {
    /// `conversationMessage.sent`, `.update`, `.delete`, `.reactionAdded`, `.reactionRemoved`, `.pinned`, `.unpinned`.
    case messages
    /// `conversation.create`, `.update`, `.delete`, `.undelete`.
    case conversations
    /// `conversation.participantAdded`, `.participantUpdated`, `.participantRemoved`, `.participantBanned`,
    /// `.participantUnbanned`.
    case participants
    /// `report.create` (a user reported a message or a user), `report.update` (the app's server resolved or reopened
    /// it).
    case reports
    /// `user.create`, `profile.update`, `user.deactivate`, `user.reactivate`.
    case users

    /// The event names of the topic.
    public var eventNames: [EventName] {
        switch self {
        case .messages:
            return [
                .messageSent, .messageUpdate, .messageDelete, .reactionAdded, .reactionRemoved, .messagePinned,
                .messageUnpinned,
            ]
        case .conversations:
            return [.conversationCreate, .conversationUpdate, .conversationDelete, .conversationUndelete]
        case .participants:
            return [
                .participantAdded, .participantUpdated, .participantRemoved, .participantBanned,
                .participantUnbanned,
            ]
        case .reports: return [.reportCreate, .reportUpdate]
        case .users: return [.userCreate, .profileUpdate, .userDeactivate, .userReactivate, .userDelete]
        }
    }

    /// Every event name a webhook can receive.
    public static let allEventNames: Set<EventName> = Set(allCases.flatMap(\.eventNames))

    /// The event names `filters` select (each a topic or an event name); nil when one is neither.
    public static func eventNames(for filters: [String]) -> Set<EventName>? {
        var names = Set<EventName>()
        for filter in filters {
            if let topic = WebhookTopic(rawValue: filter) {
                names.formUnion(topic.eventNames)
            } else if allEventNames.contains(EventName(rawValue: filter)) {
                names.insert(EventName(rawValue: filter))
            } else {
                return nil
            }
        }
        return names
    }
}

extension EventName {
    /// Webhooks only: a user reported a message or a user (the payload is the ``Report``).
    public static let reportCreate: EventName = "report.create"
    /// Webhooks only: the app's server resolved or reopened a report (the payload is the ``Report``).
    public static let reportUpdate: EventName = "report.update"
    /// Webhooks only: a user was created (the payload is the ``User``).
    public static let userCreate: EventName = "user.create"
    /// Webhooks only: the app's server deactivated a user (the payload is the ``User``, with `deactivatedAt`).
    public static let userDeactivate: EventName = "user.deactivate"
    /// The app's server deleted a user: the payload is the user as they were.
    public static let userDelete: EventName = "user.delete"
    /// Webhooks only: the app's server reactivated a user (the payload is the ``User``).
    public static let userReactivate: EventName = "user.reactivate"
}

/// `POST /v1/webhooks`: a new endpoint of the app's backend.
public struct CreateWebhookRequest: Codable, Sendable, Hashable {
    /// An absolute `http` or `https` URL, at most 2,048 bytes.
    public var url: String
    /// Topics (``WebhookTopic``) or event names; at least one.
    public var events: [String]
    /// A note for the app's developers, at most 256 bytes.
    public var description: String?

    /// Creates a request.
    public init(url: String, events: [String], description: String? = nil) {
        self.url = url
        self.events = events
        self.description = description
    }
}

/// `PATCH /v1/webhooks/{webhookId}`: what to change; absent fields stay.
public struct UpdateWebhookRequest: Codable, Sendable, Hashable {
    /// The new URL.
    public var url: String?
    /// The new topics or event names; the list replaces the old.
    public var events: [String]?
    /// The new note.
    public var description: String?
    /// True enables a disabled endpoint again (its failure run starts over and its waiting deliveries go out); false
    /// disables it.
    public var enabled: Bool?

    /// Creates a request; what is left nil stays.
    public init(url: String? = nil, events: [String]? = nil, description: String? = nil, enabled: Bool? = nil) {
        self.url = url
        self.events = events
        self.description = description
        self.enabled = enabled
    }
}

/// A webhook endpoint as the app's server sees it (the secret only when it is made:
/// ``WebhookEndpointWithSecret``).
public struct WebhookEndpoint: Codable, Sendable, Hashable {
    /// The endpoint's id (`wh_...`).
    public var id: String
    /// Where the events are posted.
    public var url: String
    /// As registered: topics or event names.
    public var events: [String]
    /// A note for the app's developers.
    public var description: String?
    /// False once disabled, by the app's server or after a run of failures (`disabledReason` says which).
    public var enabled: Bool
    /// Why it was disabled, for example "Disabled after 50 failed attempts in a row.".
    public var disabledReason: String?
    /// When it was disabled (epoch ms).
    public var disabledAt: Int64?
    /// Failed attempts since the last delivered one.
    public var consecutiveFailures: Int
    /// When a delivery last succeeded (epoch ms).
    public var lastSuccessAt: Int64?
    /// When an attempt last failed (epoch ms).
    public var lastFailureAt: Int64?
    /// When the endpoint was registered (epoch ms).
    public var createdAt: Int64
    /// When it last changed (epoch ms).
    public var updatedAt: Int64

    /// Creates an endpoint from its stored fields.
    public init(
        id: String, url: String, events: [String], description: String? = nil, enabled: Bool,
        disabledReason: String? = nil, disabledAt: Int64? = nil, consecutiveFailures: Int = 0,
        lastSuccessAt: Int64? = nil, lastFailureAt: Int64? = nil, createdAt: Int64, updatedAt: Int64
    ) {
        self.id = id
        self.url = url
        self.events = events
        self.description = description
        self.enabled = enabled
        self.disabledReason = disabledReason
        self.disabledAt = disabledAt
        self.consecutiveFailures = consecutiveFailures
        self.lastSuccessAt = lastSuccessAt
        self.lastFailureAt = lastFailureAt
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// `POST /v1/webhooks` and `POST /v1/webhooks/{webhookId}/secret`: the endpoint and its signing secret, shown this
/// once.
public struct WebhookEndpointWithSecret: Codable, Sendable, Hashable {
    /// The endpoint.
    public var endpoint: WebhookEndpoint
    /// The key of `X-Parley-Signature` (`whsec_` and 64 hex digits).
    public var secret: String

    /// Creates the pair.
    public init(endpoint: WebhookEndpoint, secret: String) {
        self.endpoint = endpoint
        self.secret = secret
    }
}

/// `GET /v1/webhooks`.
public struct WebhookEndpointList: Codable, Sendable, Hashable {
    /// The app's endpoints.
    public var webhooks: [WebhookEndpoint]
    /// Creates a list of endpoints.
    public init(webhooks: [WebhookEndpoint]) { self.webhooks = webhooks }
}

/// Where a delivery is: waiting to be sent (or sent again), or given up after its last attempt.
public enum WebhookDeliveryState: String, Codable, Sendable, Hashable, CaseIterable {
    /// Waiting for its next attempt.
    case pending
    /// Given up after its last attempt.
    case failed
}

/// One event on its way to one endpoint (delivered ones are not kept).
public struct WebhookDelivery: Codable, Sendable, Hashable {
    /// The same on every attempt (`X-Parley-Delivery` and `id` of the body): receivers drop repeats by it.
    public var id: String
    /// The endpoint.
    public var webhookId: String
    /// The event's name.
    public var event: EventName
    /// The conversation of a conversation event.
    public var conversationId: String?
    /// Pending or failed.
    public var state: WebhookDeliveryState
    /// Attempts made so far.
    public var attempts: Int
    /// When the next attempt is due (pending ones).
    public var nextAttemptAt: Int64?
    /// The HTTP status of the last attempt, when it got one.
    public var lastStatus: Int?
    /// Why the last attempt failed.
    public var lastError: String?
    /// When the last attempt was made (epoch ms).
    public var lastAttemptAt: Int64?
    /// When the event was queued for the endpoint (epoch ms).
    public var createdAt: Int64

    /// Creates a delivery from its stored fields.
    public init(
        id: String, webhookId: String, event: EventName, conversationId: String? = nil, state: WebhookDeliveryState,
        attempts: Int, nextAttemptAt: Int64? = nil, lastStatus: Int? = nil, lastError: String? = nil,
        lastAttemptAt: Int64? = nil, createdAt: Int64
    ) {
        self.id = id
        self.webhookId = webhookId
        self.event = event
        self.conversationId = conversationId
        self.state = state
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.lastStatus = lastStatus
        self.lastError = lastError
        self.lastAttemptAt = lastAttemptAt
        self.createdAt = createdAt
    }
}

/// `GET /v1/webhooks/{webhookId}/deliveries`: oldest first.
public struct WebhookDeliveryList: Codable, Sendable, Hashable {
    /// The deliveries of the page.
    public var deliveries: [WebhookDelivery]
    /// Pass as `cursor` to get the next page; nil on the last page.
    public var nextCursor: String?
    /// Creates a page of deliveries.
    public init(deliveries: [WebhookDelivery], nextCursor: String? = nil) {
        self.deliveries = deliveries
        self.nextCursor = nextCursor
    }
}
