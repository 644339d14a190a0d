import NIOConcurrencyHelpers
import NIOCore
import ParleyProtocol

/// Users, tokens and groups for a run, through the REST admin API (the app's REST API key), many requests side by
/// side on keep-alive connections so that creating 19,000 users does not dominate the run.
struct Provisioner: Sendable {
    let server: ServerUnderTest
    let group: any EventLoopGroup
    /// HTTP connections used side by side.
    var parallelism = 32

    var target: SocketAddress { get throws { try SocketAddress(ipAddress: server.host, port: server.port) } }
    var hostHeader: String { "\(server.host):\(server.port)" }

    /// Creates `count` users `<prefix><i>` and one auth token each; returns the tokens in order.
    func users(prefix: String, count: Int) async throws -> [String] {
        let apiKey = server.restAPIKey
        return try await parallel(count: count) { connection, index in
            let uid = "\(prefix)\(index)"
            let created = try await connection.json(
                .POST, "/v1/users", headers: [("X-Parley-Api-Key", apiKey)], body: CreateUserRequest(uid: uid)
            )
            guard created.status == 201 || created.status == 409 else {
                throw HTTPError(description: "POST /v1/users \(uid): \(created.status) \(created.text)")
            }
            let issued = try await connection.json(
                .POST, "/v1/users/\(uid)/auth-tokens", headers: [("X-Parley-Api-Key", apiKey)],
                body: IssueAuthTokenRequest()
            )
            guard issued.status == 201 else {
                throw HTTPError(description: "POST /v1/users/\(uid)/auth-tokens: \(issued.status) \(issued.text)")
            }
            return try issued.decode(IssuedAuthToken.self).authToken
        }
    }

    /// Creates one group per entry, owned by `owner` token with the other `members`; returns their ids.
    func groups(_ specs: [(ownerToken: String, members: [String])]) async throws -> [String] {
        try await parallel(count: specs.count) { connection, index in
            let spec = specs[index]
            let answer = try await connection.json(
                .POST, "/v1/conversations", headers: [("Authorization", "Bearer \(spec.ownerToken)")],
                body: CreateConversationRequest(type: .group, participants: spec.members, name: "bench \(index)")
            )
            guard answer.status == 201 || answer.status == 200 else {
                throw HTTPError(description: "POST /v1/conversations: \(answer.status) \(answer.text)")
            }
            return try answer.decode(Conversation.self).id
        }
    }

    /// Every message of a conversation, through the paged history (newest page first).
    func messages(conversationId: String, token: String) async throws -> [Message] {
        let connection = try await HTTPConnection.connect(to: target, host: hostHeader, group: group)
        defer { Task { await connection.close() } }
        var all: [Message] = []
        var cursor: String?
        repeat {
            let query = "limit=200" + (cursor.map { "&cursor=\($0)" } ?? "")
            let answer = try await connection.request(
                .GET, "/v1/conversations/\(conversationId)/messages?\(query)",
                headers: [("Authorization", "Bearer \(token)")]
            )
            guard answer.status == 200 else {
                throw HTTPError(description: "GET messages: \(answer.status) \(answer.text)")
            }
            let page = try answer.decode(MessagePage.self)
            all += page.messages
            cursor = page.nextCursor
        } while cursor != nil
        return all
    }

    /// Runs `work` for indices 0..<count on `parallelism` connections; results in index order.
    func parallel<T: Sendable>(
        count: Int, _ work: @escaping @Sendable (HTTPConnection, Int) async throws -> T
    ) async throws -> [T] {
        guard count > 0 else { return [] }
        let next = NIOLockedValueBox(0)
        let target = try self.target
        let results = try await withThrowingTaskGroup(of: [(Int, T)].self) { tasks in
            for _ in 0..<min(parallelism, count) {
                tasks.addTask {
                    let connection = try await HTTPConnection.connect(to: target, host: hostHeader, group: group)
                    var done: [(Int, T)] = []
                    while true {
                        let index = next.withLockedValue { value -> Int in
                            defer { value += 1 }
                            return value
                        }
                        guard index < count else { break }
                        done.append((index, try await work(connection, index)))
                    }
                    await connection.close()
                    return done
                }
            }
            var all: [(Int, T)] = []
            for try await part in tasks { all += part }
            return all
        }
        return results.sorted { $0.0 < $1.0 }.map(\.1)
    }
}
