import Foundation
import Logging
import ParleyProtocol
import ParleyStore
import ParleyTesting
import PostgresNIO
import Testing

@testable import ParleyStorePostgres

/// What only PostgreSQL has to prove: migrations under concurrency, start-up failures, and several writers (several
/// server nodes) on one database. The behaviour shared with SQLite is in StoreConformanceTests.
@Suite(
    .enabled(
        if: PostgresTestDatabase.isConfigured,
        "PARLEY_TEST_DATABASE_URL is not set: PostgreSQL tests SKIPPED. Run scripts/test (it starts a throwaway PostgreSQL) or set PARLEY_TEST_DATABASE_URL=postgres://USER:PASSWORD@127.0.0.1:PORT/postgres."
    ),
    StoreCleanup()
)
struct PostgresStoreTests {
    static let appId = "app1"

    /// A fresh database, dropped when the test ends.
    func freshDatabase() async throws -> PostgresTestDatabase {
        let database = try await PostgresTestDatabase.create()
        await StoreCleanup.register(database: database)
        return database
    }

    /// A store on `database`, closed when the test ends.
    func store(on database: PostgresTestDatabase, connections: Int = 8) async throws -> PostgresStore {
        let store = try await PostgresStore.connect(
            url: database.url, logger: .quiet, timeout: .seconds(60), maximumConnections: connections)
        await StoreCleanup.register(store)
        return store
    }

    /// An app, users and a group owned by alice with every user in it.
    func prepare(_ store: PostgresStore, users: [String] = ["alice", "bob", "carol", "dave"], group: String? = "c_g")
        async throws
    {
        try await store.insertApp(
            AppRecord(id: Self.appId, name: "A", authKeyHash: [1], restAPIKeyHash: [2], createdAt: 1))
        for uid in users {
            try await store.insertUser(appId: Self.appId, User(uid: uid, name: uid, createdAt: 1, updatedAt: 1))
        }
        if let group {
            _ = try await store.apply([
                .createConversation(
                    .init(
                        appId: Self.appId, newId: group, type: .group, creator: users[0],
                        participants: Array(users.dropFirst()), name: "G", now: 1)
                )
            ])[0].get()
        }
    }

    func send(_ conversationId: String, from sender: String, clientId: String? = nil) -> Command {
        .sendMessage(
            .init(
                appId: Self.appId, conversationId: conversationId, sender: sender,
                messageId: "m_\(UUID().uuidString.prefix(12))",
                clientMessageId: clientId, parts: [.text("hi")], metadata: nil, alert: nil, now: 20
            )
        )
    }

