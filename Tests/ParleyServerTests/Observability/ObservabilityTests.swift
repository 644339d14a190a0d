import Foundation
import Logging
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore
import ParleyTesting
import Testing

@testable import ParleyServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Metrics (`GET /metrics`), request logs and the JSON log format: docs/PROTOCOL.md, "Metrics" and "Logs".
@Suite(.timeLimit(.minutes(2))) struct ObservabilityTests {
    static let metricsToken = "metrics-token-for-the-tests-0123"

    /// The samples of a Prometheus text: `name{labels}` → value.
    struct Scrape {
        var samples: [String: Double] = [:]

        init(_ text: String) {
            for line in text.split(separator: "\n") where !line.hasPrefix("#") {
                guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                    continue
                }
                samples[String(line[..<space])] = value
            }
        }

        subscript(_ name: String) -> Double { samples[name] ?? 0 }

        /// The sum of every series of a metric whose labels contain all of `labels` (`key="value"`).
        func sum(_ name: String, _ labels: String...) -> Double {
            samples.filter { key, _ in
                (key == name || key.hasPrefix(name + "{")) && labels.allSatisfy { key.contains($0) }
            }.values.reduce(0, +)
        }
    }

    static func scrape(_ server: TestServer) async throws -> Scrape {
        let answer = try await server.request("GET", "/metrics", headers: ["Authorization": "Bearer \(metricsToken)"])
        #expect(answer.status == 200)
        #expect(answer.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
        return Scrape(String(decoding: answer.body, as: UTF8.self))
    }

    /// Scrapes until `condition` holds (the server counts a closed socket on its own event loop), for at most 5 s.
    static func scrape(_ server: TestServer, until condition: (Scrape) -> Bool) async throws -> Scrape {
        let deadline = ContinuousClock.now + .seconds(5)
        var last = try await scrape(server)
        while !condition(last), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            last = try await scrape(server)
        }
        return last
    }

    @Test func theMetricsMoveAsTrafficFlows() async throws {
        let server = try await TestServer.start { $0.metrics.token = Self.metricsToken }
        // The token guards the endpoint.
        let missing = try await server.request("GET", "/metrics")
        #expect(missing.status == 401 && missing.errorCode == .authRequired)
        let wrong = try await server.request("GET", "/metrics", headers: ["Authorization": "Bearer not-the-token"])
        #expect(wrong.status == 401)
        let before = try await Self.scrape(server)
        // The process and its data directory, read at the scrape: the release, readiness, descriptors, disk.
        #expect(
            before[#"parley_build_info{version="\#(ParleyRelease.version)",commit="\#(ServerBuild.commit)"}"#] == 1)
        #expect(before["parley_ready"] == 1)
        #expect(before["process_open_fds"] > 0 && before["process_open_fds"] < before["process_max_fds"])
        let room = try #require(ProcessResources.fileSystem(of: server.dataDirectory))
        #expect(before["parley_storage_size_bytes"] == Double(room.size))
        #expect(before["parley_storage_free_bytes"] > 0 && before["parley_storage_free_bytes"] <= Double(room.size))

        let alice = try await server.login("alice")
        let bob = try await server.login("bob")
        let conversation = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        let probe = WebSocketProbe(url: server.webSocketURL, token: alice, skipCaughtUp: false)
        _ = try await probe.nextFrame { if case .caughtUp = $0 { true } else { false } }
        let open = try await Self.scrape(server)
        #expect(open["parley_websocket_connections"] == 1)
        #expect(open["parley_connected_users"] == 1)

        for index in 0..<3 {
            let sent = try await server.request(
                "POST", "/v1/conversations/\(conversation.id)/messages", token: bob,
                body: SendMessageRequest(parts: [.text("m\(index)")])
            )
            #expect(sent.status == 201)
            _ = try await probe.nextFrame { if case .event = $0 { true } else { false } }
        }
        await probe.send(#"{"type":"typing","conversationId":"\#(conversation.id)","isTyping":true}"#)
        await probe.send("{not json")
        _ = try await probe.nextFrame { if case .error = $0 { true } else { false } }
        let busy = try await Self.scrape(server)
        #expect(busy["parley_messages_stored_total"] - before["parley_messages_stored_total"] == 3)
        #expect(busy["parley_writer_commands_total"] - before["parley_writer_commands_total"] >= 4)
        #expect(busy["parley_writer_batch_commands_count"] >= 1)
        #expect(busy["parley_writer_commit_seconds_count"] >= 1)
        #expect(busy["parley_websocket_frames_sent_total"] >= 4)  // hello, caughtUp, three events at least
        #expect(busy["parley_websocket_frames_received_total"] >= 3)  // connect, typing, the malformed frame
        #expect(busy["parley_websocket_malformed_frames_total"] == 1)
        #expect(busy["parley_typing_events_total"] == 1)
        // Requests by route pattern (not by path), method and status.
        let posts = busy.sum("parley_http_requests_total", #"method="POST""#, #"status="201""#, "messages")
        #expect(posts == 3 + 0)
        #expect(busy.sum("parley_http_requests_total", #"status="401""#, #"route="/metrics""#) == 2)
        #expect(busy.sum("parley_http_request_duration_seconds_count", #"method="POST""#, "messages") == 3)

        await probe.close(code: 1000)
        _ = await probe.closure()
        let closed = try await Self.scrape(server) { $0[#"parley_websocket_closes_total{code="1000"}"#] == 1 }
        #expect(closed[#"parley_websocket_closes_total{code="1000"}"#] == 1)
        #expect(closed["parley_websocket_connections"] == 0)
        try await server.stop()
    }

    /// The store's figures become gauges at each scrape, and its failures are added to the database errors once.
    @Test func theDatabaseFiguresAreReadAtEachScrape() {
        let metrics = ServerMetrics.prometheus()
        func scrape() -> Scrape { Scrape(String(decoding: metrics.exposition {}, as: UTF8.self)) }
        metrics.record(StoreActivity(inFlight: 2, capacity: 10, failures: 3))
        var now = scrape()
        #expect(now["parley_database_operations_in_flight"] == 2 && now["parley_database_connections_max"] == 10)
        #expect(now["parley_database_errors_total"] == 3)
        metrics.record(StoreActivity(inFlight: 0, capacity: 10, failures: 3))
        metrics.record(StoreActivity(inFlight: 1, capacity: 10, failures: 5))
        now = scrape()
        #expect(now["parley_database_operations_in_flight"] == 1 && now["parley_database_errors_total"] == 5)
    }

    @Test func theMetricsListenerNeedsNoTokenAndTheMainPortThenHasNoMetrics() async throws {
        let server = try await TestServer.start { $0.metrics.listener = ("127.0.0.1", 0) }
        let port = try #require(server.metricsPort)
        let (data, response) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/metrics")!)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: data, as: UTF8.self).contains("parley_messages_stored_total"))
        // Only /metrics there; and no /metrics on the main port without a token configured.
        let (_, other) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/v1/users")!)
        #expect((other as? HTTPURLResponse)?.statusCode == 404)
        #expect(try await server.request("GET", "/metrics").status == 404)
        try await server.stop()
    }

    /// Every line is one JSON object; requests carry their id and WebSocket lines their connection; and none of the
    /// secrets that went through the server (Auth Key, REST API key, tokens in headers and in `connect`, the metrics
    /// token) appears anywhere in the log, even at trace level.
    @Test func jsonLogsCarryIdsAndNoSecrets() async throws {
        let lines = NIOLockedValueBox([UInt8]())
        var logger = Logger(label: "parley") { label in
            JSONLogHandler.writing(label: label) { bytes in lines.withLockedValue { $0 += bytes } }
        }
        logger.logLevel = .trace
        let server = try await TestServer.start(logger: logger) {
            $0.metrics.token = Self.metricsToken
            $0.requestLogLevel = .info
        }
        let alice = try await server.login("alice")
        let bob = try await server.login("bob")
        let badLogin = try await server.request(
            "POST", "/v1/login", body: LoginRequest(appId: server.app.appId, uid: "carol", authKey: "ak_wrong_key_123")
        )
        #expect(badLogin.status == 401)
        _ = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        _ = try await server.request("GET", "/v1/users", apiKey: server.app.restAPIKey)
        _ = try await server.request("GET", "/v1/users", apiKey: "rk_wrong_key_456")
        _ = try await server.request("GET", "/v1/me", token: "pt_wrong_token_789")
        _ = try await Self.scrape(server)
        let header = WebSocketProbe(url: server.webSocketURL, token: alice, skipCaughtUp: false)
        _ = try await header.nextFrame { if case .caughtUp = $0 { true } else { false } }
        let browser = WebSocketProbe(url: server.webSocketURL, token: "", skipCaughtUp: false, connectToken: bob)
        _ = try await browser.nextFrame { if case .caughtUp = $0 { true } else { false } }
        await header.close()
        await browser.close()
        _ = await header.closure()
        _ = await browser.closure()
        try await server.stop()

        let text = String(decoding: lines.withLockedValue { $0 }, as: UTF8.self)
        let objects = text.split(separator: "\n").map { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
        #expect(!objects.isEmpty && objects.allSatisfy { $0 != nil }, "a line that is not one JSON object")
        let requests = objects.compactMap { $0 }.filter {
            ($0["message"] as? String)?.hasPrefix("POST /v1/login") == true
        }
        #expect(requests.count == 3 && requests.allSatisfy { ($0["hb.request.id"] as? String)?.isEmpty == false })
        #expect(requests.allSatisfy { $0["level"] as? String == "info" && $0["route"] as? String == "/v1/login" })
        #expect(objects.contains { ($0?["connection"] as? String)?.isEmpty == false && $0?["uid"] as? String == "bob" })
        for secret in [
            server.app.authKey, server.app.restAPIKey, alice, bob, Self.metricsToken, "ak_wrong_key_123",
            "rk_wrong_key_456", "pt_wrong_token_789",
        ] {
            #expect(!text.contains(secret), "a secret in the log: \(secret.prefix(6))...")
        }
    }

    @Test func aJSONLineEscapesWhatItCarries() throws {
        let lines = NIOLockedValueBox([UInt8]())
        let logger = Logger(label: "parley") { label in
            JSONLogHandler.writing(label: label) { bytes in lines.withLockedValue { $0 += bytes } }
        }
        logger.info(
            "quote \" backslash \\ newline \n tab \t bell \u{7} done",
            metadata: ["message": "clash", "nested": ["a": ["1", "2"]], "n": "\(42)"]
        )
        let text = String(decoding: lines.withLockedValue { $0 }, as: UTF8.self)
        #expect(text.hasSuffix("}\n") && text.dropLast().split(separator: "\n").count == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(object["message"] as? String == "quote \" backslash \\ newline \n tab \t bell \u{7} done")
        #expect(object["meta.message"] as? String == "clash")
        #expect((object["nested"] as? [String: [String]])?["a"] == ["1", "2"])
        #expect(object["level"] as? String == "info" && object["label"] as? String == "parley")
        #expect((object["time"] as? String)?.hasSuffix("Z") == true)
    }
}
