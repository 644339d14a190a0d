import NIOCore
import ParleyTesting
import Testing

@testable import NATSNIO

/// Publish/subscribe against a real nats-server.
@Suite(
    "Live: publish and subscribe", .enabled(if: liveServerAvailable, "nats-server not found"), .timeLimit(.minutes(3)))
struct NATSPubSubTests {
    @Test func payloadsOfEverySizeRoundTrip() async throws {
        let server = try await NATSServerProcess.start()
        defer { server.stop() }
        let client = try await TestClient.connected(server.url)
        let inbox = client.connection.makeInbox()
        let received = client.consume(inbox)
        _ = try client.connection.subscribe(to: "sizes", into: inbox)
        let sizes = [0, 1, 64 * 1024, (1 << 20) - 1024]
        for (index, size) in sizes.enumerated() {
            try client.connection.publish(ByteBuffer.pattern(size, seed: UInt8(index)), to: "sizes")
        }
        let messages = try await received.wait(for: "4 messages") { $0.count >= 4 }
        #expect(messages.count == 4)
        for (index, size) in sizes.enumerated() {
            #expect(messages[index].payload == ByteBuffer.pattern(size, seed: UInt8(index)), "size \(size)")
            #expect(messages[index].subject == "sizes")
            #expect(messages[index].headers == nil)
        }
        let statistics = client.connection.statistics
        #expect(statistics.messagesOut == 4 && statistics.messagesIn == 4)
        #expect(statistics.bytesOut == sizes.reduce(0, +))
        _ = await client.close()
    }

    @Test func headersRoundTripWithSeveralValues() async throws {
        let server = try await NATSServerProcess.start()
        defer { server.stop() }
        let client = try await TestClient.connected(server.url)
        let inbox = client.connection.makeInbox()
        let received = client.consume(inbox)
        _ = try client.connection.subscribe(to: "headers", into: inbox)
        var headers: NATSHeaders = ["Parley-Event": "message.created", "Parley-Tag": "a"]
        headers.append("b", for: "Parley-Tag")
        try client.connection.publish(ByteBuffer(string: "body"), to: "headers", headers: headers)
        try client.connection.publish(ByteBuffer(), to: "headers", headers: ["Only": "header"])
        let messages = try await received.wait(for: "2 messages") { $0.count >= 2 }
        #expect(messages[0].headers == headers)
        #expect(messages[0].headers?.values(for: "parley-tag") == ["a", "b"])
        #expect(String(buffer: messages[0].payload) == "body")
        #expect(messages[1].headers?["only"] == "header")
        #expect(messages[1].payload.readableBytes == 0)
        _ = await client.close()
    }

    @Test func wildcardsMatchOneTokenOrTheRest() async throws {
        let server = try await NATSServerProcess.start()
        defer { server.stop() }
        let client = try await TestClient.connected(server.url)
        let star = client.connection.makeInbox()
        let rest = client.connection.makeInbox()
        let starred = client.consume(star)
        let tail = client.consume(rest)
        _ = try client.connection.subscribe(to: "w.*", into: star)
        _ = try client.connection.subscribe(to: "w.>", into: rest)
        for subject in ["w.a.b", "x.a", "w", "w.a"] {
            try client.connection.publish(ByteBuffer(string: subject), to: subject)
        }
        // Messages of one connection arrive in publish order: once w.a is there, nothing else matched before it.
        let starMessages = try await starred.wait(for: "w.a on w.*") { $0.contains { $0.subject == "w.a" } }
        #expect(starMessages.map(\.subject) == ["w.a"])
        let restMessages = try await tail.wait(for: "w.a on w.>") { $0.contains { $0.subject == "w.a" } }
        #expect(restMessages.map(\.subject) == ["w.a.b", "w.a"])
        _ = await client.close()
    }

    @Test func aQueueGroupDeliversEachMessageToExactlyOneMember() async throws {
        let server = try await NATSServerProcess.start()
        defer { server.stop() }
        let workers = [try await TestClient.connected(server.url), try await TestClient.connected(server.url)]
        var collectors: [Collector<NATSMessage>] = []
        for worker in workers {
            let inbox = worker.connection.makeInbox()
            collectors.append(worker.consume(inbox))
            _ = try worker.connection.subscribe(to: "jobs", queueGroup: "workers", into: inbox)
            _ = try worker.connection.subscribe(to: "jobs.done", into: inbox)
            try await worker.connection.flush(timeout: .seconds(10))
        }
        let publisher = try await TestClient.connected(server.url)
        for index in 0..<200 {
            try publisher.connection.publish(ByteBuffer(string: "\(index)"), to: "jobs")
        }
        try publisher.connection.publish(ByteBuffer(string: "marker"), to: "jobs.done")
        for collector in collectors {
            try await collector.wait(for: "the marker") { $0.contains { $0.subject == "jobs.done" } }
        }
        let jobs = collectors.flatMap { $0.items.filter { $0.subject == "jobs" } }.map { String(buffer: $0.payload) }
        #expect(jobs.count == 200)
        #expect(Set(jobs) == Set((0..<200).map { "\($0)" }))
        #expect(collectors.allSatisfy { $0.items.count > 1 }, "both members got work")
        for client in workers + [publisher] { _ = await client.close() }
    }