    /// Runs `body` on one direct connection to `url`.
    func withConnection<T: Sendable>(_ url: String, _ body: (PostgresConnection) async throws -> T) async throws -> T {
        let configuration = try PostgresDatabaseURL(url).connectionConfiguration(connectTimeout: .seconds(10))
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: .quiet)
        do {
            let value = try await body(connection)
            try await connection.close()
            return value
        } catch {
            try? await connection.close()
            throw error
        }
    }

    // MARK: Migrations

    /// `/metrics` reads the pool's size, the operations under way and the failures; a refusal of the rules is not a
    /// failure of the database.
    @Test func theStoreCountsWhatTheDatabaseFails() async throws {
        let store = try await store(on: try await freshDatabase(), connections: 5)
        try await prepare(store)
        #expect(store.activity == StoreActivity(inFlight: 0, capacity: 5, failures: 0))
        await #expect(throws: (any Error).self) { try await store.execute("SELECT * FROM no_such_table") }
        #expect(store.activity.failures == 1)
        for index in 0..<Webhooks.maxEndpoints {
            try await store.insertWebhookEndpoint(Self.endpoint("wh_\(index)"))
        }
        await #expect(throws: DomainError.self) { try await store.insertWebhookEndpoint(Self.endpoint("wh_x")) }
        #expect(store.activity == StoreActivity(inFlight: 0, capacity: 5, failures: 1))
    }

    static func endpoint(_ id: String) -> WebhookEndpointRecord {
        WebhookEndpointRecord(
            appId: appId,
            endpoint: WebhookEndpoint(
                id: id, url: "https://example.com/hook", events: ["messages"], description: nil, enabled: true,
                disabledReason: nil, disabledAt: nil, consecutiveFailures: 0, lastSuccessAt: nil, lastFailureAt: nil,
                createdAt: 1, updatedAt: 1
            ),
            secret: "whsec_x", eventNames: [.messageSent]
        )
    }

    @Test func migratingTwiceChangesNothing() async throws {
        let database = try await freshDatabase()
        let (first, second) = try await withConnection(database.url) { connection in
            (
                try await PostgresStore.migrate(connection, logger: .quiet),
                try await PostgresStore.migrate(connection, logger: .quiet)
            )
        }
        #expect(first == PostgresStore.migrations.map(\.version))
        #expect(second == [])
        let one = try await store(on: database)
        try await prepare(one)
        // A store that starts on a current schema finds its data.
        let another = try await store(on: database)
        #expect(try await another.apps().map(\.id) == [Self.appId])
        let versions = try await withConnection(database.url) { connection in
            try await connection.query("SELECT version FROM schema_migrations ORDER BY version", logger: .quiet)
                .collect().map { try $0.decode(Int64.self) }
        }
        #expect(versions == PostgresStore.migrations.map(\.version))
    }

    @Test func nodesStartingTogetherMigrateOnce() async throws {
        let database = try await freshDatabase()
        let stores = try await withThrowingTaskGroup(of: PostgresStore.self) { group in
            // A generous start-up timeout: six nodes queue on the migration lock of a shared, loaded machine.
            for _ in 0..<6 {
                group.addTask {
                    try await PostgresStore.connect(
                        url: database.url, logger: .quiet, timeout: .seconds(60), maximumConnections: 2)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for store in stores { await StoreCleanup.register(store) }
        #expect(stores.count == 6)
        let count = try await withConnection(database.url) { connection in
            try await connection.query("SELECT count(*) FROM schema_migrations", logger: .quiet).collect()[0].decode(
                Int64.self)
        }
        #expect(count == Int64(PostgresStore.migrations.count))
        try await prepare(stores[0])
        #expect(try await stores[5].user(appId: Self.appId, uid: "bob")?.name == "bob")
    }

    // MARK: Start-up failures

    /// Connects to `url`, expecting a failure with `code`. The start-up timeout runs on a clock that never moves, so the
    /// failure came from what the server answered (or from nothing listening), never from waiting the timeout out.
    /// There is no wall-clock bound: a machine busy with the whole suite took 12.6 s, once 20.05 s, for a refusal; the
    /// tests' time limits catch a hang.
    func expectStartupFailure(
        _ url: String, _ code: PostgresStoreError.Code, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> PostgresStoreError? {
        do {
            let store = try await PostgresStore.connect(
                url: try PostgresDatabaseURL(url), logger: .quiet, timeout: .seconds(10), clock: ManualClock())
            try await store.close()
            Issue.record("Connecting succeeded", sourceLocation: sourceLocation)
            return nil
        } catch let error as PostgresStoreError {
            #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
            #expect(!error.description.contains("\n"), sourceLocation: sourceLocation)
            return error
        }
    }

    /// A schema a newer Parley migrated (a step past what this server knows) is refused with one line that names the
    /// release that wrote it, and nothing is migrated; the steps this server applies record its release.
    @Test func aSchemaMigratedByANewerParleyIsRefusedAndLeftAlone() async throws {
        let database = try await freshDatabase()
        try await store(on: database).close()
        let releases = try await withConnection(database.url) { connection in
            try await connection.query("SELECT DISTINCT release FROM schema_migrations", logger: .quiet).collect()
                .map { try $0.decode(String?.self) }
        }
        #expect(releases == [ParleyRelease.version])
        let future = PostgresStore.migrations.last!.version + 1
        try await database.execute(
            "INSERT INTO schema_migrations (version, name, release) VALUES (\(future), 'from the future', '9.9.9')")
        let error = try await expectStartupFailure(database.url, .schemaTooNew)
        #expect(error?.description.contains("Parley 9.9.9") == true, "\(String(describing: error))")
        #expect(error?.description.contains("version \(future)") == true)
        let count = try await withConnection(database.url) { connection in
            try await connection.query("SELECT count(*) FROM schema_migrations", logger: .quiet).collect()[0].decode(
                Int64.self)
        }
        #expect(count == Int64(PostgresStore.migrations.count) + 1)
    }

    @Test(.timeLimit(.minutes(1))) func aWrongPasswordFailsFastWithItsSQLState() async throws {
        let admin = try PostgresDatabaseURL(try #require(PostgresTestDatabase.adminURL))
        let role = "parley_pw_\(UUID().uuidString.prefix(8).lowercased())"
        func administer(_ sql: String) async throws {
            try await withConnection(PostgresTestDatabase.adminURL!) { connection in
                _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: .quiet).collect()
            }
        }
        try await administer("CREATE ROLE \(role) LOGIN PASSWORD 'right-password'")
        let wrong =
            "postgres://\(role):wrong-password@\(admin.host):\(admin.port)/\(admin.database ?? "postgres")?sslmode=disable"
        // A server that trusts every TCP login (pg_hba.conf "trust") cannot show this; scripts/with-postgres asks
        // for passwords.
        if let store = try? await PostgresStore.connect(url: wrong, logger: .quiet, timeout: .seconds(10)) {
            try await store.close()
            print(
                "note: the server at \(admin.endpoint) accepts any password (trust); the wrong-password case is not shown"
            )
        } else {
            let error = try await expectStartupFailure(wrong, .authenticationFailed)
            #expect(error?.sqlState == "28P01")
            #expect(error?.description.contains("28P01") == true)
            #expect(error?.description.contains("wrong-password") == false)
        }
        try await administer("DROP ROLE IF EXISTS \(role)")
    }

    @Test(.timeLimit(.minutes(1))) func anUnknownDatabaseFailsFastWithItsSQLState() async throws {
        let adminURL = try #require(PostgresTestDatabase.adminURL)
        var components = try #require(URLComponents(string: adminURL))
        components.percentEncodedPath = "/parley_missing_\(UUID().uuidString.prefix(8).lowercased())"
        let error = try await expectStartupFailure(components.string!, .databaseNotFound)
        #expect(error?.sqlState == "3D000")
        #expect(error?.description.contains("3D000") == true)
    }

    @Test(.timeLimit(.minutes(1))) func anUnreachableServerFailsFast() async throws {
        // Nothing listens on port 1: the connection is refused at once.
        let refused = try await expectStartupFailure("postgres://parley:secret@127.0.0.1:1/parley", .unreachable)
        #expect(refused?.description.contains("connection refused") == true)
        #expect(refused?.description.contains("secret") == false)
        _ = try await expectStartupFailure("mysql://x@y/z", .invalidURL)
    }

    @Test(.timeLimit(.minutes(1))) func aServerThatNeverAnswersFailsAtTheStartupTimeout() async throws {
        let admin = try PostgresDatabaseURL(try #require(PostgresTestDatabase.adminURL))
        let proxy = try await TCPProxy.start(targetPort: admin.port)
        proxy.stall(true)  // accepts, then every byte is lost
        // The timeout runs on a clock the test moves: the start waits for its whole 10 s, then fails at once, however
        // late a loaded machine's timers would fire.
        let clock = ManualClock()
        let url = try PostgresDatabaseURL("postgres://parley:secret@127.0.0.1:\(proxy.port)/parley?sslmode=disable")
        let starting = Task {
            try await PostgresStore.connect(url: url, logger: .quiet, timeout: .seconds(10), clock: clock)
        }
        let deadline = await clock.sleeper { _ in true }
        #expect(deadline.offset == .seconds(10))
        clock.advance(by: .seconds(9))
        #expect(clock.sleeperCount == 1, "the start gave up before its timeout")
        clock.advance(by: .seconds(1))
        switch await starting.result {
        case .success(let store):
            Issue.record("Connecting to a server that never answers succeeded")
            try await store.close()
        case .failure(let error):
            let failure = try #require(error as? PostgresStoreError, "\(error)")
            #expect(failure.code == .unreachable, "\(failure)")
            #expect(failure.description.contains("timeout"), "\(failure)")
            #expect(!failure.description.contains("\n"))
        }
        proxy.stall(false)
        proxy.refuse(true)  // accepts, then resets at once
        let closing = try await expectStartupFailure(
            "postgres://parley:secret@127.0.0.1:\(proxy.port)/parley", .unreachable)
        // Whether the client sees the reset or only the end of the stream depends on whether its first bytes were on
        // their way when the reset arrived: either way the start fails at once, saying the server closed on it.
        let description = closing?.description ?? ""
        #expect(
            description.contains("connection reset by the server") || description.contains("closed the connection"),
            "\(description)"
        )
        try await proxy.stop()
    }

    // MARK: Several writers

    @Test func twoNodesWritingOneConversationLeaveNoGapForAReader() async throws {
        let database = try await freshDatabase()
        let nodeA = try await store(on: database)
        let nodeB = try await store(on: database)
        let reader = try await store(on: database, connections: 2)
        try await prepare(nodeA)  // the group's events take seq 1...5
        let perNode = 200
        let total = Int64(5 + 2 * perNode)

        let writing = Task {
            try await withThrowingTaskGroup(of: [Int64].self) { group in
                for (index, node) in [nodeA, nodeB].enumerated() {
                    group.addTask {
                        var seqs: [Int64] = []
                        var sent = 0
                        while sent < perNode {
                            let size = min(perNode - sent, 1 + (sent + index) % 7)
                            let batch = (0..<size).map { _ in send("c_g", from: index == 0 ? "alice" : "bob") }
                            for result in try await node.apply(batch) {
                                seqs += try result.get().events.compactMap(\.event.seq)
                            }
                            sent += size
                        }
                        return seqs
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
        }
        let done = Flag()
        Task {
            _ = await writing.result
            await done.set()
        }
        // The reader polls from its last position: it must see every seq, once, in order, never N+1 before N.
        var seen: [Int64] = []
        var last: Int64 = 0
        while last < total {
            let finished = await done.value
            let page = try await reader.events(appId: Self.appId, conversationId: "c_g", afterSeq: last, limit: 37)
            for stored in page {
                let seq = try #require(stored.event.seq)
                #expect(seq == last + 1, "the reader skipped from \(last) to \(seq)")
                seen.append(seq)
                last = seq
            }
            if page.isEmpty && finished { break }
        }
        let seqs = try await writing.value
        #expect(seen == Array(1...total))
        #expect(seqs.sorted() == Array(6...total))
        #expect(Set(seqs).count == seqs.count)
        let conversation = try await reader.conversation(appId: Self.appId, id: "c_g", viewer: "alice")
        #expect(conversation?.0.conversation.lastSeq == total)
        // Unread counts follow: carol read nothing; bob's own sends read up to his last message.
        #expect(try await reader.unread(appId: Self.appId, uid: "carol", conversationIds: nil).total == 2 * perNode)
    }

    @Test func twoNodesJoiningAUserToGroupsKeepItsStreamGapFree() async throws {
        let database = try await freshDatabase()
        let nodeA = try await store(on: database)
        let nodeB = try await store(on: database)
        try await prepare(nodeA, group: nil)
        let groupsPerNode = 15
        for node in ["a", "b"] {
            for index in 0..<groupsPerNode {
                _ = try await nodeA.apply([
                    .createConversation(
                        .init(
                            appId: Self.appId, newId: "g_\(node)_\(index)", type: .group, creator: "alice",
                            participants: [], name: "G", now: 1))
                ])[0].get()
            }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (node, store) in [("a", nodeA), ("b", nodeB)] {
                group.addTask {
                    for index in 0..<groupsPerNode {
                        _ = try await store.apply([
                            .addParticipants(
                                .init(
                                    appId: Self.appId, conversationId: "g_\(node)_\(index)", actor: "alice",
                                    entries: [.init(uid: "dave")], now: 2))
                        ])[0].get()
                    }
                }
            }
            try await group.waitForAll()
        }
        let changes = try await nodeB.membershipChanges(appId: Self.appId, uid: "dave", afterUserSeq: 0, limit: 100)
        #expect(changes.map(\.userSeq) == Array(1...Int64(2 * groupsPerNode)))
        #expect(Set(changes.map(\.conversationId)).count == 2 * groupsPerNode)
        #expect(changes.allSatisfy { $0.joined && $0.seq == 3 })
        #expect(try await nodeA.streamPositions(appId: Self.appId, uid: "dave").userSeq == Int64(2 * groupsPerNode))
    }

    @Test func aClientMessageIdSentThroughTwoNodesAtOnceIsStoredOnce() async throws {
        let database = try await freshDatabase()
        let nodeA = try await store(on: database)
        let nodeB = try await store(on: database)
        try await prepare(nodeA)
        for round in 0..<20 {
            let results = try await withThrowingTaskGroup(of: CommandResult.self) { group in
                for node in [nodeA, nodeB] {
                    group.addTask { try await node.apply([send("c_g", from: "bob", clientId: "cm-\(round)")])[0].get() }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let messages = results.compactMap { result -> (Message, Bool)? in
                guard case .message(let message, let duplicate) = result.outcome else { return nil }
                return (message, duplicate)
            }
            #expect(messages.filter { !$0.1 }.count == 1, "round \(round)")
            #expect(Set(messages.map(\.0)).count == 1, "round \(round): both answers are the stored message")
        }
        let history = try await nodeA.messages(
            appId: Self.appId, conversationId: "c_g", query: HistoryQuery(limit: 100)
        ).messages
        #expect(history.count == 20)
        #expect(history.map(\.seq) == Array((6...25).reversed()))
    }

    @Test func aDirectConversationCreatedThroughTwoNodesAtOnceExistsOnce() async throws {
        let database = try await freshDatabase()
        let nodeA = try await store(on: database)
        let nodeB = try await store(on: database)
        let others = (0..<12).map { "user\($0)" }
        try await prepare(nodeA, users: ["alice"] + others, group: nil)
        for other in others {
            let results = try await withThrowingTaskGroup(of: CommandResult.self) { group in
                for (name, node) in [("a", nodeA), ("b", nodeB)] {
                    group.addTask {
                        try await node.apply([
                            .createConversation(
                                .init(
                                    appId: Self.appId, newId: "d_\(name)_\(other)", type: .direct,
                                    creator: name == "a" ? "alice" : other,
                                    participants: [name == "a" ? other : "alice"], now: 1))
                        ])[0].get()
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let outcomes = results.compactMap { result -> (String, Bool)? in
                guard case .conversation(let conversation, let created) = result.outcome else { return nil }
                return (conversation.id, created)
            }
            #expect(outcomes.count == 2 && Set(outcomes.map(\.0)).count == 1, "\(other): \(outcomes)")
            #expect(outcomes.filter(\.1).count == 1, "\(other): \(outcomes)")
            let changes = try await nodeA.membershipChanges(appId: Self.appId, uid: other, afterUserSeq: 0, limit: 10)
            #expect(changes.count == 1)
        }
        #expect(
            try await nodeA.conversations(appId: Self.appId, uid: "alice", query: ConversationQuery(limit: 100)).count
                == others.count)
    }

    @Test func batchesLockingConversationsInOppositeOrdersBothCommit() async throws {
        let database = try await freshDatabase()
        let nodeA = try await store(on: database)
        let nodeB = try await store(on: database)
        try await prepare(nodeA, group: "c_1")
        _ = try await nodeA.apply([
            .createConversation(
                .init(
                    appId: Self.appId, newId: "c_2", type: .group, creator: "alice", participants: ["bob"], name: "G2",
                    now: 1))
        ])[0].get()
        let rounds = 40
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (node, order) in [(nodeA, ["c_1", "c_2"]), (nodeB, ["c_2", "c_1"])] {
                group.addTask {
                    for _ in 0..<rounds {
                        // A membership change in each batch takes user locks too.
                        let batch =
                            order.map { send($0, from: "alice") } + [
                                .join(.init(appId: Self.appId, conversationId: order[0], actor: "alice", now: 3))
                            ]
                        for result in try await node.apply(batch) { _ = try result.get() }
                    }
                }
            }
            try await group.waitForAll()
        }
        for (id, first) in [("c_1", Int64(1)), ("c_2", Int64(1))] {
            let events = try await nodeA.events(appId: Self.appId, conversationId: id, afterSeq: 0, limit: 1000)
            #expect(events.map(\.event.seq) == events.indices.map { Int64($0) + first })
            #expect(events.filter { $0.event.name == .messageSent }.count == 2 * rounds)
        }
    }

    // MARK: The server on PostgreSQL

    @Test func theTestServerRunsOnPostgreSQLAndRestartsOverItsData() async throws {
        let database = try await freshDatabase()
        let directory = try TemporaryDirectory(prefix: "parley-pg-server")
        defer { directory.remove() }
        let server = try await TestServer.start(dataDirectory: directory.path, databaseURL: database.url)
        #expect(server.store is PostgresStore)
        #expect(try await server.request("GET", "/health").status == 200)
        let token = try await server.login("alice")
        #expect(try await server.request("GET", "/v1/me", token: token).status == 200)
        try await server.stop()

        let again = try await TestServer.start(dataDirectory: directory.path, databaseURL: database.url)
        #expect(again.app == server.app)
        #expect(try await again.request("GET", "/v1/me", token: token).status == 200)
        try await again.stop()
    }

    // MARK: Throughput (printed, not asserted: the machine is shared)

    @Test func batchedSendsThroughput() async throws {
        let database = try await freshDatabase()
        let store = try await store(on: database)
        try await prepare(store)
        let batches = 10
        let batchSize = 500
        let start = ContinuousClock.now
        for batch in 0..<batches {
            let commands = (0..<batchSize).map { index in
                send("c_g", from: ["alice", "bob", "carol", "dave"][index % 4], clientId: "b\(batch)-\(index)")
            }
            for result in try await store.apply(commands) { _ = try result.get() }
        }
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print(
            "PostgresStore: \(batches * batchSize) sends in batches of \(batchSize): \(Int(Double(batches * batchSize) / seconds)) messages/s"
        )
        #expect(
            try await store.conversation(appId: Self.appId, id: "c_g", viewer: "alice")?.0.conversation.lastSeq
                == Int64(5 + batches * batchSize))
    }
}

/// A flag that one task raises and another reads.
actor Flag {
    private(set) var value = false
    func set() { value = true }
}
