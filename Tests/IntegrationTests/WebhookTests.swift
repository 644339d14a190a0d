import Crypto
import Foundation
import ParleyProtocol
import ParleyServer
import ParleyTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Webhooks end to end: the real server (SQLite, and PostgreSQL with two nodes) delivers to a real HTTP receiver;
/// docs/PROTOCOL.md, "Webhooks".
@Suite(.timeLimit(.minutes(3))) struct WebhookTests {
    enum Backend: String, CaseIterable, Sendable {
        case sqlite, postgres
    }

    static var backends: [Backend] { PostgresTestDatabase.isConfigured ? [.sqlite, .postgres] : [.sqlite] }

    /// Retries after 10 to 100 ms: failures and recoveries take a moment, not minutes. Requests keep the default
    /// timeout (10 s), so that an answered request is not taken for a lost one on a busy machine.
    static func fast(_ configuration: inout ServerConfiguration) {
        configuration.webhooks.retry.initialDelay = .milliseconds(20)
        configuration.webhooks.retry.maximumDelay = .milliseconds(100)
        configuration.webhooks.retry.maximumAttempts = 1000
        configuration.webhooks.pollInterval = .milliseconds(200)
    }

    /// A server on `backend`; a PostgreSQL one gets a fresh database (returned, to drop).
    static func server(
        _ backend: Backend, database: PostgresTestDatabase? = nil, dataDirectory: String? = nil, port: Int = 0,
        configure: (inout ServerConfiguration) -> Void = fast
    ) async throws -> (TestServer, PostgresTestDatabase?) {
        switch backend {
        case .sqlite:
            return (try await TestServer.start(dataDirectory: dataDirectory, port: port, configure: configure), nil)
        case .postgres:
            var created = database
            if created == nil { created = try await PostgresTestDatabase.create(prefix: "parley_webhooks") }
            let database = try #require(created)
            let server = try await TestServer.start(
                dataDirectory: dataDirectory, databaseURL: database.url, port: port, configure: configure
            )
            return (server, database)
        }
    }

    static func register(
        _ server: TestServer, _ receiver: WebhookReceiver, events: [String] = WebhookTopic.allCases.map(\.rawValue)
    ) async throws -> WebhookEndpointWithSecret {
        let answer = try await server.request(
            "POST", "/v1/webhooks", apiKey: server.app.restAPIKey,
            body: CreateWebhookRequest(url: receiver.url(), events: events, description: "test backend")
        )
        #expect(answer.status == 201)
        return try answer.decode()
    }

    @discardableResult
    static func send(_ text: String, to conversationId: String, as token: String, on server: TestServer) async throws
        -> Message
    {
        let answer = try await server.request(
            "POST", "/v1/conversations/\(conversationId)/messages", token: token,
            body: SendMessageRequest(parts: [.text(text)])
        )
        #expect(answer.status == 201)
        return try answer.decode()
    }

    /// What the receiver got, decoded: the envelope's fields and the event.
    struct Delivered {
        var id: String
        var event: EventName
        var data: Event
        var request: WebhookReceiver.Request
    }

    struct Envelope: Decodable {
        var id: String
        var event: String
        var createdAt: Int64
        var data: Event
    }

    /// Checks one request the way a receiver must (docs/PROTOCOL.md): the HMAC-SHA256 of `t.body` with the secret,
    /// computed here with swift-crypto, and a fresh timestamp.
    static func verified(_ request: WebhookReceiver.Request, secret: String) throws -> Delivered {
        let header = try #require(request.header("X-Parley-Signature"))
        let parts = Dictionary(
            header.split(separator: ",").map { $0.split(separator: "=", maxSplits: 1).map(String.init) }
                .map { ($0[0], $0[1]) },
            uniquingKeysWith: { first, _ in first }
        )
        let timestamp = try #require(parts["t"].flatMap { Int64($0) })
        #expect(abs(Int64(Date().timeIntervalSince1970) - timestamp) <= 300)
        let mac = HMAC<SHA256>.authenticationCode(
            for: Array("\(timestamp).".utf8) + request.body, using: SymmetricKey(data: Array(secret.utf8))
        )
        #expect(parts["v1"] == mac.map { String(format: "%02x", $0) }.joined(), "bad signature")
        #expect(WebhookSignature.verify(header: header, body: request.body, secret: secret, now: timestamp))
        #expect(!WebhookSignature.verify(header: header, body: request.body + [0x20], secret: secret, now: timestamp))
        #expect(!WebhookSignature.verify(header: header, body: request.body, secret: secret, now: timestamp + 301))
        #expect(request.method == "POST" && request.path == "/hooks")
        #expect(request.header("Content-Type") == "application/json")
        let envelope = try JSONDecoder().decode(Envelope.self, from: Data(request.body))
        #expect(request.header("X-Parley-Delivery") == envelope.id)
        #expect(request.header("X-Parley-Event") == envelope.event)
        #expect(envelope.data.name.rawValue == envelope.event)
        return Delivered(
            id: envelope.id, event: EventName(rawValue: envelope.event), data: envelope.data, request: request)
    }

    /// Every durable event of a conversation, as the events API lists them.
    static func events(of conversationId: String, token: String, on server: TestServer) async throws -> [Event] {
        try await server.request("GET", "/v1/conversations/\(conversationId)/events?after=0&limit=200", token: token)
            .decode(EventPage.self).events
    }

    /// Accepted requests, once per delivery id, in arrival order; fails on a delivery accepted twice.
    static func acceptedOnce(_ requests: [WebhookReceiver.Request], secret: String) throws -> [Delivered] {
        let delivered = try requests.filter(\.accepted).map { try verified($0, secret: secret) }
        #expect(Set(delivered.map(\.id)).count == delivered.count, "a delivery was accepted twice")
        return delivered
    }

    @Test(arguments: backends)
    func everyEventReachesTheEndpointSignedOnceAndInOrderPerConversation(_ backend: Backend) async throws {
        let receiver = try await WebhookReceiver.start()
        let (server, database) = try await Self.server(backend)
        let endpoint = try await Self.register(server, receiver)
        #expect(endpoint.secret.hasPrefix("whsec_") && endpoint.secret.count == 70)
        #expect(endpoint.endpoint.enabled && endpoint.endpoint.events.count == 5)

        let alice = try await server.login("alice")
        let bob = try await server.login("bob")
        let carol = try await server.login("carol")
        let first = try await server.createConversation(token: alice, with: ["bob"])
        let second = try await server.createConversation(token: bob, with: ["carol"])
        var messages: [Message] = []
        for index in 0..<8 {
            messages.append(try await Self.send("a\(index)", to: first.id, as: alice, on: server))
            try await Self.send("c\(index)", to: second.id, as: carol, on: server)
        }
        let edited = try await server.request(
            "PATCH", "/v1/conversations/\(first.id)/messages/\(messages[1].id)", token: alice,
            body: EditMessageRequest(parts: [.text("a1, edited")])
        )
        #expect(edited.status == 200)
        let reacted = try await server.request(
            "PUT", "/v1/conversations/\(first.id)/messages/\(messages[2].id)/reactions/ok", token: bob
        )
        #expect(reacted.status == 200 || reacted.status == 201)
        let deleted = try await server.request(
            "DELETE", "/v1/conversations/\(first.id)/messages/\(messages[3].id)", token: alice
        )
        #expect(deleted.status == 200)
        let added = try await server.request(
            "POST", "/v1/conversations/\(first.id)/participants", token: alice,
            body: AddParticipantsRequest(participants: [.init(uid: "carol")])
        )
        #expect(added.status == 200)
        let report = try await server.request(
            "POST", "/v1/reports", token: bob,
            body: CreateReportRequest(conversationId: first.id, messageId: messages[0].id, reason: .spam)
        ).decode(Report.self)
        let resolved = try await server.request(
            "PATCH", "/v1/reports/\(report.id)", apiKey: server.app.restAPIKey,
            body: UpdateReportRequest(state: .resolved, resolution: "warned")
        )
        #expect(resolved.status == 200)
        let renamed = try await server.request(
            "PATCH", "/v1/users/bob", apiKey: server.app.restAPIKey, body: UpdateUserRequest(name: "Robert")
        )
        #expect(renamed.status == 200)
        for change in ["deactivate", "deactivate", "reactivate"] {
            let answer = try await server.request("POST", "/v1/users/carol/\(change)", apiKey: server.app.restAPIKey)
            #expect(answer.status == 200)
        }

        // What must arrive: every durable event of both conversations, the report's two, three users created, one
        // profile change, carol's deactivation (once: the second changed nothing) and reactivation.
        let firstEvents = try await Self.events(of: first.id, token: alice, on: server)
        let secondEvents = try await Self.events(of: second.id, token: bob, on: server)
        let expected = firstEvents.count + secondEvents.count + 2 + 3 + 1 + 2
        let requests = await receiver.waitForAccepted(deliveries: expected)
        let delivered = try Self.acceptedOnce(requests, secret: endpoint.secret)
        #expect(delivered.count == expected)

        for (conversation, events) in [(first, firstEvents), (second, secondEvents)] {
            let arrived = delivered.filter { $0.data.conversationId == conversation.id }
            // In the conversation's order, each once, nothing missing.
            #expect(arrived.map(\.data.seq) == events.map(\.seq))
            #expect(arrived.map(\.event) == events.map(\.name))
        }
        let names = Set(delivered.map(\.event))
        #expect(
            names.isSuperset(of: [
                .conversationCreate, .participantAdded, .messageSent, .messageUpdate, .messageDelete, .reactionAdded,
                .reportCreate, .reportUpdate, .userCreate, .profileUpdate,
            ])
        )
        let reports = delivered.filter { $0.event == .reportCreate || $0.event == .reportUpdate }
        #expect(reports.map(\.event) == [.reportCreate, .reportUpdate])
        if case .unknown(.object(let fields)) = reports.last?.data.payload {
            #expect(fields["state"] == .string("resolved") && fields["id"] == .string(report.id))
        } else {
            Issue.record("report.update carries the report")
        }
        let users = delivered.filter { $0.event == .userCreate }.compactMap {
            $0.data.id.split(separator: ":").dropFirst().first
        }
        #expect(Set(users) == ["alice", "bob", "carol"])
        let accounts = delivered.filter { $0.event == .userDeactivate || $0.event == .userReactivate }
        #expect(accounts.map(\.event) == [.userDeactivate, .userReactivate], "in order, once each")
        if case .unknown(.object(let fields)) = accounts.first?.data.payload {
            #expect(fields["uid"] == .string("carol") && fields["deactivatedAt"] != nil)
        } else {
            Issue.record("user.deactivate carries the user")
        }

        // Once the server has recorded every answer, nothing is left waiting.
        _ = await server.application.webhookAttempts { $0.filter(\.delivered).count >= expected }
        let listed = try await server.request(
            "GET", "/v1/webhooks/\(endpoint.endpoint.id)/deliveries", apiKey: server.app.restAPIKey
        ).decode(WebhookDeliveryList.self)
        #expect(listed.deliveries.isEmpty)
        try await server.stop()
        try await receiver.stop()
        try await database?.drop()
    }

    /// Without an endpoint, the messages' commits stop waking the webhook service once it has looked; an endpoint
    /// registered later gets what follows at once.
    @Test(arguments: backends)
    func anEndpointRegisteredOnAnIdleServerGetsTheNextMessages(_ backend: Backend) async throws {
        let receiver = try await WebhookReceiver.start()
        let (server, database) = try await Self.server(backend)
        let alice = try await server.login("alice")
        _ = try await server.login("bob")
        let group = try await server.createConversation(token: alice, with: ["bob"])
        try await Self.send("before", to: group.id, as: alice, on: server)
        #expect(await eventually { server.application.webhooksIdle })

        let endpoint = try await Self.register(server, receiver, events: ["conversationMessage.sent"])
        #expect(!server.application.webhooksIdle)
        try await Self.send("after", to: group.id, as: alice, on: server)
        let accepted = try Self.acceptedOnce(await receiver.waitForAccepted(deliveries: 1), secret: endpoint.secret)
        let texts = accepted.compactMap { delivery -> String? in
            guard case .messageSent(let message) = delivery.data.payload else { return nil }
            return message.text
        }
        #expect(texts == ["after"])
        #expect(!server.application.webhooksIdle)

        // Deleted again: idle once more, and sending goes on.
        let removed = try await server.request(
            "DELETE", "/v1/webhooks/\(endpoint.endpoint.id)", apiKey: server.app.restAPIKey)
        #expect(removed.status == 204)
        try await Self.send("after the endpoint", to: group.id, as: alice, on: server)
        #expect(await eventually { server.application.webhooksIdle })
        try await server.stop()
        try await receiver.stop()
        try await database?.drop()
    }

    @Test(arguments: backends)
    func anEndpointThatFailsThenRecoversGetsEverythingWithRetries(_ backend: Backend) async throws {
        let receiver = try await WebhookReceiver.start(port: RestartablePort.take())
        // A request not answered within two seconds fails (the receiver's `hang`).
        let (server, database) = try await Self.server(backend) { configuration in
            Self.fast(&configuration)
            configuration.webhooks.requestTimeout = .seconds(2)
        }
        let endpoint = try await Self.register(server, receiver, events: ["messages"])
        let alice = try await server.login("alice")
        _ = try await server.login("bob")
        let group = try await server.createConversation(token: alice, with: ["bob"])

        // 500, 503, no answer within the timeout, a connection closed without an answer, a redirect (not followed).
        receiver.script([.status(500), .status(503), .hang, .close, .status(302)])
        // And 500 to any retry that comes before the receiver stops below (20-100 ms after the fifth failure; a busy
        // machine can be that late between the two lines): no attempt may succeed before the endpoint comes back.
        receiver.answerEveryRequest(with: .status(500))
        // A slow or failing endpoint never holds a message back: every send is answered meanwhile.
        var sent: [Message] = []
        for index in 0..<6 { sent.append(try await Self.send("m\(index)", to: group.id, as: alice, on: server)) }
        _ = await server.application.webhookAttempts { $0.filter { !$0.delivered }.count >= 5 }
        // Then nobody listens: connections are refused.
        try await receiver.stop()
        for index in 6..<10 { sent.append(try await Self.send("m\(index)", to: group.id, as: alice, on: server)) }
        // Two more attempts: the second began after the sends were stored (and put in the queue).
        let made = await server.application.webhookAttempts().count
        let refused = await server.application.webhookAttempts { $0.count >= made + 2 }
        #expect(refused.allSatisfy { !$0.delivered })
        let reasons = refused.compactMap(\.error)
        // Each answer the receiver gave failed the attempt that got it. A slow machine may time out one more, the
        // first one too (with the cores held busy besides, the 500 once came after the 2 s timeout).
        #expect(reasons.first == "HTTP 500" || reasons.first?.hasPrefix("No answer") == true, "\(reasons)")
        #expect(reasons.contains { $0.hasPrefix("No answer") }, "\(reasons)")
        #expect(
            Set(receiver.requests.map(\.answer)).isSuperset(of: [
                .status(500), .status(503), .hang, .close, .status(302),
            ]))
        #expect(receiver.requests.filter(\.accepted).isEmpty)
        let pending = try await server.request(
            "GET", "/v1/webhooks/\(endpoint.endpoint.id)/deliveries?state=pending", apiKey: server.app.restAPIKey
        ).decode(WebhookDeliveryList.self)
        #expect(pending.deliveries.count == 10)
        #expect(pending.deliveries.first?.attempts ?? 0 >= 6 && pending.deliveries.first?.lastError != nil)
        // The first message's delivery fails; the rest of the conversation waits behind it, untried.
        #expect(pending.deliveries.dropFirst().allSatisfy { $0.attempts == 0 })

        // Back on the same port: everything arrives, in order, each delivery accepted once.
        let back = try await WebhookReceiver.start(port: receiver.port)
        let requests = await back.waitForAccepted(deliveries: 10)
        // At least once: on a busy machine an answer can come after the timeout, and the delivery goes again with its
        // id; a receiver keeps the first.
        var seen = Set<String>()
        let delivered = try requests.filter(\.accepted).map { try Self.verified($0, secret: endpoint.secret) }
            .filter { seen.insert($0.id).inserted }
        let ids = delivered.compactMap { delivery -> String? in
            guard case .messageSent(let message) = delivery.data.payload else { return nil }
            return message.id
        }
        #expect(ids == sent.map(\.id))
        // The first delivery came back under the id it had on every attempt.
        let firstId = try #require(delivered.first?.id)
        #expect(receiver.requests.allSatisfy { $0.header("X-Parley-Delivery") == firstId })
        let state = try await server.request(
            "GET", "/v1/webhooks/\(endpoint.endpoint.id)", apiKey: server.app.restAPIKey
        )
        .decode(WebhookEndpoint.self)
        #expect(state.enabled && state.consecutiveFailures == 0 && state.lastSuccessAt != nil)
        try await server.stop()
        try await back.stop()
        try await database?.drop()
    }

    @Test(arguments: backends)
    func deliveriesQueuedAtARestartGoOutOnceAfterIt(_ backend: Backend) async throws {
        let receiver = try await WebhookReceiver.start(port: RestartablePort.take())
        let port = receiver.port
        try await receiver.stop()
        let (server, database) = try await Self.server(backend)
        let endpoint = try await Self.register(server, receiver, events: ["messages"])
        let alice = try await server.login("alice")
        _ = try await server.login("bob")
        let group = try await server.createConversation(token: alice, with: ["bob"])
        var sent: [Message] = []
        for index in 0..<5 { sent.append(try await Self.send("m\(index)", to: group.id, as: alice, on: server)) }
        _ = await server.application.webhookAttempts { !$0.isEmpty }
        try await server.stop()

        let back = try await WebhookReceiver.start(port: port)
        let (restarted, _) = try await Self.server(backend, database: database, dataDirectory: server.dataDirectory)
        let requests = await back.waitForAccepted(deliveries: 5)
        let delivered = try Self.acceptedOnce(requests, secret: endpoint.secret)
        #expect(delivered.count == 5)
        #expect(
            delivered.compactMap { delivery -> String? in
                guard case .messageSent(let message) = delivery.data.payload else { return nil }
                return message.id
            } == sent.map(\.id)
        )
        // One more event after the restart: it is the next request, and nothing before it came twice.
        try await Self.send("after", to: group.id, as: alice, on: restarted)
        let all = await back.waitForAccepted(deliveries: 6)
        #expect(try Self.acceptedOnce(all, secret: endpoint.secret).count == 6)
        try await restarted.stop()
        try await back.stop()
        try await database?.drop()
    }

    @Test func anEndpointIsDisabledAfterARunOfFailuresAndAFailedDeliveryStaysVisible() async throws {
        let receiver = try await WebhookReceiver.start()
        let (server, _) = try await Self.server(.sqlite) { configuration in
            Self.fast(&configuration)
            configuration.webhooks.retry.maximumAttempts = 2
            configuration.webhooks.disableAfterFailures = 5
            configuration.metrics.token = "metrics-token-of-the-webhook-tests"
        }
        let key = server.app.restAPIKey
        let endpoint = try await Self.register(server, receiver, events: ["conversationMessage.sent"])
        let path = "/v1/webhooks/\(endpoint.endpoint.id)"
        let alice = try await server.login("alice")
        _ = try await server.login("bob")
        let group = try await server.createConversation(token: alice, with: ["bob"])

        // Two attempts, then the delivery is given up: failed, listed, and the conversation goes on behind it.
        receiver.answerEveryRequest(with: .status(500))
        let lost = try await Self.send("lost", to: group.id, as: alice, on: server)
        _ = await server.application.webhookAttempts { $0.filter { !$0.delivered }.count >= 2 }
        let failed = try await server.request("GET", "\(path)/deliveries?state=failed", apiKey: key)
            .decode(WebhookDeliveryList.self).deliveries
        #expect(failed.count == 1)
        #expect(failed.first?.state == .failed && failed.first?.attempts == 2 && failed.first?.lastStatus == 500)
        #expect(failed.first?.lastError == "HTTP 500" && failed.first?.nextAttemptAt == nil)
        #expect(failed.first?.event == .messageSent && failed.first?.conversationId == group.id)

        // Three more failures in a row (five with those two): the endpoint is disabled.
        try await Self.send("also lost", to: group.id, as: alice, on: server)
        _ = await server.application.webhookAttempts { $0.filter { !$0.delivered }.count >= 4 }
        try await Self.send("the fifth failure", to: group.id, as: alice, on: server)
        _ = await server.application.webhookAttempts { $0.filter { !$0.delivered }.count >= 5 }
        let disabled = try await server.request("GET", path, apiKey: key).decode(WebhookEndpoint.self)
        #expect(!disabled.enabled && disabled.consecutiveFailures == 5 && disabled.disabledAt != nil)
        #expect(disabled.disabledReason == "Disabled after 5 failed attempts in a row.")
        // Counted for alerting (deploy/prometheus/parley-alerts.yml, ParleyWebhookEndpointDisabled).
        let scrape = try await server.request(
            "GET", "/metrics", headers: ["Authorization": "Bearer metrics-token-of-the-webhook-tests"])
        #expect(String(decoding: scrape.body, as: UTF8.self).contains("\nparley_webhook_endpoints_disabled_total 1\n"))
        // While disabled, new events are not queued for it.
        try await Self.send("while disabled", to: group.id, as: alice, on: server)

        // The fifth failure's delivery waits (only it: nothing was queued for the message sent while disabled).
        let waiting = try await server.request("GET", "\(path)/deliveries?state=pending", apiKey: key)
            .decode(WebhookDeliveryList.self).deliveries
        #expect(waiting.count == 1 && waiting.first?.attempts == 1)

        // Enabled again, and answering: what waited goes out; a failed one goes out when asked.
        receiver.answerEveryRequest(with: nil)
        let enabled = try await server.request("PATCH", path, apiKey: key, body: UpdateWebhookRequest(enabled: true))
            .decode(WebhookEndpoint.self)
        #expect(enabled.enabled && enabled.consecutiveFailures == 0 && enabled.disabledReason == nil)
        _ = await receiver.waitForAccepted(deliveries: 1)
        let stillFailed = try await server.request("GET", "\(path)/deliveries?state=failed", apiKey: key)
            .decode(WebhookDeliveryList.self).deliveries
        #expect(stillFailed.count == 2)
        // The first failed delivery ("lost"), sent again on request, with its id.
        let lostDelivery = try #require(failed.first)
        #expect(stillFailed.map(\.id).contains(lostDelivery.id))
        let again = try await server.request("POST", "\(path)/deliveries/\(lostDelivery.id)/redeliver", apiKey: key)
        #expect(again.status == 200)
        #expect(try again.decode(WebhookDelivery.self).state == .pending)
        let requests = await receiver.waitForAccepted(deliveries: 2)
        let accepted = try Self.acceptedOnce(requests, secret: endpoint.secret)
        let texts = accepted.compactMap { delivery -> String? in
            guard case .messageSent(let message) = delivery.data.payload else { return nil }
            return message.text
        }
        #expect(texts == ["the fifth failure", "lost"] && lost.id != "")
        #expect(accepted.last?.id == lostDelivery.id)
        let notFound = try await server.request("POST", "\(path)/deliveries/\(lostDelivery.id)/redeliver", apiKey: key)
        #expect(notFound.status == 404 && notFound.errorCode == .webhookNotFound)
        try await server.stop()
        try await receiver.stop()
    }

    @Test func webhookRequestsAreCheckedAndOnlyTheAppsServerMayMakeThem() async throws {
        let (server, _) = try await Self.server(.sqlite)
        let other = try await TestServer.start()
        let key = server.app.restAPIKey
        let alice = try await server.login("alice")
        func create(_ request: CreateWebhookRequest, key: String? = nil, token: String? = nil) async throws
            -> RESTAnswer
        {
            try await server.request("POST", "/v1/webhooks", token: token, apiKey: key, body: request)
        }
        let good = CreateWebhookRequest(url: "https://example.com/hooks", events: ["messages"])
        // Only the app's server: no key, a user's token, another app's key.
        #expect(try await create(good).status == 401)
        #expect(try await create(good, token: alice).status == 401)
        #expect(try await create(good, key: other.app.restAPIKey).status == 401)
        #expect(try await server.request("GET", "/v1/webhooks", token: alice).status == 401)
        // Bad URLs and filters.
        for url in [
            "ftp://example.com/x", "example.com/x", "https://", "https://user:pw@example.com/x", "https://e.com/#frag",
            "https://exa mple.com/", "javascript:alert(1)", "",
        ] {
            let answer = try await create(CreateWebhookRequest(url: url, events: ["messages"]), key: key)
            #expect(answer.status == 400 && answer.errorCode == .badRequest, "\(url)")
        }
        let long = try await create(
            CreateWebhookRequest(url: "https://example.com/" + String(repeating: "a", count: 2100), events: ["users"]),
            key: key
        )
        #expect(long.status == 400 && long.errorCode == .fieldTooLarge)
        for events in [
            [], ["everything"], ["conversation.participantTyping"], ["presence.update"],
            Array(repeating: "users", count: 21),
        ] {
            let answer = try await create(CreateWebhookRequest(url: "https://example.com/", events: events), key: key)
            #expect(answer.status == 400, "\(events)")
        }
        let description = try await create(
            CreateWebhookRequest(
                url: "https://example.com/", events: ["users"], description: String(repeating: "d", count: 300)),
            key: key
        )
        #expect(description.status == 400)
        // A body that is not JSON, and one too large for the edge.
        var raw = URLRequest(url: server.baseURL.appendingPathComponent("v1/webhooks"))
        raw.httpMethod = "POST"
        raw.setValue(key, forHTTPHeaderField: "X-Parley-Api-Key")
        raw.setValue("application/json", forHTTPHeaderField: "Content-Type")
        raw.httpBody = Data("{\"url\":".utf8)
        let (_, broken) = try await URLSession.shared.data(for: raw)
        #expect((broken as? HTTPURLResponse)?.statusCode == 400)
        raw.httpBody = Data(
            ("{\"url\":\"https://e.com/\",\"events\":[\"users\"],\"description\":\""
                + String(repeating: "x", count: 2 << 20) + "\"}").utf8)
        let (_, huge) = try await URLSession.shared.data(for: raw)
        #expect((huge as? HTTPURLResponse)?.statusCode == 413)

        // At most 20 endpoints per app.
        for index in 0..<20 {
            let answer = try await create(
                CreateWebhookRequest(url: "https://example.com/\(index)", events: ["reports", "report.create"]),
                key: key
            )
            #expect(answer.status == 201)
        }
        let over = try await create(good, key: key)
        #expect(over.status == 409 && over.errorCode == .webhookLimit)
        let listed = try await server.request("GET", "/v1/webhooks", apiKey: key).decode(WebhookEndpointList.self)
        #expect(listed.webhooks.count == 20)
        // Secrets are shown once: never in a listing.
        #expect(try await server.request("GET", "/v1/webhooks", apiKey: key).body.count > 0)
        #expect(
            !String(decoding: try await server.request("GET", "/v1/webhooks", apiKey: key).body, as: UTF8.self)
                .contains("whsec_"))

        // Another app's endpoint is not found here; unknown ids neither; control characters are refused.
        let theirs = try await other.request("POST", "/v1/webhooks", apiKey: other.app.restAPIKey, body: good)
            .decode(WebhookEndpointWithSecret.self).endpoint
        for (method, suffix) in [
            ("GET", ""), ("PATCH", ""), ("DELETE", ""), ("POST", "/secret"), ("GET", "/deliveries"),
        ] {
            let answer = try await server.request(
                method, "/v1/webhooks/\(theirs.id)\(suffix)", apiKey: key,
                body: method == "PATCH" ? UpdateWebhookRequest(enabled: false) : nil
            )
            #expect(answer.status == 404 && answer.errorCode == .webhookNotFound, "\(method) \(suffix)")
        }
        #expect(try await server.request("GET", "/v1/webhooks/wh_%01", apiKey: key).status == 400)
        #expect(
            try await server.request("GET", "/v1/webhooks/\(listed.webhooks[0].id)/deliveries?cursor=x", apiKey: key)
                .status == 400)
        #expect(
            try await server.request("GET", "/v1/webhooks/\(listed.webhooks[0].id)/deliveries?state=done", apiKey: key)
                .status == 400)

        // Rotating the secret gives a new one; the old listing is unchanged but for the time.
        let mine = listed.webhooks[0]
        let rotated = try await server.request("POST", "/v1/webhooks/\(mine.id)/secret", apiKey: key)
            .decode(WebhookEndpointWithSecret.self)
        #expect(rotated.secret.hasPrefix("whsec_") && rotated.endpoint.id == mine.id)
        // Changing and removing.
        let changed = try await server.request(
            "PATCH", "/v1/webhooks/\(mine.id)", apiKey: key,
            body: UpdateWebhookRequest(
                url: "http://127.0.0.1:9/x", events: ["users"], description: "changed", enabled: false)
        ).decode(WebhookEndpoint.self)
        #expect(
            changed.url == "http://127.0.0.1:9/x" && changed.events == ["users"] && changed.description == "changed")
        #expect(!changed.enabled && changed.disabledReason == "Disabled by the app's server.")
        let badChange = try await server.request(
            "PATCH", "/v1/webhooks/\(mine.id)", apiKey: key, body: UpdateWebhookRequest(events: ["nope"])
        )
        #expect(badChange.status == 400)
        #expect(try await server.request("DELETE", "/v1/webhooks/\(mine.id)", apiKey: key).status == 204)
        #expect(try await server.request("DELETE", "/v1/webhooks/\(mine.id)", apiKey: key).status == 404)
        try await server.stop()
        try await other.stop()
    }

    @Test(.enabled(if: PostgresTestDatabase.isConfigured, "needs PARLEY_TEST_DATABASE_URL (scripts/test)"))
    func twoNodesDeliverEachEventOnce() async throws {
        let receiver = try await WebhookReceiver.start()
        let database = try await PostgresTestDatabase.create(prefix: "parley_webhooks")
        let directory = try TemporaryDirectory(prefix: "parley-webhook-nodes")
        let (nodeA, _) = try await Self.server(.postgres, database: database, dataDirectory: directory.path)
        let (nodeB, _) = try await Self.server(.postgres, database: database, dataDirectory: directory.path)
        let endpoint = try await Self.register(nodeA, receiver, events: ["messages", "conversations"])
        let alice = try await nodeA.login("alice")
        let bob = try await nodeB.login("bob")
        let first = try await nodeA.createConversation(token: alice, with: ["bob"])
        let second = try await nodeB.createConversation(token: bob, with: ["alice"])
        for index in 0..<12 {
            try await Self.send("a\(index)", to: first.id, as: alice, on: nodeA)
            try await Self.send("b\(index)", to: first.id, as: bob, on: nodeB)
            try await Self.send("c\(index)", to: second.id, as: bob, on: nodeB)
        }
        let expected = 2 + 12 * 3
        let requests = await receiver.waitForAccepted(deliveries: expected)
        let delivered = try Self.acceptedOnce(requests, secret: endpoint.secret)
        #expect(delivered.count == expected)
        for conversation in [first, second] {
            let seqs = delivered.filter { $0.data.conversationId == conversation.id }.compactMap(\.data.seq)
            #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count)
        }
        // Stopped, each node has recorded what it sent: together, each delivery once.
        try await nodeA.stop()
        try await nodeB.stop()
        let byNode = [
            await nodeA.application.webhookAttempts().filter(\.delivered),
            await nodeB.application.webhookAttempts().filter(\.delivered),
        ]
        #expect(byNode.map(\.count).reduce(0, +) == expected)
        #expect(Set(byNode.flatMap { $0.map(\.deliveryId) }).count == expected)
        try await receiver.stop()
        try await database.drop()
    }

    @Test func theSignatureIsAnHMACOfTheTimestampAndTheBody() {
        // Known answer, computed with Python's hmac: hmac.new(b"whsec_test", b'1700000000.{"id":"dlv_1_x"}', sha256).
        let body = Array(#"{"id":"dlv_1_x"}"#.utf8)
        let header = WebhookSignature.header(secret: "whsec_test", timestamp: 1_700_000_000, body: body)
        #expect(header == "t=1700000000,v1=8196f3a2d3cf1a14cce44dca0d9c07328a4d39cdc20e75a7e2f739ec62594b03")
        #expect(WebhookSignature.verify(header: header, body: body, secret: "whsec_test", now: 1_700_000_100))
        #expect(!WebhookSignature.verify(header: header, body: body, secret: "whsec_other", now: 1_700_000_100))
        #expect(!WebhookSignature.verify(header: header, body: body, secret: "whsec_test", now: 1_700_000_301))
        #expect(!WebhookSignature.verify(header: "v1=8196", body: body, secret: "whsec_test", now: 1_700_000_000))
    }

    @Test func backoffDoublesWithJitterUpToItsCap() {
        var policy = WebhookRetryPolicy()
        policy.initialDelay = .seconds(5)
        policy.maximumDelay = .seconds(60)
        #expect(policy.delay(afterAttempts: 1, unit: 0) == .milliseconds(2500))
        #expect(policy.delay(afterAttempts: 1, unit: 1) == .seconds(5))
        #expect(policy.delay(afterAttempts: 3, unit: 1) == .seconds(20))
        #expect(policy.delay(afterAttempts: 3, unit: 0.5) == .seconds(15))
        #expect(policy.delay(afterAttempts: 10, unit: 1) == .seconds(60))
        #expect(policy.delay(afterAttempts: 1000, unit: 0) == .seconds(30))
    }
}
