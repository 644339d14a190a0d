import Foundation
import ParleyProtocol
import ParleyStore
import PostgresNIO

extension PostgresStore {
    // MARK: Endpoints

    public func insertWebhookEndpoint(_ record: WebhookEndpointRecord) async throws {
        let endpoint = record.endpoint
        let filters = try Self.filtersJSON(endpoint.events)
        try await withSession { session in
            try await session.transaction {
                // Registrations of one app at once through several nodes take turns, so the limit holds.
                try await session.execute(
                    "SELECT pg_advisory_xact_lock(\(Self.webhookLockKey), hashtext(\(record.appId)))")
                let count = try await session.value(
                    "SELECT count(*) FROM webhook_endpoints WHERE app_id = \(record.appId)", as: Int64.self
                )
                guard (count ?? 0) < Webhooks.maxEndpoints else {
                    throw DomainError(.webhookLimit, "An app has at most \(Webhooks.maxEndpoints) webhook endpoints.")
                }
                try await session.execute(
                    """
                    INSERT INTO webhook_endpoints (id, app_id, url, events, event_names, description, secret, enabled,
                        created_at, updated_at)
                    VALUES (\(endpoint.id), \(record.appId), \(endpoint.url), \(filters),
                        \(Webhooks.namesColumn(record.eventNames)), \(endpoint.description), \(record.secret),
                        \(endpoint.enabled), \(endpoint.createdAt), \(endpoint.updatedAt))
                    """
                )
            }
        }
    }

    public func webhookEndpoints(appId: String) async throws -> [WebhookEndpoint] {
        try await rows(
            """
            SELECT \(unescaped: Self.endpointColumns) FROM webhook_endpoints WHERE app_id = \(appId)
            ORDER BY created_at, id
            """
        ).map(Self.webhookEndpoint)
    }

    public func webhookEndpoint(appId: String, id: String) async throws -> WebhookEndpoint? {
        try await rows(
            "SELECT \(unescaped: Self.endpointColumns) FROM webhook_endpoints WHERE app_id = \(appId) AND id = \(id)"
        ).first.map(Self.webhookEndpoint)
    }

    public func updateWebhookEndpoint(appId: String, id: String, _ change: WebhookEndpointChange, now: Int64)
        async throws -> WebhookEndpoint?
    {
        let filters = try change.filters.map(Self.filtersJSON)
        let names = change.eventNames.map(Webhooks.namesColumn)
        return try await rows(
            """
            UPDATE webhook_endpoints SET url = coalesce(\(change.url), url), events = coalesce(\(filters), events),
                event_names = coalesce(\(names), event_names), description = coalesce(\(change.description), description),
                secret = coalesce(\(change.secret), secret), updated_at = \(now),
                enabled = coalesce(\(change.enabled), enabled),
                disabled_reason = CASE WHEN \(change.enabled)::boolean IS NULL THEN disabled_reason
                    WHEN \(change.enabled) THEN NULL ELSE 'Disabled by the app''s server.' END,
                disabled_at = CASE WHEN \(change.enabled)::boolean IS NULL THEN disabled_at
                    WHEN \(change.enabled) THEN NULL WHEN enabled THEN \(now) ELSE disabled_at END,
                consecutive_failures = CASE WHEN \(change.enabled == true) THEN 0 ELSE consecutive_failures END
            WHERE app_id = \(appId) AND id = \(id)
            RETURNING \(unescaped: Self.endpointColumns)
            """
        ).first.map(Self.webhookEndpoint)
    }

    public func deleteWebhookEndpoint(appId: String, id: String) async throws -> Bool {
        try await withSession { session in
            try await session.transaction {
                // The deliveries' rows before the endpoint's, the order in which a dispatcher recording an attempt
                // locks them (`completeWebhookDelivery`, `failWebhookDelivery`): the other order deadlocked with an
                // attempt being recorded (PostgreSQL aborted the delete: 500). Taken turns with the outbox's
                // expansion, so that no delivery is made for the endpoint between the two deletes.
                guard
                    try await session.value(
                        "SELECT count(*) FROM webhook_endpoints WHERE app_id = \(appId) AND id = \(id)", as: Int64.self
                    ) == 1
                else { return false }
                try await session.execute("SELECT pg_advisory_xact_lock(\(Self.webhookLockKey), 0)")
                try await session.execute("DELETE FROM webhook_deliveries WHERE endpoint_id = \(id)")
                let deleted = try await session.rows(
                    "DELETE FROM webhook_endpoints WHERE app_id = \(appId) AND id = \(id) RETURNING id"
                )
                return !deleted.isEmpty
            }
        }
    }

