import ParleyAPI
import ParleyAPIServer
import ParleyProtocol
import ParleyStore

extension APIHandler {
    // MARK: Login and sessions

    func login(_ input: Operations.Login.Input) async throws -> Operations.Login.Output {
        if let wait = limits.logins?.take(credentials.clientAddress ?? "") {
            throw DomainError(.rateLimited, "Too many logins from this address; try again later.", retryAfter: wait)
        }
        guard case .json(let request) = input.body else { throw DomainError(.badRequest, "Expected JSON.") }
        try InputRules.identifier(request.appId, "appId")
        try InputRules.identifier(request.authKey, "authKey", maxBytes: 256)
        guard let app = try await store.app(id: request.appId) else { throw Self.invalidApp(request.appId) }
        RequestApp.record(app.id)
        guard Secrets.constantTimeEquals(Secrets.hash(request.authKey), app.authKeyHash) else {
            throw DomainError(.authKeyInvalid, "The Auth Key is not valid for this app.")
        }
        try InputRules.uid(request.uid)
        let now = time.epochMilliseconds()
        let user = try await store.ensureUser(
            appId: app.id, User(uid: request.uid, name: request.uid, createdAt: now, updatedAt: now)
        )
        if user.createdAt == now { webhooksQueued() }
        try Self.requireActive(user)
        let issued = try await issueToken(appId: app.id, uid: user.uid, ttlSeconds: nil)
        return .ok(.init(body: .json(LoginResponse(user: user, authToken: issued.authToken))))
    }

    func getMe(_ input: Operations.GetMe.Input) async throws -> Operations.GetMe.Output {
        let principal = try await currentUser()
        guard let user = try await store.user(appId: principal.appId, uid: principal.uid) else {
            throw DomainError(.authTokenInvalid, "The token's user no longer exists.")
        }
        return .ok(.init(body: .json(user)))
    }

    func logout(_ input: Operations.Logout.Input) async throws -> Operations.Logout.Output {
        let principal = try await currentUser()
        _ = try await store.revokeToken(
            appId: principal.appId, uid: principal.uid, tokenId: principal.tokenId, now: time.epochMilliseconds()
        )
        closeSockets(appId: principal.appId, uid: principal.uid, tokenIds: [principal.tokenId])
        return .noContent(.init())
    }

    // MARK: Users

    func createUser(_ input: Operations.CreateUser.Input) async throws -> Operations.CreateUser.Output {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        guard case .json(let request) = input.body else { throw DomainError(.badRequest, "Expected JSON.") }
        try InputRules.uid(request.uid)
        try Self.validateProfile(name: request.name, avatarURL: request.avatarURL, metadata: request.metadata)
        let now = time.epochMilliseconds()
        let user = User(
            uid: request.uid, name: request.name ?? request.uid, avatarURL: request.avatarURL,
            metadata: request.metadata, createdAt: now, updatedAt: now
        )
        try await store.insertUser(appId: appId, user)
        webhooksQueued()
        return .created(.init(body: .json(user)))
    }

    func getUser(_ input: Operations.GetUser.Input) async throws -> Operations.GetUser.Output {
        let caller = try await authenticator.caller(credentials)
        return .ok(.init(body: .json(try await existingUser(appId: caller.appId, uid: input.path.uid))))
    }

    func updateUser(_ input: Operations.UpdateUser.Input) async throws -> Operations.UpdateUser.Output {
        let caller = try await authenticator.caller(credentials)
        if case .user(let principal) = caller, principal.uid != input.path.uid {
            throw DomainError(.forbidden, "A user may update only their own profile.")
        }
        guard case .json(let update) = input.body else { throw DomainError(.badRequest, "Expected JSON.") }
        try Self.validateProfile(name: update.name, avatarURL: update.avatarURL, metadata: update.metadata)
        guard
            let user = try await store.updateUser(
                appId: caller.appId, uid: input.path.uid, update, now: time.epochMilliseconds()
            )
        else { throw DomainError.uidNotFound(input.path.uid) }
        webhooksQueued()
        try await announceProfile(user, appId: caller.appId)
        return .ok(.init(body: .json(user)))
    }

