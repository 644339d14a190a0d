import Foundation
import ParleyAPI
import ParleyAPIServer
import ParleyProtocol
import ParleyStore

/// `/v1/webhooks`: the app's server (REST API key) registers the endpoints of its backend and watches their
/// deliveries.
extension APIHandler {
    func listWebhooks(_ input: Operations.ListWebhooks.Input) async throws -> Operations.ListWebhooks.Output {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        return .ok(.init(body: .json(WebhookEndpointList(webhooks: try await store.webhookEndpoints(appId: appId)))))
    }

    func createWebhook(_ input: Operations.CreateWebhook.Input) async throws -> Operations.CreateWebhook.Output {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        guard case .json(let request) = input.body else { throw DomainError(.badRequest, "Expected JSON.") }
        try Self.validateWebhookURL(request.url)
        let names = try Self.webhookEventNames(request.events)
        try InputRules.name(request.description, "description", maxBytes: Webhooks.maxDescriptionBytes)
        let now = time.epochMilliseconds()
        let endpoint = WebhookEndpoint(
            id: Secrets.randomID(prefix: "wh_"), url: request.url, events: request.events,
            description: request.description, enabled: true, createdAt: now, updatedAt: now
        )
        let secret = Self.newWebhookSecret()
        try await store.insertWebhookEndpoint(
            WebhookEndpointRecord(appId: appId, endpoint: endpoint, secret: secret, eventNames: names)
        )
        // The dispatcher starts looking (it sets no timer while no endpoint exists).
        webhooksQueued()
        return .created(.init(body: .json(WebhookEndpointWithSecret(endpoint: endpoint, secret: secret))))
    }

    func getWebhook(_ input: Operations.GetWebhook.Input) async throws -> Operations.GetWebhook.Output {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        return .ok(.init(body: .json(try await existingWebhook(appId: appId, id: input.path.webhookId))))
    }

    func updateWebhook(_ input: Operations.UpdateWebhook.Input) async throws -> Operations.UpdateWebhook.Output {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        guard case .json(let request) = input.body else { throw DomainError(.badRequest, "Expected JSON.") }
        try InputRules.identifier(input.path.webhookId, "webhookId")
        if let url = request.url { try Self.validateWebhookURL(url) }
        let names = try request.events.map(Self.webhookEventNames)
        try InputRules.name(request.description, "description", maxBytes: Webhooks.maxDescriptionBytes)
        let change = WebhookEndpointChange(
            url: request.url, filters: request.events, eventNames: names, description: request.description,
            enabled: request.enabled
        )
        guard
            let endpoint = try await store.updateWebhookEndpoint(
                appId: appId, id: input.path.webhookId, change, now: time.epochMilliseconds()
            )
        else { throw Self.webhookNotFound(input.path.webhookId) }
        // Enabled again: its waiting deliveries go out now.
        if request.enabled == true { webhooksQueued() }
        return .ok(.init(body: .json(endpoint)))
    }

    func deleteWebhook(_ input: Operations.DeleteWebhook.Input) async throws -> Operations.DeleteWebhook.Output {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        try InputRules.identifier(input.path.webhookId, "webhookId")
        guard try await store.deleteWebhookEndpoint(appId: appId, id: input.path.webhookId) else {
            throw Self.webhookNotFound(input.path.webhookId)
        }
        return .noContent(.init())
    }

    func rotateWebhookSecret(_ input: Operations.RotateWebhookSecret.Input) async throws
        -> Operations.RotateWebhookSecret.Output
    {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        try InputRules.identifier(input.path.webhookId, "webhookId")
        let secret = Self.newWebhookSecret()
        guard
            let endpoint = try await store.updateWebhookEndpoint(
                appId: appId, id: input.path.webhookId, WebhookEndpointChange(secret: secret),
                now: time.epochMilliseconds()
            )
        else { throw Self.webhookNotFound(input.path.webhookId) }
        return .ok(.init(body: .json(WebhookEndpointWithSecret(endpoint: endpoint, secret: secret))))
    }

    func listWebhookDeliveries(_ input: Operations.ListWebhookDeliveries.Input) async throws
        -> Operations.ListWebhookDeliveries.Output
    {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        _ = try await existingWebhook(appId: appId, id: input.path.webhookId)
        let limit = try Self.pageSize(input.query.limit)
        let after = try input.query.cursor.map { cursor in
            guard let position = Int64(cursor), position >= 0 else { throw DomainError(.badRequest, "Invalid cursor.") }
            return position
        }
        let page = try await store.webhookDeliveries(
            appId: appId, webhookId: input.path.webhookId, state: input.query.state, after: after, limit: limit
        )
        let next = page.count == limit ? page.last.map { String($0.position) } : nil
        return .ok(.init(body: .json(WebhookDeliveryList(deliveries: page.map(\.delivery), nextCursor: next))))
    }

    func redeliverWebhookDelivery(_ input: Operations.RedeliverWebhookDelivery.Input) async throws
        -> Operations.RedeliverWebhookDelivery.Output
    {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        try InputRules.identifier(input.path.webhookId, "webhookId")
        try InputRules.identifier(input.path.deliveryId, "deliveryId")
        guard
            let delivery = try await store.redeliverWebhookDelivery(
                appId: appId, webhookId: input.path.webhookId, deliveryId: input.path.deliveryId,
                now: time.epochMilliseconds()
            )
        else {
            throw DomainError(
                .webhookNotFound, "No failed delivery \(input.path.deliveryId) of webhook \(input.path.webhookId)."
            )
        }
        webhooksQueued()
        return .ok(.init(body: .json(delivery)))
    }

    // MARK: Rules

    private func existingWebhook(appId: String, id: String) async throws -> WebhookEndpoint {
        try InputRules.identifier(id, "webhookId")
        guard let endpoint = try await store.webhookEndpoint(appId: appId, id: id) else {
            throw Self.webhookNotFound(id)
        }
        return endpoint
    }

    static func webhookNotFound(_ id: String) -> DomainError {
        DomainError(.webhookNotFound, "No webhook \(id) in this app.")
    }

    /// `whsec_` and 32 random bytes in hex.
    static func newWebhookSecret() -> String {
        Secrets.randomHex(prefix: "whsec_", byteCount: 32)
    }

    /// An absolute `http` or `https` URL with a host, at most ``Webhooks/maxURLBytes``, no credentials, no fragment.
    static func validateWebhookURL(_ url: String) throws {
        guard url.utf8.count <= Webhooks.maxURLBytes else {
            throw DomainError(.fieldTooLarge, "`url` is longer than \(Webhooks.maxURLBytes) bytes.")
        }
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty,
            components.user == nil, components.password == nil, components.fragment == nil,
            !url.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || $0 == " " })
        else {
            throw DomainError(.badRequest, "`url` must be an absolute http:// or https:// URL with a host.")
        }
    }

    /// The event names of a filter list: 1 to 20 topics or event names, each known.
    static func webhookEventNames(_ filters: [String]) throws -> Set<EventName> {
        guard (1...20).contains(filters.count) else {
            throw DomainError(.badRequest, "`events` lists 1 to 20 topics or event names.")
        }
        guard let names = WebhookTopic.eventNames(for: filters) else {
            let known = WebhookTopic.allCases.map(\.rawValue).joined(separator: ", ")
            throw DomainError(
                .badRequest, "`events` holds something that is neither a topic (\(known)) nor an event name they hold."
            )
        }
        return names
    }
}