    // MARK: Outbox and deliveries

    /// The advisory lock that makes expanding the outbox one node's job at a time ("parley.webhook").
    static let webhookLockKey: Int32 = 0x7768_6B31

    /// Queues a report or user event for the app's endpoints that want it, in the caller's transaction.
    static func queueWebhookEvent(
        appId: String, name: EventName, key: String, body: [UInt8], at: Int64,
        run: (PostgresQuery) async throws -> [PostgresRow]
    ) async throws {
        _ = try await run(
            """
            INSERT INTO webhook_outbox (app_id, ordering_key, name, body, created_at)
            SELECT \(appId), \(key), \(name.rawValue), \(ByteBuffer(bytes: body)), \(at)
            WHERE EXISTS (
                SELECT 1 FROM webhook_endpoints
                WHERE app_id = \(appId) AND enabled AND position(',' || \(name.rawValue) || ',' in event_names) > 0
            )
            """
        )
    }

    static func queueReportEvent(
        appId: String, _ report: Report, name: EventName, at: Int64, run: (PostgresQuery) async throws -> [PostgresRow]
    ) async throws {
        let (key, body) = try Webhooks.reportEvent(appId: appId, report, name: name, at: at)
        try await queueWebhookEvent(appId: appId, name: name, key: key, body: body, at: at, run: run)
    }

    /// Queues a user's webhook event, which happened at `time` (default: the profile's last change).
    static func queueUserEvent(
        appId: String, _ user: User, name: EventName, at time: Int64? = nil,
        run: (PostgresQuery) async throws -> [PostgresRow]
    ) async throws {
        let (key, body) = try Webhooks.userEvent(appId: appId, user, name: name, at: time)
        try await queueWebhookEvent(
            appId: appId, name: name, key: key, body: body, at: time ?? user.updatedAt, run: run)
    }

    public func expandWebhookOutbox(limit: Int, now: Int64) async throws -> Int {
        // A read first: an empty outbox (the usual case) takes no lock.
        guard try await rows("SELECT EXISTS (SELECT 1 FROM webhook_outbox)")[0].decode(Bool.self) else { return 0 }
        return try await withSession { session in
            try await session.transaction {
                // One node at a time, so that the deliveries of one conversation are made in the order of its events.
                try await session.execute("SELECT pg_advisory_xact_lock(\(Self.webhookLockKey), 0)")
                let ids = try await session.rows("SELECT id FROM webhook_outbox ORDER BY id LIMIT \(limit)").map {
                    try $0.decode(Int64.self)
                }
                guard !ids.isEmpty else { return 0 }
                try await session.execute(
                    """
                    INSERT INTO webhook_deliveries (delivery_id, app_id, endpoint_id, ordering_key, position, name,
                        conversation_id, body, created_at, state, not_before)
                    SELECT \(unescaped: Webhooks.deliveryIDSQL(outboxId: "o.id", endpointId: "w.id")), o.app_id, w.id,
                        o.ordering_key, o.id, o.name, o.conversation_id, coalesce(o.body, e.body), o.created_at,
                        'pending', \(now)
                    FROM webhook_outbox o
                    JOIN webhook_endpoints w
                        ON w.app_id = o.app_id AND w.enabled AND position(',' || o.name || ',' in w.event_names) > 0
                    LEFT JOIN events e ON e.conversation_pk = o.conversation_pk AND e.seq = o.seq
                    WHERE o.id = ANY(\(ids)) AND coalesce(o.body, e.body) IS NOT NULL
                    ORDER BY o.id, w.id
                    ON CONFLICT (delivery_id) DO NOTHING
                    """
                )
                try await session.execute("DELETE FROM webhook_outbox WHERE id = ANY(\(ids))")
                return ids.count
            }
        }
    }

