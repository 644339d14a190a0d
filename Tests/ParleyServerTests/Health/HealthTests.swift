import Foundation
import ParleyProtocol
import ParleyServer
import ParleyTesting
import Testing

/// Liveness and readiness: docs/PROTOCOL.md, "Health".
///
/// Each test takes under four seconds alone; the limit ends a hang. (Uncapped whole runs once started some 650 tests at
/// once on two cores, and these took 55-100 s; scripts/test now runs at most 8 at a time.)
@Suite(.timeLimit(.minutes(2))) struct HealthTests {
    @Test func aRunningServerIsLiveAndReady() async throws {
        let server = try await TestServer.start()
        for path in ["/health", "/health/ready", "/health/live"] {
            let answer = try await server.request("GET", path)
            #expect(answer.status == 200, "\(path)")
            #expect(try answer.decode(HealthStatus.self).status == "ok")
        }
        try await server.stop()
    }

    /// From the start of a graceful shutdown, while open sockets are being closed, the server is not ready (load
    /// balancers stop sending clients) but still live.
    @Test func aDrainingServerIsLiveButNotReady() async throws {
        let server = try await TestServer.start { $0.closeTimeout = .seconds(20) }
        let token = try await server.login("alice")
        // A client that never answers the close handshake keeps the drain going until the close timeout.
        let socket = try await RawSocket.openWebSocket(port: server.port, token: token)
        _ = try await socket.readText(containing: #""type":"caughtUp""#)
        let stopping = Task { try await server.stop() }
        var closing: RawSocket.Frame
        repeat { closing = try await socket.readFrame() } while closing.opcode != 0x8
        for path in ["/health/ready", "/health"] {
            let ready = try await server.request("GET", path)
            #expect(ready.status == 503 && ready.errorCode == .serverShuttingDown, "\(path)")
        }
        #expect(try await server.request("GET", "/health/live").status == 200)
        socket.close()
        try await stopping.value
    }

    /// A database that does not answer makes the server not ready within the check's timeout, and ready again
    /// when it answers. The timeout runs in virtual time: a database that answers is never late however busy the
    /// machine is, and a stalled one is late exactly when the test moves time past the check's deadline.
    @Test(.enabled(if: PostgresTestDatabase.isConfigured, "needs PARLEY_TEST_DATABASE_URL (scripts/test)"))
    func aDatabaseThatDoesNotAnswerMakesTheServerNotReady() async throws {
        let database = try await PostgresTestDatabase.create(prefix: "parley_health")
        let port = try #require(URLComponents(string: database.url)?.port)
        let proxy = try await TCPProxy.start(targetPort: port)
        var proxied = try #require(URLComponents(string: database.url))
        proxied.port = proxy.port
        let clock = ManualClock()
        // Shorter than any other timer of the server: moving time past a check's deadline wakes nothing else (a
        // thousand virtual seconds once woke every periodic task at once, whose queries held the database's pool).
        let timeout = Duration.milliseconds(1)
        let server = try await TestServer.start(databaseURL: try #require(proxied.string), clock: clock) {
            $0.healthCheckTimeout = timeout
        }
        #expect(try await server.request("GET", "/health/ready").status == 200)
        // That check's timer sleeps until `timeout`: moved past, so the stalled check's deadline is its own.
        await clock.sleeper(at: timeout)
        clock.advance(by: timeout)
        proxy.stall(true)
        async let stalled = server.request("GET", "/health/ready")
        await clock.sleeper(at: timeout * 2)
        clock.advance(by: timeout)
        let refusal = try await stalled
        #expect(refusal.status == 503 && refusal.errorCode == .databaseUnavailable)
        #expect(try await server.request("GET", "/health/live").status == 200)
        // The network comes back with its connections reset (the stalled ones lost bytes): the question in flight
        // fails, and a check on a new connection answers. A check can wait a while for the pool's new connection
        // (seen under the whole suite's load, where PostgreSQL serves every test): its deadline, in virtual time,
        // ends it as a real clock would. A check not answered within a few real seconds is moved past it (503), and
        // the next one asks again; without that, such a check waited for URLSession's 60 s and failed the test.
        proxy.stall(false)
        proxy.cutAll()
        var statuses: [Int] = []
        var now = timeout * 2
        for _ in 0..<10 where statuses.last != 200 {
            let status = await withTaskGroup(of: Int?.self) { group -> Int in
                group.addTask { (try? await server.request("GET", "/health/ready").status) ?? 0 }
                group.addTask {
                    try? await Task.sleep(for: .seconds(3))
                    return nil
                }
                while let next = await group.next() {
                    if let status = next {
                        group.cancelAll()
                        return status
                    }
                    await clock.sleeper(at: now + timeout)
                    now += timeout
                    clock.advance(by: timeout)
                }
                return 0
            }
            statuses.append(status)
        }
        #expect(statuses.last == 200, "\(statuses)")
        try await server.stop()
        try await proxy.stop()
        try await database.drop()
    }
}
