import Foundation
import GRDB
import Logging
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyServer
import ParleyTesting
import Testing

@testable import ParleyStoreSQLite

/// A database that cannot grow (a full disk): SQLite answers `SQLITE_FULL`, which the server answers with a documented
/// code (507 `ERR_STORAGE_FULL` over REST, an `error` frame on the socket) and one log line that names the data
/// directory, instead of 500 `ERR_INTERNAL` and a line per refused write. The disk is made full with SQLite's own
/// `max_page_count` on the writer's connection: the same `SQLITE_FULL` a full disk gives, on any machine.
@Suite(.timeLimit(.minutes(2))) struct StorageFullTests {
    @Test func aFullDiskIsRefusedWith507AndLoggedOnceWithItsDirectory() async throws {
        let lines = NIOLockedValueBox([UInt8]())
        let logger = Logger(label: "parley") { label in
            JSONLogHandler.writing(label: label) { bytes in lines.withLockedValue { $0 += bytes } }
        }
        let server = try await TestServer.start(logger: logger)
        let alice = try await server.login("alice")
        _ = try await server.login("bob")
        let conversation = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        let store = try #require(server.store as? SQLiteStore)
        func limitPages(_ pages: Int?) async throws {
            try await store.pool.writeWithoutTransaction { db in
                let limit = try pages ?? Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
                try db.execute(sql: "PRAGMA max_page_count = \(limit)")
            }
        }
        func send(_ text: String) async throws -> RESTAnswer {
            try await server.request(
                "POST", "/v1/conversations/\(conversation.id)/messages", token: alice,
                body: SendMessageRequest(parts: [.text(text)])
            )
        }
        // No page more than the database has now: the next write that needs one fails (the first sends may still
        // fit in pages already there).
        try await limitPages(nil)
        var refused: RESTAnswer?
        for index in 0..<200 {
            let answer = try await send(String(repeating: "x", count: 3000) + " \(index)")
            guard answer.status == 201 else {
                refused = answer
                break
            }
        }
        let answer = try #require(refused)
        #expect(answer.status == 507 && answer.errorCode == .storageFull)
        #expect(try await send(String(repeating: "z", count: 3000)).status == 507)

        // On the socket: an error frame with the code, for the send's ref.
        let probe = WebSocketProbe(url: server.webSocketURL, token: alice)
        _ = try await probe.nextFrame()  // hello
        try await probe.send(
            .send(
                SendFrame(
                    ref: "full", conversationId: conversation.id, parts: [.text(String(repeating: "y", count: 3000))]))
        )
        let frame = try await probe.nextFrame { if case .error = $0 { true } else { false } }
        guard case .error(let error) = frame else {
            Issue.record("\(frame)")
            return
        }
        #expect(error.code == .storageFull && error.ref == "full")

        // One line for all of them, naming the data directory.
        let log = String(decoding: lines.withLockedValue { $0 }, as: UTF8.self)
        #expect(log.components(separatedBy: "The database's disk is full").count - 1 == 1, "\(log)")
        #expect(log.contains("data directory \(server.dataDirectory)"))
        #expect(!log.contains("ERR_INTERNAL"))

        // Space again: writes are stored.
        try await limitPages(1_073_741_823)
        #expect(try await send("stored").status == 201)
        await probe.close()
        try await server.stop()
    }

    /// PostgreSQL's full disk (SQLSTATE 53100 `disk_full`), raised by the database itself from a trigger on the
    /// message log as a full tablespace raises it: the same 507 and one log line, and writes go through again once
    /// the trigger is gone.
    @Test(.enabled(if: PostgresTestDatabase.isConfigured, "needs PARLEY_TEST_DATABASE_URL (scripts/test)"))
    func aFullDiskOnPostgreSQLIsRefusedWith507() async throws {
        let database = try await PostgresTestDatabase.create(prefix: "parley_full")
        let lines = NIOLockedValueBox([UInt8]())
        let logger = Logger(label: "parley") { label in
            JSONLogHandler.writing(label: label) { bytes in lines.withLockedValue { $0 += bytes } }
        }
        let server = try await TestServer.start(databaseURL: database.url, logger: logger)
        let alice = try await server.login("alice")
        _ = try await server.login("bob")
        let conversation = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        func send(_ text: String) async throws -> RESTAnswer {
            try await server.request(
                "POST", "/v1/conversations/\(conversation.id)/messages", token: alice,
                body: SendMessageRequest(parts: [.text(text)])
            )
        }
        #expect(try await send("before").status == 201)
        try await database.execute(
            """
            CREATE FUNCTION parley_test_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$
            """
        )
        try await database.execute(
            "CREATE TRIGGER parley_test_disk_full BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION parley_test_disk_full()"
        )
        let refused = try await send("full")
        #expect(
            refused.status == 507 && refused.errorCode == .storageFull,
            "\(refused.status) \(String(decoding: refused.body, as: UTF8.self))")
        #expect(try await send("still full").status == 507)
        let log = String(decoding: lines.withLockedValue { $0 }, as: UTF8.self)
        #expect(log.components(separatedBy: "The database's disk is full (PostgreSQL)").count - 1 == 1, "\(log)")
        #expect(!log.contains("ERR_INTERNAL"))

        try await database.execute("DROP TRIGGER parley_test_disk_full ON events")
        #expect(try await send("stored").status == 201)
        try await server.stop()
        try await database.drop()
    }
}
