import ParleyAPI
import ParleyAPIServer
import ParleyProtocol
import ParleyStore

/// What the app's operator does with the REST API key (the web console, or the app's own server): the app's figures,
/// its allowed web origins, its keys, and every user and conversation of it.
extension APIHandler {
    func getAppSettings(_ input: Operations.GetAppSettings.Input) async throws -> Operations.GetAppSettings.Output {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        return .ok(.init(body: .json(try await settings(of: appId))))
    }

    func updateAppSettings(_ input: Operations.UpdateAppSettings.Input) async throws
        -> Operations.UpdateAppSettings.Output
    {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        guard case .json(let request) = input.body else { throw DomainError(.badRequest, "Expected JSON.") }
        if let requested = request.allowedOrigins {
            guard requested.count <= UpdateAppSettingsRequest.maxAllowedOrigins else {
                throw DomainError(
                    .badRequest, "At most \(UpdateAppSettingsRequest.maxAllowedOrigins) allowed origins."
                )
            }
            var origins: [String] = []
            for origin in try requested.map(AllowedOrigins.normalized) where !origins.contains(origin) {
                origins.append(origin)
            }
            guard try await store.updateAppOrigins(appId: appId, origins: origins) else {
                throw Self.invalidApp(appId)
            }
            allowedOrigins?.update(appId: appId, origins: origins)
            logger.info("Allowed origins changed", metadata: ["app": "\(appId)", "origins": "\(origins)"])
        }
        if let limit = request.maxFileBytes {
            let serverLimit = configuration.files.maxFileBytes
            guard (0...serverLimit).contains(limit) else {
                throw DomainError(
                    .badRequest, "maxFileBytes must be 0 (the server's limit) to \(serverLimit) (the server's limit)."
                )
            }
            guard try await store.updateAppFileLimit(appId: appId, maxFileBytes: limit == 0 ? nil : limit) else {
                throw Self.invalidApp(appId)
            }
            logger.info("Upload limit changed", metadata: ["app": "\(appId)", "maxFileBytes": "\(limit)"])
        }
        if let visibility = request.userDirectory {
            guard try await store.updateAppUserDirectory(appId: appId, visibility: visibility) else {
                throw Self.invalidApp(appId)
            }
            logger.info("User directory changed", metadata: ["app": "\(appId)", "userDirectory": "\(visibility)"])
        }
        if let mode = request.deletedUserMessages {
            guard try await store.updateAppDeletedUserMessages(appId: appId, mode) else { throw Self.invalidApp(appId) }
            logger.info("Deleted users' messages changed", metadata: ["app": "\(appId)", "mode": "\(mode)"])
        }
        return .ok(.init(body: .json(try await settings(of: appId))))
    }

    func rotateAppKeys(_ input: Operations.RotateAppKeys.Input) async throws -> Operations.RotateAppKeys.Output {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        guard let app = try await AppProvisioning.rotateKeys(in: store, appId: appId) else {
            throw Self.invalidApp(appId)
        }
        logger.notice("App keys rotated", metadata: ["app": "\(appId)"])
        return .ok(.init(body: .json(AppKeys(appId: app.appId, authKey: app.authKey, restAPIKey: app.restAPIKey))))
    }

    func listUsers(_ input: Operations.ListUsers.Input) async throws -> Operations.ListUsers.Output {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        let limit = try Self.pageSize(input.query.limit)
        let after = input.query.cursor
        try InputRules.identifier(after, "cursor")
        let users = try await store.users(appId: appId, after: after, limit: limit)
        let next = users.count == limit ? users.last?.uid : nil
        return .ok(.init(body: .json(UserList(users: users, nextCursor: next))))
    }

    /// Every conversation of the app, newest first: the API-key form of `GET /v1/conversations`.
    func appConversations(appId: String, limit: Int?, cursor: String?) async throws -> ConversationList {
        let limit = try Self.pageSize(limit)
        let before = try cursor.map { cursor in
            guard let pk = Int64(cursor), pk > 0 else { throw DomainError(.badRequest, "Invalid cursor.") }
            return pk
        }
        let rows = try await store.appConversations(appId: appId, beforePK: before, limit: limit)
        let next = rows.count == limit ? rows.last.map { String($0.pk) } : nil
        return ConversationList(conversations: rows.map(\.conversation), nextCursor: next)
    }

    /// A conversation of the app for its server: any one that is not deleted.
    func appConversation(appId: String, conversationId: String) async throws -> ConversationRow {
        try InputRules.identifier(conversationId, "conversationId")
        guard let (row, _) = try await store.conversation(appId: appId, id: conversationId, viewer: ""),
            row.deletedAt == nil
        else { throw DomainError.conversationNotFound(conversationId) }
        return row
    }

    private func settings(of appId: String) async throws -> AppOverview {
        guard let app = try await store.app(id: appId) else { throw Self.invalidApp(appId) }
        let counts = try await store.appCounts(appId: appId)
        let live = liveCounts(appId)
        return AppOverview(
            appId: app.id, name: app.name, createdAt: app.createdAt, allowedOrigins: app.allowedOrigins,
            maxFileBytes: FileSettings.limit(server: configuration.files.maxFileBytes, app: app.maxFileBytes),
            hasOwnFileLimit: app.maxFileBytes != nil, userDirectory: app.userDirectory,
            deletedUserMessages: app.deletedUserMessages,
            stats: AppStats(
                users: counts.users, conversations: counts.conversations, liveConnections: live.connections,
                connectedUsers: live.users, onlineUsers: presence.onlineCount(appId: appId)
            )
        )
    }
}
