import Foundation
import Logging
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyServer
import ParleyTesting
import Testing

/// Traces exported over OTLP/HTTP to a real HTTP collector (``WebhookReceiver`` answering as one): REST requests and
/// WebSocket commands get spans, a request's `traceparent` makes its span a child of the caller's, the request's log
/// line carries the trace id, and nothing secret or from the query string is recorded.
@Suite struct TracingTests {
    /// One exported span, from OTLP's JSON.
    struct ExportedSpan {
        var traceId: String
        var spanId: String
        var parentSpanId: String
        var name: String
        var kind: Int
        var attributes: [String: Any]
        var statusCode: Int
    }

    @Test func requestsAndCommandsAreExportedWithTheirTraceIdsInTheLog() async throws {
        let collector = try await WebhookReceiver.start()
        collector.answerEveryRequest(with: .json(200, "{}"))
        let lines = NIOLockedValueBox([UInt8]())
        var logger = Logger(label: "parley") { label in
            JSONLogHandler.writing(label: label) { bytes in lines.withLockedValue { $0 += bytes } }
        }
        logger.logLevel = .info
        let server = try await TestServer.start(logger: logger) {
            $0.requestLogLevel = .info
            var export = TraceExport(endpoint: collector.url("/v1/traces"))
            export.encoding = .json
            $0.traces = export
        }
        let alice = try await server.login("alice")
        _ = try await server.login("bob")
        let conversation = try await server.createConversation(token: alice, type: .direct, with: ["bob"])

        // A request in its caller's trace, with a query string that must not be recorded.
        let callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
        let callerSpan = "00f067aa0ba902b7"
        let history = try await server.request(
            "GET", "/v1/conversations/\(conversation.id)/messages?limit=5&secretish=q_marker_77", token: alice,
            headers: ["traceparent": "00-\(callerTrace)-\(callerSpan)-01"]
        )
        #expect(history.status == 200)
        // A send and a refused send over the WebSocket.
        let socket = WebSocketProbe(url: server.webSocketURL, token: alice)
        _ = try await socket.nextFrame()
        try await socket.send(.send(SendFrame(ref: "s1", conversationId: conversation.id, parts: [.text("traced")])))
        guard case .ack(let ack) = try await socket.nextFrame(where: { if case .ack = $0 { true } else { false } }),
            let sent = ack.message
        else {
            Issue.record("no ack for the send")
            return
        }
        try await socket.send(.send(SendFrame(ref: "s2", conversationId: "c_nowhere", parts: [.text("refused")])))
        let refusal = try await socket.nextFrame { if case .error = $0 { true } else { false } }
        guard case .error(let error) = refusal else { return }
        #expect(error.code == .conversationNotFound)
        await socket.close()
        _ = await socket.closure()
        // A graceful stop sends the spans still batched.
        try await server.stop()

        let exports = collector.requests
        #expect(!exports.isEmpty && exports.allSatisfy { $0.method == "POST" && $0.path == "/v1/traces" })
        #expect(exports.allSatisfy { $0.header("Content-Type") == "application/json" })
        let spans = try exports.flatMap { try Self.spans(in: $0.body) }

        // The request: a server span named by its route, child of the caller's span, in the caller's trace.
        let route = "/v1/conversations/{conversationId}/messages"
        let request = try #require(spans.first { $0.name == "GET \(route)" })
        #expect(request.traceId == callerTrace && request.parentSpanId == callerSpan)
        #expect(request.kind == 2)  // SPAN_KIND_SERVER
        #expect(request.attributes["http.route"] as? String == route)
        #expect(request.attributes["http.response.status_code"] as? Int == 200)
        #expect(request.attributes["url.path"] as? String == "/v1/conversations/\(conversation.id)/messages")
        // Requests without a caller start traces of their own.
        let login = try #require(spans.first { $0.name == "POST /v1/login" })
        #expect(login.parentSpanId.isEmpty && login.traceId != callerTrace)

        // The commands: the send with the message it stored, the refusal with its code (a refusal is no failure).
        let sends = spans.filter { $0.name == "parley.send" }
        #expect(sends.count == 2)
        let stored = try #require(sends.first { $0.attributes["parley.message_id"] != nil })
        #expect(stored.attributes["parley.message_id"] as? String == sent.id)
        #expect(stored.attributes["parley.seq"] as? Int == Int(sent.seq))
        #expect(stored.attributes["parley.conversation_id"] as? String == conversation.id)
        #expect(stored.attributes["parley.app_id"] as? String == server.app.appId)
        let refused = try #require(sends.first { $0.attributes["parley.error"] != nil })
        #expect(refused.attributes["parley.error"] as? String == "ERR_CONVERSATION_NOT_FOUND")
        #expect(refused.statusCode != 2)  // not STATUS_CODE_ERROR

        // Nothing of the query string, the token or the keys went out.
        let exported = exports.map { String(decoding: $0.body, as: UTF8.self) }.joined()
        for secret in ["q_marker_77", "secretish", alice, server.app.authKey, server.app.restAPIKey] {
            #expect(!exported.contains(secret), "exported: \(secret.prefix(8))...")
        }

        // The request's log line carries its trace and span ids.
        let text = String(decoding: lines.withLockedValue { $0 }, as: UTF8.self)
        let logged = text.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
        let line = try #require(
            logged.first { ($0["message"] as? String)?.hasPrefix("GET /v1/conversations/") == true })
        #expect(line["trace_id"] as? String == callerTrace)
        #expect(line["span_id"] as? String == request.spanId)
        try await collector.stop()
    }

    /// With a sample ratio of 0, traces started here are dropped, and a caller's trace is kept when the caller
    /// sampled it (its `traceparent` flags), as W3C's parent-based sampling says.
    @Test func aRatioOfZeroKeepsOnlyTheTracesCallersSampled() async throws {
        let collector = try await WebhookReceiver.start()
        collector.answerEveryRequest(with: .json(200, "{}"))
        let server = try await TestServer.start {
            var export = TraceExport(endpoint: collector.url("/v1/traces"))
            export.encoding = .json
            export.sampleRatio = 0
            $0.traces = export
        }
        let alice = try await server.login("alice")
        let sampled = "0af7651916cd43dd8448eb211c80319c"
        let unsampled = "b7ad6b7169203331b7ad6b7169203331"
        let parent = "b9c7c989f97918e1"
        for (trace, flags) in [(sampled, "01"), (unsampled, "00")] {
            let answer = try await server.request(
                "GET", "/v1/me", token: alice, headers: ["traceparent": "00-\(trace)-\(parent)-\(flags)"])
            #expect(answer.status == 200)
        }
        _ = try await server.request("GET", "/v1/me", token: alice)
        try await server.stop()
        let spans = try collector.requests.flatMap { try Self.spans(in: $0.body) }
        #expect(spans.map(\.traceId) == [sampled], "\(spans.map(\.name))")
        #expect(spans.first?.name == "GET /v1/me" && spans.first?.parentSpanId == parent)
        try await collector.stop()
    }

    /// A collector that takes requests and never answers holds no request of the server, and delays its stop by the
    /// exporter's timeout (10 s) at most: spans wait in the exporter's bounded queue, not in the request path.
    @Test func aCollectorThatNeverAnswersHoldsNothing() async throws {
        let collector = try await WebhookReceiver.start()
        collector.answerEveryRequest(with: .hang)
        let server = try await TestServer.start {
            var export = TraceExport(endpoint: collector.url("/v1/traces"))
            export.encoding = .json
            $0.traces = export
        }
        let alice = try await server.login("alice")
        for _ in 0..<20 { #expect(try await server.request("GET", "/v1/me", token: alice).status == 200) }
        let started = ContinuousClock.now
        // Whichever comes first, without waiting for the other: a stop that hangs fails the test instead of holding it.
        var timer: Task<Void, Never>?
        let stopped = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let answered = NIOLockedValueBox(false)
            let answer: @Sendable (Bool) -> Void = { value in
                if answered.withLockedValue({ done in
                    defer { done = true }
                    return !done
                }) {
                    continuation.resume(returning: value)
                }
            }
            Task { answer((try? await server.stop()) != nil) }
            timer = Task {
                try? await Task.sleep(for: .seconds(60))
                answer(false)
            }
        }
        timer?.cancel()
        #expect(stopped, "the stop did not end within 60 s")
        #expect(ContinuousClock.now - started < .seconds(30), "\(ContinuousClock.now - started)")
        #expect(!collector.requests.isEmpty)
        try await collector.stop()
    }

    /// The spans of one OTLP/JSON export (`resourceSpans[].scopeSpans[].spans[]`); ids in hex (the exporter writes
    /// them in base64, as protobuf's JSON mapping does for bytes).
    static func spans(in body: [UInt8]) throws -> [ExportedSpan] {
        let root = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
        var spans: [ExportedSpan] = []
        for resource in root["resourceSpans"] as? [[String: Any]] ?? [] {
            for scope in resource["scopeSpans"] as? [[String: Any]] ?? [] {
                for span in scope["spans"] as? [[String: Any]] ?? [] {
                    var attributes: [String: Any] = [:]
                    for attribute in span["attributes"] as? [[String: Any]] ?? [] {
                        guard let key = attribute["key"] as? String, let value = attribute["value"] as? [String: Any]
                        else { continue }
                        if let text = value["stringValue"] as? String { attributes[key] = text }
                        if let number = value["intValue"] as? String { attributes[key] = Int(number) }
                        if let number = value["intValue"] as? Int { attributes[key] = number }
                        if let flag = value["boolValue"] as? Bool { attributes[key] = flag }
                    }
                    let status = span["status"] as? [String: Any]
                    spans.append(
                        ExportedSpan(
                            traceId: hex(span["traceId"]), spanId: hex(span["spanId"]),
                            parentSpanId: hex(span["parentSpanId"]), name: span["name"] as? String ?? "",
                            kind: span["kind"] as? Int ?? 0, attributes: attributes,
                            statusCode: status?["code"] as? Int ?? 0
                        ))
                }
            }
        }
        return spans
    }

    private static func hex(_ value: Any?) -> String {
        guard let text = value as? String, !text.isEmpty else { return "" }
        let isHex = text.count % 2 == 0 && text.allSatisfy { $0.isHexDigit && !$0.isUppercase }
        if isHex && (text.count == 32 || text.count == 16) { return text }
        guard let bytes = Data(base64Encoded: text) else { return text }
        return bytes.map { String(format: "%02x", $0) }.joined()
    }
}
