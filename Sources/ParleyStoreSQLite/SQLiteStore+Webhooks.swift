import Foundation
import GRDB
import ParleyProtocol
import ParleyStore

extension SQLiteStore {
    // MARK: Endpoints

    public func insertWebhookEndpoint(_ record: WebhookEndpointRecord) async throws {
        try await pool.write { db in
            let count =
                try Int.fetchOne(
                    db, sql: "SELECT COUNT(*) FROM webhook_endpoints WHERE app_id = ?", arguments: [record.appId])
                ?? 0
            guard count < Webhooks.maxEndpoints else {
                throw DomainError(.webhookLimit, "An app has at most \(Webhooks.maxEndpoints) webhook endpoints.")
            }
            let endpoint = record.endpoint
            try db.execute(
                sql: """
                    INSERT INTO webhook_endpoints (id, app_id, url, events, event_names, description, secret, enabled,
                        created_at, updated_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    endpoint.id, record.appId, endpoint.url, try Self.filtersJSON(endpoint.events),
                    Webhooks.namesColumn(record.eventNames), endpoint.description, record.secret, endpoint.enabled,
                    endpoint.createdAt, endpoint.updatedAt,
                ]
            )
            try Self.syncWebhookTrigger(db)
        }
    }

    public func webhookEndpoints(appId: String) async throws -> [WebhookEndpoint] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT \(Self.endpointColumns) FROM webhook_endpoints WHERE app_id = ? ORDER BY created_at, id",
                arguments: [appId]
            ).map(Self.webhookEndpoint)
        }
    }

    public func webhookEndpoint(appId: String, id: String) async throws -> WebhookEndpoint? {
        try await pool.read { db in try Self.fetchWebhookEndpoint(db, appId: appId, id: id) }
    }

    public func updateWebhookEndpoint(appId: String, id: String, _ change: WebhookEndpointChange, now: Int64)
        async throws -> WebhookEndpoint?
    {
        try await pool.write { db in
            guard try Self.fetchWebhookEndpoint(db, appId: appId, id: id) != nil else { return nil }
            try db.execute(
                sql: """
                    UPDATE webhook_endpoints SET url = coalesce(?, url), events = coalesce(?, events),
                        event_names = coalesce(?, event_names), description = coalesce(?, description),
                        secret = coalesce(?, secret), updated_at = ?,
                        enabled = coalesce(?, enabled),
                        disabled_reason = CASE WHEN ? IS NULL THEN disabled_reason WHEN ? THEN NULL
                            ELSE 'Disabled by the app''s server.' END,
                        disabled_at = CASE WHEN ? IS NULL THEN disabled_at WHEN ? THEN NULL
                            WHEN enabled THEN ? ELSE disabled_at END,
                        consecutive_failures = CASE WHEN ? THEN 0 ELSE consecutive_failures END
                    WHERE app_id = ? AND id = ?
                    """,
                arguments: [
                    change.url, try change.filters.map(Self.filtersJSON), change.eventNames.map(Webhooks.namesColumn),
                    change.description, change.secret, now, change.enabled, change.enabled, change.enabled,
                    change.enabled, change.enabled, now, change.enabled == true, appId, id,
                ]
            )
            if change.enabled != nil { try Self.syncWebhookTrigger(db) }
            return try Self.fetchWebhookEndpoint(db, appId: appId, id: id)
        }
    }

    public func deleteWebhookEndpoint(appId: String, id: String) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM webhook_endpoints WHERE app_id = ? AND id = ?", arguments: [appId, id])
            guard db.changesCount > 0 else { return false }
            try db.execute(sql: "DELETE FROM webhook_deliveries WHERE endpoint_id = ?", arguments: [id])
            try Self.syncWebhookTrigger(db)
            return true
        }
    }

    // MARK: The events trigger

    /// Creates the trigger that queues conversation events while an enabled endpoint exists, and drops it when none
    /// does; called in the transaction of every change of an endpoint's existence or state. A batch of the writer
    /// commits either before the change (no endpoint was there to want its events) or after (the trigger is there).
    static func syncWebhookTrigger(_ db: Database) throws {
        if try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM webhook_endpoints WHERE enabled)") == true {
            try db.execute(
                sql: """
                    CREATE TRIGGER IF NOT EXISTS webhook_outbox_of_events AFTER INSERT ON events
                    BEGIN
                        INSERT INTO webhook_outbox (app_id, ordering_key, name, conversation_id, conversation_pk, seq,
                            created_at)
                        SELECT c.app_id, 'c:' || c.id, NEW.name, c.id, NEW.conversation_pk, NEW.seq, NEW.created_at
                        FROM conversations c WHERE c.pk = NEW.conversation_pk AND EXISTS (
                            SELECT 1 FROM webhook_endpoints w
                            WHERE w.app_id = c.app_id AND w.enabled AND instr(w.event_names, ',' || NEW.name || ',') > 0
                        );
                    END
                    """
            )
        } else {
            try db.execute(sql: "DROP TRIGGER IF EXISTS webhook_outbox_of_events")
        }
    }

    // MARK: Outbox and deliveries

    /// Queues a report or user event for the app's endpoints that want it, in the caller's transaction.
    static func queueWebhookEvent(_ db: Database, appId: String, name: EventName, key: String, body: [UInt8], at: Int64)
        throws
    {
        try db.cachedStatement(
            sql: """
                INSERT INTO webhook_outbox (app_id, ordering_key, name, body, created_at)
                SELECT ?, ?, ?, ?, ? WHERE EXISTS (
                    SELECT 1 FROM webhook_endpoints
                    WHERE app_id = ? AND enabled AND instr(event_names, ',' || ? || ',') > 0
                )
                """
        ).execute(arguments: [appId, key, name.rawValue, Data(body), at, appId, name.rawValue])
    }

    static func queueReportEvent(_ db: Database, appId: String, _ report: Report, name: EventName, at: Int64) throws {
        let (key, body) = try Webhooks.reportEvent(appId: appId, report, name: name, at: at)
        try queueWebhookEvent(db, appId: appId, name: name, key: key, body: body, at: at)
    }

    /// Queues a user's webhook event, which happened at `time` (default: the profile's last change).
    static func queueUserEvent(_ db: Database, appId: String, _ user: User, name: EventName, at time: Int64? = nil)
        throws
    {
        let (key, body) = try Webhooks.userEvent(appId: appId, user, name: name, at: time)
        try queueWebhookEvent(db, appId: appId, name: name, key: key, body: body, at: time ?? user.updatedAt)
    }

    public func expandWebhookOutbox(limit: Int, now: Int64) async throws -> Int {
        // A read first: an empty outbox (the usual case) takes no write lock from the message path.
        guard
            try await pool.read({ db in try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM webhook_outbox)") })
                == true
        else { return 0 }
        return try await pool.write { db in
            let ids = try Int64.fetchAll(
                db, sql: "SELECT id FROM webhook_outbox ORDER BY id LIMIT ?", arguments: [limit])
            guard let first = ids.first, let last = ids.last else { return 0 }
            // One delivery per endpoint that wants the event; an event that is gone (its conversation's history was
            // removed) makes none.
            try db.execute(
                sql: """
                    INSERT INTO webhook_deliveries (delivery_id, app_id, endpoint_id, ordering_key, position, name,
                        conversation_id, body, created_at, state, not_before)
                    SELECT \(Webhooks.deliveryIDSQL(outboxId: "o.id", endpointId: "w.id")), o.app_id, w.id,
                        o.ordering_key, o.id, o.name, o.conversation_id, coalesce(o.body, e.body), o.created_at,
                        'pending', ?
                    FROM webhook_outbox o
                    JOIN webhook_endpoints w
                        ON w.app_id = o.app_id AND w.enabled AND instr(w.event_names, ',' || o.name || ',') > 0
                    LEFT JOIN events e ON e.conversation_pk = o.conversation_pk AND e.seq = o.seq
                    WHERE o.id BETWEEN ? AND ? AND coalesce(o.body, e.body) IS NOT NULL
                    ORDER BY o.id, w.id
                    """,
                arguments: [now, first, last]
            )
            try db.execute(sql: "DELETE FROM webhook_outbox WHERE id BETWEEN ? AND ?", arguments: [first, last])
            return ids.count
        }
    }

    public func claimWebhookDeliveries(owner: String, now: Int64, leaseUntil: Int64, limit: Int) async throws
        -> [WebhookJob]
    {
        try await pool.write { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    UPDATE webhook_deliveries SET lease_owner = ?, lease_until = ?
                    WHERE id IN (
                        SELECT d.id FROM webhook_deliveries d
                        JOIN webhook_endpoints w ON w.id = d.endpoint_id AND w.enabled
                        WHERE d.state = 'pending' AND d.not_before <= ? AND d.lease_until <= ?
                        AND NOT EXISTS (
                            SELECT 1 FROM webhook_deliveries p
                            WHERE p.endpoint_id = d.endpoint_id AND p.ordering_key = d.ordering_key
                            AND p.state = 'pending' AND p.position < d.position
                        )
                        ORDER BY d.position LIMIT ?
                    )
                    RETURNING id, delivery_id, app_id, endpoint_id, name, body, attempts, created_at, position
                    """,
                arguments: [owner, leaseUntil, now, now, limit]
            )
            var jobs: [(Int64, WebhookJob)] = []
            for row in rows {
                let endpointId: String = row["endpoint_id"]
                guard
                    let endpoint = try Row.fetchOne(
                        db, sql: "SELECT url, secret FROM webhook_endpoints WHERE id = ?", arguments: [endpointId]
                    )
                else { continue }
                let body: Data = row["body"]
                jobs.append(
                    (
                        row["position"],
                        WebhookJob(
                            rowId: row["id"], deliveryId: row["delivery_id"], appId: row["app_id"],
                            endpointId: endpointId, url: endpoint["url"], secret: endpoint["secret"],
                            event: EventName(rawValue: row["name"]), body: [UInt8](body), attempts: row["attempts"],
                            createdAt: row["created_at"]
                        )
                    )
                )
            }
            return jobs.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }

    public func completeWebhookDelivery(_ job: WebhookJob, now: Int64) async throws {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM webhook_deliveries WHERE id = ?", arguments: [job.rowId])
            try db.execute(
                sql: "UPDATE webhook_endpoints SET consecutive_failures = 0, last_success_at = ? WHERE id = ?",
                arguments: [now, job.endpointId]
            )
        }
    }

