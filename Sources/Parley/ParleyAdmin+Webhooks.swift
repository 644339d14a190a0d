import ParleyAPI
import ParleyAPIClient
import ParleyProtocol

/// Webhooks: the app's server registers the endpoints of its backend (docs/PROTOCOL.md, "Webhooks").
extension ParleyAdmin {
    /// Registers an endpoint for `events` (topics such as `messages`, `reports`, or event names). The answer holds the
    /// signing secret, shown this once.
    public func createWebhook(url: String, events: [String], description: String? = nil) async throws
        -> WebhookEndpointWithSecret
    {
        let body = CreateWebhookRequest(url: url, events: events, description: description)
        return try await rest.call { try await $0.createWebhook(body: .json(body)).created.body.json }
    }

    /// The app's endpoints, oldest first (without their secrets).
    public func webhooks() async throws -> [WebhookEndpoint] {
        try await rest.call { try await $0.listWebhooks().ok.body.json }.webhooks
    }

    /// One endpoint (without its secret); `ERR_WEBHOOK_NOT_FOUND` when the app has none with this id.
    public func webhook(_ id: String) async throws -> WebhookEndpoint {
        try await rest.call { try await $0.getWebhook(path: .init(webhookId: id)).ok.body.json }
    }

    /// Changes an endpoint; `enabled: true` enables a disabled one again (its waiting deliveries go out).
    @discardableResult
    public func updateWebhook(_ id: String, _ change: UpdateWebhookRequest) async throws -> WebhookEndpoint {
        try await rest.call { try await $0.updateWebhook(path: .init(webhookId: id), body: .json(change)).ok.body.json }
    }

    /// Removes an endpoint with its waiting and failed deliveries.
    public func deleteWebhook(_ id: String) async throws {
        _ = try await rest.call { try await $0.deleteWebhook(path: .init(webhookId: id)).noContent }
    }

    /// Replaces the signing secret; the new one is in the answer.
    public func rotateWebhookSecret(_ id: String) async throws -> WebhookEndpointWithSecret {
        try await rest.call { try await $0.rotateWebhookSecret(path: .init(webhookId: id)).ok.body.json }
    }

    /// An endpoint's waiting and failed deliveries (in `state`, when given), oldest first.
    public func webhookDeliveries(
        _ id: String, state: WebhookDeliveryState? = nil, limit: Int = 50, cursor: String? = nil
    ) async throws -> WebhookDeliveryList {
        try await rest.call {
            try await $0.listWebhookDeliveries(
                path: .init(webhookId: id), query: .init(state: state, limit: limit, cursor: cursor)
            ).ok.body.json
        }
    }

    /// Sends a failed delivery again (same id, attempts from zero).
    @discardableResult
    public func redeliverWebhookDelivery(_ deliveryId: String, of id: String) async throws -> WebhookDelivery {
        try await rest.call {
            try await $0.redeliverWebhookDelivery(path: .init(webhookId: id, deliveryId: deliveryId)).ok.body.json
        }
    }
}
