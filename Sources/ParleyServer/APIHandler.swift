import Foundation
import Logging
import NIOCore
import ParleyAPI
import ParleyProtocol
import ParleyStore

/// The REST API: implements the operations generated from `openapi.yaml`.
///
/// Handlers return only their success responses; every refusal is thrown as a ``DomainError`` and turned into the
/// documented error response by ``ErrorMiddleware``.
struct APIHandler: APIProtocol {
    let store: any ParleyStore
    let authenticator: Authenticator
    let writer: CommandWriter
    let relay: Relay
    let presence: PresenceTracker
    let time: ServerClock
    let limits: EdgeRateLimiters
    let configuration: ServerConfiguration
    let logger: Logger
    /// Rings the webhook dispatcher after a report or user change queued an event.
    var webhooksQueued: @Sendable () -> Void = {}

    var credentials: RequestCredentials { RequestCredentials.current }

    func currentUser() async throws -> UserPrincipal {
        try await authenticator.user(token: credentials.bearerToken)
    }

    // MARK: Server and apps

    func getHealth(_ input: Operations.GetHealth.Input) async throws -> Operations.GetHealth.Output {
        do {
            try await store.checkHealth()
        } catch {
            logger.error("Health check failed", metadata: ["error": "\(error)"])
            return .serviceUnavailable(
                .init(body: .json(ErrorResponse(code: .internalError, message: "The database does not answer.")))
            )
        }
        return .ok(.init(body: .json(HealthStatus(status: "ok"))))
    }

    func getApp(_ input: Operations.GetApp.Input) async throws -> Operations.GetApp.Output {
        guard let app = try await store.app(id: input.path.appId) else { throw Self.invalidApp(input.path.appId) }
        return .ok(.init(body: .json(AppInfo(id: app.id, name: app.name))))
    }

    static func invalidApp(_ appId: String) -> DomainError {
        DomainError(.invalidAppID, "No app \(appId) on this server.")
    }

    // MARK: Paging

    /// The page size of a request: 50 by default, 1 to 200.
    static func pageSize(_ limit: Int?) throws -> Int {
        let limit = limit ?? 50
        guard (1...200).contains(limit) else { throw DomainError(.badRequest, "limit must be between 1 and 200.") }
        return limit
    }
}
