import Foundation
import ParleyProtocol
import ParleyServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// An HTTP answer: the status and the raw body.
public struct RESTAnswer: Sendable {
    public var status: Int
    public var body: [UInt8]
    /// The response's header fields, by lowercased name.
    public var headers: [String: String] = [:]

    public func header(_ name: String) -> String? { headers[name.lowercased()] }

    /// The body decoded as `T`.
    public func decode<T: Decodable>(_ type: T.Type = T.self) throws -> T {
        try WireCoding.decode(type, from: body)
    }

    /// The error code of an error body, if it is one.
    public var errorCode: ErrorCode? { try? decode(ErrorResponse.self).error.code }
}

/// A running Parley server a test talks to: in this process (``TestServer``) or another (``ServerProcess``).
public protocol ParleyEndpoint: Sendable {
    var baseURL: URL { get }
    var app: ProvisionedApp { get }
}

extension TestServer: ParleyEndpoint {}

extension ParleyEndpoint {
    public var webSocketURL: String {
        baseURL.absoluteString.replacingOccurrences(of: "http://", with: "ws://") + "/v1/ws"
    }

    /// Sends a request to the server's REST API.
    public func request(
        _ method: String, _ path: String, token: String? = nil, apiKey: String? = nil,
        headers: [String: String] = [:], body: (some Encodable)? = nil as String?
    ) async throws -> RESTAnswer {
        var request = URLRequest(url: URL(string: baseURL.absoluteString + path)!)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let apiKey { request.setValue(apiKey, forHTTPHeaderField: "X-Parley-Api-Key") }
        if let body {
            request.httpBody = Data(try WireCoding.encode(body))
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as? HTTPURLResponse
        var fields: [String: String] = [:]
        for (name, value) in http?.allHeaderFields ?? [:] {
            if let name = name as? String, let value = value as? String { fields[name.lowercased()] = value }
        }
        return RESTAnswer(status: http?.statusCode ?? 0, body: Array(data), headers: fields)
    }

    /// `GET path?parameters` (sorted by name, each value percent-encoded, `+` too).
    public func get(_ path: String, _ parameters: [String: String], token: String? = nil, apiKey: String? = nil)
        async throws -> RESTAnswer
    {
        var components = URLComponents()
        components.queryItems = parameters.sorted { $0.key < $1.key }.map {
            URLQueryItem(name: $0.key, value: $0.value)
        }
        let query = components.percentEncodedQuery.map { "?" + $0.replacingOccurrences(of: "+", with: "%2B") } ?? ""
        return try await request("GET", path + query, token: token, apiKey: apiKey)
    }

    /// Logs `uid` in with the app's Auth Key (creating the user) and returns an auth token.
    public func login(_ uid: String) async throws -> String {
        let answer = try await request(
            "POST", "/v1/login", body: LoginRequest(appId: app.appId, uid: uid, authKey: app.authKey)
        )
        return try answer.decode(LoginResponse.self).authToken
    }

    /// Creates a conversation as the owner of `token` and returns it.
    public func createConversation(
        token: String, type: ConversationType = .group, with participants: [String], isPublic: Bool = false
    ) async throws -> Conversation {
        try await request(
            "POST", "/v1/conversations", token: token,
            body: CreateConversationRequest(type: type, participants: participants, name: "test", isPublic: isPublic)
        ).decode()
    }
}
