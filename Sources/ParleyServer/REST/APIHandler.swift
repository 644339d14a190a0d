import Foundation
import Logging
import NIOCore
import ParleyAPI
import ParleyAPIServer
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
    /// Starting, serving or draining.
    var readiness = Readiness()
    /// Asks the database for readiness, one question at a time.
    let databaseProbe = DatabaseProbe()
    /// Rings the webhook dispatcher after a report or user change queued an event.
    var webhooksQueued: @Sendable () -> Void = {}
    /// This node's live connections and connected users of an app (the operator's figures).
    var liveCounts: @Sendable (_ appId: String) -> (connections: Int, users: Int) = { _ in (0, 0) }
    /// The apps' allowed web origins, told of changes made here.
    var allowedOrigins: AllowedOrigins?

    var credentials: RequestCredentials { RequestCredentials.current }

    func currentUser() async throws -> UserPrincipal {
        try await authenticator.user(token: credentials.bearerToken)
    }

    // MARK: Server and apps

    func getHealth(_ input: Operations.GetHealth.Input) async throws -> Operations.GetHealth.Output {
        if let refusal = await readinessRefusal() { return .serviceUnavailable(.init(body: .json(refusal))) }
        return .ok(.init(body: .json(HealthStatus(status: "ok"))))
    }

    func getReadiness(_ input: Operations.GetReadiness.Input) async throws -> Operations.GetReadiness.Output {
        if let refusal = await readinessRefusal() { return .serviceUnavailable(.init(body: .json(refusal))) }
        return .ok(.init(body: .json(HealthStatus(status: "ok"))))
    }

    /// The process answers: nothing else is checked (a load balancer restarts a server that stops answering this).
    func getLiveness(_ input: Operations.GetLiveness.Input) async throws -> Operations.GetLiveness.Output {
        .ok(.init(body: .json(HealthStatus(status: "ok"))))
    }

    /// Why the server should get no new clients now: starting, draining, or a database that does not answer within
    /// ``ServerConfiguration/healthCheckTimeout``; nil when it is ready.
    private func readinessRefusal() async -> ErrorResponse? {
        switch readiness.current {
        case .starting: return ErrorResponse(code: .notReady, message: "The server is starting.")
        case .draining: return ErrorResponse(code: .serverShuttingDown, message: "The server is shutting down.")
        case .serving: break
        }
        let failure = await databaseProbe.check(
            store, timeline: time.timeline, timeout: configuration.healthCheckTimeout
        )
        guard let failure else { return nil }
        logger.error("Health check failed", metadata: ["error": "\(failure)"])
        return ErrorResponse(code: .databaseUnavailable, message: "The database does not answer.")
    }

    func getApp(_ input: Operations.GetApp.Input) async throws -> Operations.GetApp.Output {
        guard let app = try await store.app(id: input.path.appId) else { throw Self.invalidApp(input.path.appId) }
        RequestApp.record(app.id)
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