    // MARK: Auth tokens

    func issueAuthToken(_ input: Operations.IssueAuthToken.Input) async throws -> Operations.IssueAuthToken.Output {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        var ttlSeconds: Int64?
        if case .json(let request) = input.body { ttlSeconds = request.ttlSeconds }
        if let ttlSeconds, !(1...InputRules.maxTokenLifetimeSeconds).contains(ttlSeconds) {
            throw DomainError(.badRequest, "ttlSeconds must be 1 to \(InputRules.maxTokenLifetimeSeconds) (ten years).")
        }
        let user = try await existingUser(appId: appId, uid: input.path.uid)
        try Self.requireActive(user)
        return .created(.init(body: .json(try await issueToken(appId: appId, uid: user.uid, ttlSeconds: ttlSeconds))))
    }

    func listAuthTokens(_ input: Operations.ListAuthTokens.Input) async throws -> Operations.ListAuthTokens.Output {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        let user = try await existingUser(appId: appId, uid: input.path.uid)
        let tokens = try await store.tokens(appId: appId, uid: user.uid, now: time.epochMilliseconds())
        return .ok(.init(body: .json(AuthTokenList(tokens: tokens.map(\.info)))))
    }

    func revokeAuthToken(_ input: Operations.RevokeAuthToken.Input) async throws -> Operations.RevokeAuthToken.Output {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        guard
            try await store.revokeToken(
                appId: appId, uid: input.path.uid, tokenId: input.path.tokenId, now: time.epochMilliseconds()
            ) != nil
        else { throw DomainError(.tokenNotFound, "User \(input.path.uid) has no live token \(input.path.tokenId).") }
        closeSockets(appId: appId, uid: input.path.uid, tokenIds: [input.path.tokenId])
        return .noContent(.init())
    }

    func revokeAllAuthTokens(_ input: Operations.RevokeAllAuthTokens.Input) async throws
        -> Operations.RevokeAllAuthTokens.Output
    {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        let user = try await existingUser(appId: appId, uid: input.path.uid)
        let revoked = try await store.revokeTokens(appId: appId, uid: user.uid, now: time.epochMilliseconds())
        closeSockets(appId: appId, uid: user.uid, tokenIds: Set(revoked))
        return .noContent(.init())
    }

    // MARK: Deactivation

    /// `POST /v1/users/{uid}/deactivate`: the user's tokens revoked, their sockets closed (4001
    /// `ERR_USER_DEACTIVATED`), no login or token until reactivated.
    func deactivateUser(_ input: Operations.DeactivateUser.Input) async throws -> Operations.DeactivateUser.Output {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        try InputRules.uid(input.path.uid)
        return .ok(.init(body: .json(try await deactivate(appId: appId, uid: input.path.uid))))
    }

    /// Deactivates a user (the first step of a deletion too): the flag, their tokens revoked, their sockets closed.
    func deactivate(appId: String, uid: String) async throws -> User {
        let now = time.epochMilliseconds()
        guard let user = try await store.setUserDeactivated(appId: appId, uid: uid, deactivated: true, now: now) else {
            throw DomainError.uidNotFound(uid)
        }
        webhooksQueued()
        logger.notice("User deactivated", metadata: ["app": "\(appId)", "uid": "\(user.uid)"])
        // Every time, after the flag: a token issued while it was being set is revoked here.
        let revoked = try await store.revokeTokens(appId: appId, uid: user.uid, now: now)
        logger.info("Tokens revoked", metadata: ["app": "\(appId)", "uid": "\(user.uid)", "count": "\(revoked.count)"])
        // Every socket of the user (nil: whatever token opened it).
        relay.close(
            appId: appId, uid: user.uid, tokenIds: nil, code: WebSocketCloseCode.authenticationFailed,
            reason: .userDeactivated
        )
        return user
    }

