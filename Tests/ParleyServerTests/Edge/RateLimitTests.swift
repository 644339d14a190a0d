import Foundation
import ParleyProtocol
import ParleyServer
import ParleyTesting
import Testing

/// docs/PROTOCOL.md, "Rate limits": new connections and logins per client address, messages per user; past a limit
/// the answer is `ERR_RATE_LIMITED` (429 over HTTP, with `Retry-After`) with `retryAfterMs`, and the budget comes back
/// with time. The server's clock is virtual here: time moves only when the test says so.
@Suite(.timeLimit(.minutes(2))) struct RateLimitTests {
    @Test func connectionsPastTheBurstOfAnAddressAreAnswered429UntilTheBucketRefills() async throws {
        let clock = ManualClock()
        let server = try await TestServer.startForEdgeTests(clock: clock) {
            TestServer.patientDeadlines(&$0)
            $0.edge.connectionAttemptsPerAddress = RateLimit(perSecond: 2, burst: 3)
        }
        for _ in 0..<3 {
            let socket = try await RawSocket.connected(port: server.port)
            try await socket.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try await socket.readResponse().status == 200)
            socket.close()
        }
        let refused = try await RawSocket.connected(port: server.port)
        let answer = try await refused.readResponse()
        #expect(answer.status == 429 && answer.errorCode == ErrorCode.rateLimited.rawValue)
        #expect(answer.header("retry-after") == "1")
        #expect(try await refused.readToEnd().ending == .closed)
        // Half a second later (one token at 2 per second), one more is accepted.
        clock.advance(by: .milliseconds(500))
        let accepted = try await RawSocket.connected(port: server.port)
        try await accepted.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try await accepted.readResponse().status == 200)
        accepted.close()
        try await server.stop()
    }

    @Test func loginsPastTheLimitOfAnAddressAreRefusedWithWhenToRetry() async throws {
        let clock = ManualClock()
        let server = try await TestServer.startForEdgeTests(clock: clock) {
            TestServer.patientDeadlines(&$0)
            $0.edge.loginsPerAddress = RateLimit(perSecond: 1, burst: 2)
        }
        _ = try await server.login("a")
        _ = try await server.login("b")
        let answer = try await server.request(
            "POST", "/v1/login", body: LoginRequest(appId: server.app.appId, uid: "c", authKey: server.app.authKey)
        )
        #expect(answer.status == 429 && answer.errorCode == .rateLimited)
        let error = try answer.decode(ErrorResponse.self).error
        #expect(error.retryAfterMs == 1000)
        // A wrong key is limited too (the limit protects the Auth Key from guessing).
        let guess = try await server.request(
            "POST", "/v1/login", body: LoginRequest(appId: server.app.appId, uid: "c", authKey: "ak_guess")
        )
        #expect(guess.status == 429)
        clock.advance(by: .seconds(1))
        _ = try await server.login("c")
        try await server.stop()
    }

    /// Behind a trusted proxy the login limit applies to the client `X-Forwarded-For` names; from anywhere else the
    /// header is ignored (a client cannot pick its own address).
    @Test func behindATrustedProxyTheForwardedClientIsLimited() async throws {
        let clock = ManualClock()
        let trusting = try await TestServer.startForEdgeTests(clock: clock) {
            TestServer.patientDeadlines(&$0)
            $0.edge.loginsPerAddress = RateLimit(perSecond: 1, burst: 2)
            $0.edge.trustedProxies = ["127.0.0.1"]
        }
        func login(_ server: TestServer, _ uid: String, from client: String) async throws -> Int {
            try await server.request(
                "POST", "/v1/login", headers: ["X-Forwarded-For": client],
                body: LoginRequest(appId: server.app.appId, uid: uid, authKey: server.app.authKey)
            ).status
        }
        // A client's forged first hop comes before what the proxy appends: the last untrusted address counts.
        #expect(try await login(trusting, "a", from: "198.51.100.1, 203.0.113.7") == 200)
        #expect(try await login(trusting, "b", from: "203.0.113.7") == 200)
        #expect(try await login(trusting, "c", from: "192.0.2.99, 203.0.113.7") == 429)
        #expect(try await login(trusting, "d", from: "203.0.113.8") == 200)
        try await trusting.stop()

        let direct = try await TestServer.startForEdgeTests(clock: clock) {
            TestServer.patientDeadlines(&$0)
            $0.edge.loginsPerAddress = RateLimit(perSecond: 1, burst: 2)
        }
        #expect(try await login(direct, "a", from: "203.0.113.1") == 200)
        #expect(try await login(direct, "b", from: "203.0.113.2") == 200)
        #expect(try await login(direct, "c", from: "203.0.113.3") == 429)
        try await direct.stop()
    }

    @Test func messagesPastAUsersLimitAreRefusedOverTheSocketAndREST() async throws {
        let clock = ManualClock()
        let server = try await TestServer.startForEdgeTests(clock: clock) {
            TestServer.patientDeadlines(&$0)
            $0.edge.messagesPerUser = RateLimit(perSecond: 10, burst: 3)
        }
        let alice = try await server.login("alice")
        let bob = try await server.login("bob")
        let conversation = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        let socket = WebSocketProbe(url: server.webSocketURL, token: alice)
        _ = try await socket.nextFrame()
        for number in 0..<4 {
            try await socket.send(
                .send(SendFrame(ref: "r\(number)", conversationId: conversation.id, parts: [.text("\(number)")])))
        }
        var acks = 0
        var refusal: ErrorFrame?
        while acks + (refusal == nil ? 0 : 1) < 4 {
            switch try await socket.nextFrame() {
            case .ack: acks += 1
            case .error(let error): refusal = error
            default: break
            }
        }
        #expect(acks == 3)
        #expect(refusal?.code == .rateLimited && refusal?.ref == "r3" && refusal?.retryAfterMs == 100)
        // The same budget over REST.
        let rest = try await server.request(
            "POST", "/v1/conversations/\(conversation.id)/messages", token: alice,
            body: SendMessageRequest(parts: [.text("x")])
        )
        #expect(rest.status == 429 && rest.errorCode == .rateLimited)
        clock.advance(by: .milliseconds(100))
        let later = try await server.request(
            "POST", "/v1/conversations/\(conversation.id)/messages", token: alice,
            body: SendMessageRequest(parts: [.text("x")])
        )
        #expect(later.status == 201)
        // Another user has a budget of their own.
        let other = try await server.request(
            "POST", "/v1/conversations/\(conversation.id)/messages", token: bob,
            body: SendMessageRequest(parts: [.text("y")])
        )
        #expect(other.status == 201)
        await socket.close()
        try await server.stop()
    }
}