    public func failWebhookDelivery(_ job: WebhookJob, _ failure: WebhookFailure) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: """
                    UPDATE webhook_deliveries SET attempts = ?, state = ?, not_before = ?, lease_owner = NULL,
                        lease_until = 0, last_status = ?, last_error = ?, last_attempt_at = ?
                    WHERE id = ?
                    """,
                arguments: [
                    failure.attempts, failure.retryAt == nil ? "failed" : "pending", failure.retryAt ?? failure.now,
                    failure.status, failure.error, failure.now, job.rowId,
                ]
            )
            try db.execute(
                sql: """
                    UPDATE webhook_endpoints SET consecutive_failures = consecutive_failures + 1, last_failure_at = ?
                    WHERE id = ?
                    """,
                arguments: [failure.now, job.endpointId]
            )
            try db.execute(
                sql: """
                    UPDATE webhook_endpoints SET enabled = 0, disabled_at = ?, disabled_reason = ?
                    WHERE id = ? AND enabled AND consecutive_failures >= ?
                    """,
                arguments: [
                    failure.now, Webhooks.disabledReason(failure.disableAfter), job.endpointId, failure.disableAfter,
                ]
            )
            let disabled = db.changesCount > 0
            if disabled { try Self.syncWebhookTrigger(db) }
            return disabled
        }
    }

    public func releaseWebhookDeliveries(owner: String?) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    UPDATE webhook_deliveries SET lease_owner = NULL, lease_until = 0
                    WHERE lease_owner IS NOT NULL AND (? IS NULL OR lease_owner = ?)
                    """,
                arguments: [owner, owner]
            )
        }
    }

    public func hasEnabledWebhookEndpoints() async throws -> Bool {
        try await pool.read { db in
            try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM webhook_endpoints WHERE enabled)") ?? false
        }
    }

    public func nextWebhookDeliveryDue() async throws -> Int64? {
        try await pool.read { db in
            try Int64.fetchOne(
                db,
                sql: """
                    SELECT MIN(MAX(d.not_before, d.lease_until)) FROM webhook_deliveries d
                    JOIN webhook_endpoints w ON w.id = d.endpoint_id AND w.enabled
                    WHERE d.state = 'pending'
                    """
            )
        }
    }

    public func webhookDeliveries(
        appId: String, webhookId: String, state: WebhookDeliveryState?, after: Int64?, limit: Int
    ) async throws -> [(position: Int64, delivery: WebhookDelivery)] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.deliveryColumns) FROM webhook_deliveries
                    WHERE app_id = ? AND endpoint_id = ? AND (? IS NULL OR state = ?) AND id > ?
                    ORDER BY id LIMIT ?
                    """,
                arguments: [appId, webhookId, state?.rawValue, state?.rawValue, after ?? 0, limit]
            ).map { row in (row["id"], Self.webhookDelivery(row)) }
        }
    }

    public func redeliverWebhookDelivery(appId: String, webhookId: String, deliveryId: String, now: Int64)
        async throws -> WebhookDelivery?
    {
        try await pool.write { db in
            try db.execute(
                sql: """
                    UPDATE webhook_deliveries SET state = 'pending', attempts = 0, not_before = ?, lease_owner = NULL,
                        lease_until = 0
                    WHERE app_id = ? AND endpoint_id = ? AND delivery_id = ? AND state = 'failed'
                    """,
                arguments: [now, appId, webhookId, deliveryId]
            )
            guard db.changesCount > 0 else { return nil }
            return try Row.fetchOne(
                db, sql: "SELECT \(Self.deliveryColumns) FROM webhook_deliveries WHERE delivery_id = ?",
                arguments: [deliveryId]
            ).map(Self.webhookDelivery)
        }
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

    static func fetchWebhookEndpoint(_ db: Database, appId: String, id: String) throws -> WebhookEndpoint? {
        try Row.fetchOne(
            db, sql: "SELECT \(endpointColumns) FROM webhook_endpoints WHERE app_id = ? AND id = ?",
            arguments: [appId, id]
        ).map(webhookEndpoint)
    }

    static func filtersJSON(_ filters: [String]) throws -> String {
        String(decoding: try JSONEncoder().encode(filters), as: UTF8.self)
    }

    static func webhookEndpoint(_ row: Row) throws -> WebhookEndpoint {
        let events: String = row["events"]
        return WebhookEndpoint(
            id: row["id"], url: row["url"], events: try JSONDecoder().decode([String].self, from: Data(events.utf8)),
            description: row["description"], enabled: row["enabled"], disabledReason: row["disabled_reason"],
            disabledAt: row["disabled_at"], consecutiveFailures: row["consecutive_failures"],
            lastSuccessAt: row["last_success_at"], lastFailureAt: row["last_failure_at"], createdAt: row["created_at"],
            updatedAt: row["updated_at"]
        )
    }

    static func webhookDelivery(_ row: Row) -> WebhookDelivery {
        let state = WebhookDeliveryState(rawValue: row["state"]) ?? .failed
        return WebhookDelivery(
            id: row["delivery_id"], webhookId: row["endpoint_id"], event: EventName(rawValue: row["name"]),
            conversationId: row["conversation_id"], state: state, attempts: row["attempts"],
            nextAttemptAt: state == .pending ? row["not_before"] : nil, lastStatus: row["last_status"],
            lastError: row["last_error"], lastAttemptAt: row["last_attempt_at"], createdAt: row["created_at"]
        )
    }
}