    /// `GET /v1/users/{uid}/export`: a page of the user's data (``UserExport``).
    func exportUser(_ input: Operations.ExportUser.Input) async throws -> Operations.ExportUser.Output {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        try InputRules.uid(input.path.uid)
        let limit = try Self.pageSize(input.query.limit)
        let after = try input.query.cursor.map { cursor in
            guard let position = UserExport.Position(cursor: cursor) else {
                throw DomainError(.badRequest, "Invalid cursor.")
            }
            return position
        }
        guard let user = try await store.user(appId: appId, uid: input.path.uid) else {
            throw DomainError.uidNotFound(input.path.uid)
        }
        let memberships = after == nil ? try await store.memberships(appId: appId, uid: user.uid) : nil
        let page = try await store.exportMessages(
            appId: appId, uid: user.uid, after: after, limit: limit, scan: UserExport.scanPerPage
        )
        return .ok(
            .init(
                body: .json(
                    UserExportPage(
                        user: user, memberships: memberships, messages: page.messages, nextCursor: page.next?.cursor
                    )
                )
            )
        )
    }

    /// `POST /v1/users/{uid}/reactivate`.
    func reactivateUser(_ input: Operations.ReactivateUser.Input) async throws -> Operations.ReactivateUser.Output {
        let appId = try await authenticator.server(apiKey: credentials.apiKey)
        try InputRules.uid(input.path.uid)
        guard
            let user = try await store.setUserDeactivated(
                appId: appId, uid: input.path.uid, deactivated: false, now: time.epochMilliseconds())
        else { throw DomainError.uidNotFound(input.path.uid) }
        webhooksQueued()
        logger.notice("User reactivated", metadata: ["app": "\(appId)", "uid": "\(user.uid)"])
        return .ok(.init(body: .json(user)))
    }

    /// Refuses a deactivated user a login or a token: 403 `ERR_USER_DEACTIVATED`.
    static func requireActive(_ user: User) throws {
        guard user.deactivatedAt == nil else {
            throw DomainError(
                .userDeactivated, "User \(user.uid) is deactivated; the app's operator can reactivate them.")
        }
    }

    // MARK: Helpers

    /// `profile.update` to the user's own connections and to everyone who shares a conversation with them.
    func announceProfile(_ user: User, appId: String) async throws {
        let contacts = try await store.contacts(appId: appId, uid: user.uid)
        relay.deliver(
            appId: appId, actor: user.uid, timestamp: user.updatedAt, payload: .profileUpdated(user),
            to: contacts + [user.uid]
        )
    }

    func issueToken(appId: String, uid: String, ttlSeconds: Int64?) async throws -> IssuedAuthToken {
        let secret = Secrets.newAuthToken()
        let now = time.epochMilliseconds()
        let record = TokenRecord(
            id: Secrets.randomID(prefix: "tok_", length: 16), hash: Secrets.hash(secret), appId: appId, uid: uid,
            createdAt: now, expiresAt: ttlSeconds.map { now + $0 * 1000 }
        )
        try await store.insertToken(record)
        // A deactivation between the caller's check and this insert revokes every token after setting its flag; one
        // that read the tokens before this one was stored missed it: revoked here.
        if let user = try await store.user(appId: appId, uid: uid), user.deactivatedAt != nil {
            _ = try await store.revokeToken(appId: appId, uid: uid, tokenId: record.id, now: now)
            try Self.requireActive(user)
        }
        return IssuedAuthToken(authToken: secret, token: record.info)
    }

    func existingUser(appId: String, uid: String) async throws -> User {
        guard let user = try await store.user(appId: appId, uid: uid) else { throw DomainError.uidNotFound(uid) }
        return user
    }

    /// A profile's name, avatar and metadata (``InputRules``).
    static func validateProfile(name: String?, avatarURL: String?, metadata: JSONValue?) throws {
        try InputRules.name(name, "name")
        try InputRules.avatarURL(avatarURL)
        try InputRules.metadata(metadata)
    }

    /// Closes the sockets opened with revoked tokens: 4001 `ERR_AUTH_TOKEN_INVALID`.
    func closeSockets(appId: String, uid: String, tokenIds: Set<String>) {
        relay.close(
            appId: appId, uid: uid, tokenIds: tokenIds, code: WebSocketCloseCode.authenticationFailed,
            reason: .authTokenInvalid
        )
    }
}