    public func claimWebhookDeliveries(owner: String, now: Int64, leaseUntil: Int64, limit: Int) async throws
        -> [WebhookJob]
    {
        // SKIP LOCKED: nodes claiming at once take different deliveries; the first of a chain leased by one node
        // keeps the rest of its chain from the others.
        try await rows(
            """
            WITH claimed AS (
                UPDATE webhook_deliveries SET lease_owner = \(owner), lease_until = \(leaseUntil)
                WHERE id IN (
                    SELECT d.id FROM webhook_deliveries d
                    JOIN webhook_endpoints w ON w.id = d.endpoint_id AND w.enabled
                    WHERE d.state = 'pending' AND d.not_before <= \(now) AND d.lease_until <= \(now)
                    AND NOT EXISTS (
                        SELECT 1 FROM webhook_deliveries p
                        WHERE p.endpoint_id = d.endpoint_id AND p.ordering_key = d.ordering_key
                        AND p.state = 'pending' AND p.position < d.position
                    )
                    ORDER BY d.position LIMIT \(limit)
                    FOR UPDATE OF d SKIP LOCKED
                )
                RETURNING id, delivery_id, app_id, endpoint_id, name, body, attempts, created_at, position
            )
            SELECT c.id, c.delivery_id, c.app_id, c.endpoint_id, w.url, w.secret, c.name, c.body, c.attempts,
                c.created_at
            FROM claimed c JOIN webhook_endpoints w ON w.id = c.endpoint_id
            ORDER BY c.position
            """
        ).map { row in
            let (id, deliveryId, appId, endpointId, url, secret, name, body, attempts, createdAt) = try row.decode(
                (Int64, String, String, String, String, String, String, ByteBuffer, Int32, Int64).self
            )
            return WebhookJob(
                rowId: id, deliveryId: deliveryId, appId: appId, endpointId: endpointId, url: url, secret: secret,
                event: EventName(rawValue: name), body: Array(body.readableBytesView), attempts: Int(attempts),
                createdAt: createdAt
            )
        }
    }

    public func completeWebhookDelivery(_ job: WebhookJob, now: Int64) async throws {
        try await withSession { session in
            try await session.transaction {
                try await session.execute("DELETE FROM webhook_deliveries WHERE id = \(job.rowId)")
                try await session.execute(
                    """
                    UPDATE webhook_endpoints SET consecutive_failures = 0, last_success_at = \(now)
                    WHERE id = \(job.endpointId)
                    """
                )
            }
        }
    }

    public func failWebhookDelivery(_ job: WebhookJob, _ failure: WebhookFailure) async throws -> Bool {
        let status = failure.status.map { Int32($0) }
        return try await withSession { session in
            try await session.transaction {
                try await session.execute(
                    """
                    UPDATE webhook_deliveries SET attempts = \(Int32(failure.attempts)),
                        state = \(failure.retryAt == nil ? "failed" : "pending"),
                        not_before = \(failure.retryAt ?? failure.now), lease_owner = NULL, lease_until = 0,
                        last_status = \(status), last_error = \(failure.error), last_attempt_at = \(failure.now)
                    WHERE id = \(job.rowId)
                    """
                )
                let disabled = try await session.rows(
                    """
                    UPDATE webhook_endpoints SET consecutive_failures = consecutive_failures + 1,
                        last_failure_at = \(failure.now),
                        enabled = enabled AND consecutive_failures + 1 < \(Int32(failure.disableAfter)),
                        disabled_at = CASE WHEN enabled AND consecutive_failures + 1 >= \(Int32(failure.disableAfter))
                            THEN \(failure.now) ELSE disabled_at END,
                        disabled_reason = CASE WHEN enabled AND consecutive_failures + 1 >= \(Int32(failure.disableAfter))
                            THEN \(Webhooks.disabledReason(failure.disableAfter)) ELSE disabled_reason END
                    WHERE id = \(job.endpointId)
                    RETURNING disabled_at = \(failure.now) AND NOT enabled
                    """
                )
                return try disabled.first?.decode(Bool?.self) ?? false
            }
        }
    }

    public func releaseWebhookDeliveries(owner: String?) async throws {
        try await execute(
            """
            UPDATE webhook_deliveries SET lease_owner = NULL, lease_until = 0
            WHERE lease_owner IS NOT NULL AND (\(owner)::text IS NULL OR lease_owner = \(owner))
            """
        )
    }