    @Test func theReplySubjectIsDeliveredAndRequestsGetReplies() async throws {
        let server = try await NATSServerProcess.start()
        defer { server.stop() }
        let responder = try await TestClient.connected(server.url)
        let requests = responder.connection.makeInbox()
        _ = try responder.connection.subscribe(to: "svc.echo", into: requests)
        try await responder.connection.flush(timeout: .seconds(10))
        let serving = Task {
            for await request in requests {
                guard let replyTo = request.replyTo else { continue }
                var payload = ByteBuffer(string: "echo: ")
                payload.writeImmutableBuffer(request.payload)
                try? responder.connection.publish(payload, to: replyTo, headers: ["Replied": "yes"])
            }
        }
        let requester = try await TestClient.connected(server.url)
        for index in 0..<5 {
            let reply = try await requester.connection.request(
                ByteBuffer(string: "\(index)"), to: "svc.echo", timeout: .seconds(10))
            #expect(String(buffer: reply.payload) == "echo: \(index)")
            #expect(reply.headers?["replied"] == "yes")
            #expect(reply.subject.hasPrefix("_INBOX."))
        }
        await #expect {
            try await requester.connection.request(ByteBuffer(), to: "svc.nobody", timeout: .seconds(10))
        } throws: { ($0 as? NATSError)?.code == .noResponders }

        // A plain publish with a reply subject.
        let plain = requester.connection.makeInbox()
        let seen = requester.consume(plain)
        _ = try requester.connection.subscribe(to: "plain", into: plain)
        try requester.connection.publish(ByteBuffer(string: "x"), to: "plain", replyTo: "answer.here")
        let messages = try await seen.wait(for: "the message") { !$0.isEmpty }
        #expect(messages[0].replyTo == "answer.here")
        serving.cancel()
        _ = await requester.close()
        _ = await responder.close()
    }

    @Test func aRequestWithoutReplyTimesOut() async throws {
        let server = try await NATSServerProcess.start()
        defer { server.stop() }
        let client = try await TestClient.connected(server.url)
        let silent = client.connection.makeInbox()
        _ = try client.connection.subscribe(to: "svc.silent", into: silent)
        let start = ContinuousClock.now
        await #expect {
            try await client.connection.request(ByteBuffer(), to: "svc.silent", timeout: .milliseconds(300))
        } throws: { ($0 as? NATSError)?.code == .timeout }
        #expect(ContinuousClock.now - start < .seconds(10))
        _ = await client.close()
    }

    @Test func flushConfirmsSubscribeAndUnsubscribe() async throws {
        let server = try await NATSServerProcess.start()
        defer { server.stop() }
        let a = try await TestClient.connected(server.url)
        let b = try await TestClient.connected(server.url)
        let inbox = a.connection.makeInbox()
        let received = a.consume(inbox)
        let subscription = try a.connection.subscribe(to: "confirm.x", into: inbox)
        _ = try a.connection.subscribe(to: "confirm.marker", into: inbox)
        try await a.connection.flush(timeout: .seconds(10))
        // No sleep: after the flush the server knows A's interest.
        try b.connection.publish(ByteBuffer(string: "1"), to: "confirm.x")
        try await received.wait(for: "the first message") { $0.count == 1 }

        a.connection.unsubscribe(subscription)
        try await a.connection.flush(timeout: .seconds(10))
        try b.connection.publish(ByteBuffer(string: "2"), to: "confirm.x")
        try b.connection.publish(ByteBuffer(string: "m"), to: "confirm.marker")
        let messages = try await received.wait(for: "the marker") { $0.contains { $0.subject == "confirm.marker" } }
        #expect(messages.map(\.subject) == ["confirm.x", "confirm.marker"])
        _ = await a.close()
        _ = await b.close()
    }

    @Test func withEchoOffAConnectionDoesNotReceiveItsOwnPublishes() async throws {
        let server = try await NATSServerProcess.start()
        defer { server.stop() }
        let quiet = try await TestClient.connected(server.url) { $0.echo = false }
        let other = try await TestClient.connected(server.url)
        let inbox = quiet.connection.makeInbox()
        let received = quiet.consume(inbox)
        _ = try quiet.connection.subscribe(to: "echo.t", into: inbox)
        try quiet.connection.publish(ByteBuffer(string: "mine"), to: "echo.t")
        // With echo on, "mine" would be in the inbox before this flush returns (it precedes the PONG).
        try await quiet.connection.flush(timeout: .seconds(10))
        try other.connection.publish(ByteBuffer(string: "theirs"), to: "echo.t")
        let messages = try await received.wait(for: "the other's message") { !$0.isEmpty }
        #expect(messages.map { String(buffer: $0.payload) } == ["theirs"])
        _ = await quiet.close()
        _ = await other.close()
    }

    @Test func invalidSubjectsAreRefusedSynchronously() async throws {
        let server = try await NATSServerProcess.start()
        defer { server.stop() }
        let client = try await TestClient.connected(server.url)
        #expect(throws: NATSError.self) { try client.connection.publish(ByteBuffer(), to: "a.*") }
        #expect(throws: NATSError.self) { try client.connection.publish(ByteBuffer(), to: "a b") }
        #expect(throws: NATSError.self) { try client.connection.publish(ByteBuffer(), to: "a", replyTo: "") }
        #expect(throws: NATSError.self) {
            try client.connection.subscribe(to: "a.>.b", into: client.connection.makeInbox())
        }
        _ = await client.close()
    }
}