    public func hasEnabledWebhookEndpoints() async throws -> Bool {
        try await rows("SELECT EXISTS (SELECT 1 FROM webhook_endpoints WHERE enabled)")[0].decode(Bool.self)
    }

    public func nextWebhookDeliveryDue() async throws -> Int64? {
        try await rows(
            """
            SELECT MIN(GREATEST(d.not_before, d.lease_until)) FROM webhook_deliveries d
            JOIN webhook_endpoints w ON w.id = d.endpoint_id AND w.enabled
            WHERE d.state = 'pending'
            """
        )[0].decode(Int64?.self)
    }

    public func webhookDeliveries(
        appId: String, webhookId: String, state: WebhookDeliveryState?, after: Int64?, limit: Int
    ) async throws -> [(position: Int64, delivery: WebhookDelivery)] {
        try await rows(
            """
            SELECT \(unescaped: Self.deliveryColumns) FROM webhook_deliveries
            WHERE app_id = \(appId) AND endpoint_id = \(webhookId)
            AND (\(state?.rawValue)::text IS NULL OR state = \(state?.rawValue)) AND id > \(after ?? 0)
            ORDER BY id LIMIT \(limit)
            """
        ).map { row in try Self.webhookDelivery(row) }
    }

    public func redeliverWebhookDelivery(appId: String, webhookId: String, deliveryId: String, now: Int64)
        async throws -> WebhookDelivery?
    {
        try await rows(
            """
            UPDATE webhook_deliveries SET state = 'pending', attempts = 0, not_before = \(now), lease_owner = NULL,
                lease_until = 0
            WHERE app_id = \(appId) AND endpoint_id = \(webhookId) AND delivery_id = \(deliveryId) AND state = 'failed'
            RETURNING \(unescaped: Self.deliveryColumns)
            """
        ).first.map { try Self.webhookDelivery($0).delivery }
    }

    // MARK: Rows

    static let endpointColumns = """
        id, url, events, description, enabled, disabled_reason, disabled_at, consecutive_failures, last_success_at,
        last_failure_at, created_at, updated_at
        """

    static let deliveryColumns = """
        id, delivery_id, endpoint_id, name, conversation_id, state, attempts, not_before, last_status, last_error,
        last_attempt_at, created_at
        """

    static func filtersJSON(_ filters: [String]) throws -> String {
        String(decoding: try JSONEncoder().encode(filters), as: UTF8.self)
    }

    static func webhookEndpoint(_ row: PostgresRow) throws -> WebhookEndpoint {
        let columns = row.makeRandomAccess()
        let events = try columns[2].decode(String.self)
        return WebhookEndpoint(
            id: try columns[0].decode(String.self), url: try columns[1].decode(String.self),
            events: try JSONDecoder().decode([String].self, from: Data(events.utf8)),
            description: try columns[3].decode(String?.self), enabled: try columns[4].decode(Bool.self),
            disabledReason: try columns[5].decode(String?.self), disabledAt: try columns[6].decode(Int64?.self),
            consecutiveFailures: Int(try columns[7].decode(Int32.self)),
            lastSuccessAt: try columns[8].decode(Int64?.self), lastFailureAt: try columns[9].decode(Int64?.self),
            createdAt: try columns[10].decode(Int64.self), updatedAt: try columns[11].decode(Int64.self)
        )
    }

    static func webhookDelivery(_ row: PostgresRow) throws -> (position: Int64, delivery: WebhookDelivery) {
        let columns = row.makeRandomAccess()
        let state = WebhookDeliveryState(rawValue: try columns[5].decode(String.self)) ?? .failed
        let delivery = WebhookDelivery(
            id: try columns[1].decode(String.self), webhookId: try columns[2].decode(String.self),
            event: EventName(rawValue: try columns[3].decode(String.self)),
            conversationId: try columns[4].decode(String?.self), state: state,
            attempts: Int(try columns[6].decode(Int32.self)),
            nextAttemptAt: state == .pending ? try columns[7].decode(Int64.self) : nil,
            lastStatus: try columns[8].decode(Int32?.self).map(Int.init),
            lastError: try columns[9].decode(String?.self),
            lastAttemptAt: try columns[10].decode(Int64?.self), createdAt: try columns[11].decode(Int64.self)
        )
        return (try columns[0].decode(Int64.self), delivery)
    }
}
