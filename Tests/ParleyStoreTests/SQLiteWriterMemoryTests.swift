import Foundation
import GRDB
import ParleyProtocol
import ParleyStore
import ParleyTesting
import Testing

@testable import ParleyStoreSQLite

/// What the SQLite writer keeps from one batch to the next (the conversations its sends read, ``WriterMemory``) is
/// never trusted past a change it did not make: another connection's commit, or a batch of its own that failed.
@Suite struct SQLiteWriterMemoryTests {
    static let appId = "app1"

    private struct Fixture {
        let directory: TemporaryDirectory
        let path: String
        let store: SQLiteStore

        init() async throws {
            directory = try TemporaryDirectory(prefix: "parley-writer-memory")
            path = directory.path + "/parley.sqlite"
            store = try SQLiteStore(path: path)
            try await store.insertApp(
                AppRecord(
                    id: SQLiteWriterMemoryTests.appId, name: "a", authKeyHash: [1], restAPIKeyHash: [2], createdAt: 1)
            )
            for uid in ["alice", "bob", "dave"] {
                try await store.insertUser(
                    appId: SQLiteWriterMemoryTests.appId, User(uid: uid, name: uid, createdAt: 1, updatedAt: 1))
            }
            _ = try await store.apply([
                .createConversation(
                    .init(
                        appId: SQLiteWriterMemoryTests.appId, newId: "c_g", type: .group, creator: "alice",
                        participants: ["bob", "dave"], name: "G", isPublic: false, now: 10
                    ))
            ])[0].get()  // seq 1-4
        }

        func close() async throws {
            try await store.close()
            directory.remove()
        }
    }

    private static func send(from sender: String, in store: any ParleyStore) async throws
        -> Result<[Int64], DomainError>
    {
        let command = Command.sendMessage(
            .init(
                appId: appId, conversationId: "c_g", sender: sender, messageId: "m_\(UUID().uuidString.prefix(8))",
                clientMessageId: nil, parts: [.text("hi")], metadata: nil, alert: nil, now: 20
            ))
        return try await store.apply([command])[0].map { $0.events.compactMap(\.event.seq) }
    }

    @Test func aSecondStoreWritingTheSameFileIsNoticedByTheFirst() async throws {
        let fixture = try await Fixture()
        #expect(try await Self.send(from: "alice", in: fixture.store).get() == [5])
        // Another connection (another store, or another process) sends and removes bob in between.
        let other = try SQLiteStore(path: fixture.path)
        #expect(try await Self.send(from: "bob", in: other).get() == [6])
        _ = try await other.apply([
            .removeParticipant(.init(appId: Self.appId, conversationId: "c_g", actor: "alice", uid: "bob", now: 30))
        ])[0].get()  // seq 7
        try await other.close()
        // The first store's writer remembered seq 5 and bob as a participant: it must read both again.
        #expect(try await Self.send(from: "alice", in: fixture.store).get() == [8])
        #expect(try await Self.send(from: "bob", in: fixture.store).failure?.code == .conversationNotFound)
        let stored = try await fixture.store.events(appId: Self.appId, conversationId: "c_g", afterSeq: 0, limit: 20)
        #expect(stored.map(\.event.seq) == Array(1...8))
        try await fixture.close()
    }

    @Test func aBatchThatFailsLeavesNothingOfItsSendsBehind() async throws {
        let fixture = try await Fixture()
        // Inserting dave's events fails (an error of the database, not a refusal): the whole batch rolls back.
        try await fixture.store.pool.write { db in
            try db.execute(
                sql: """
                    CREATE TRIGGER refuse_dave BEFORE INSERT ON events WHEN NEW.actor = 'dave'
                    BEGIN SELECT RAISE(ABORT, 'no events from dave'); END
                    """)
        }
        #expect(try await Self.send(from: "alice", in: fixture.store).get() == [5])
        let sends = ["alice", "bob", "dave"].map { sender in
            Command.sendMessage(
                .init(
                    appId: Self.appId, conversationId: "c_g", sender: sender, messageId: "m_\(sender)",
                    clientMessageId: nil, parts: [.text("hi")], metadata: nil, alert: nil, now: 20
                ))
        }
        await #expect(throws: DatabaseError.self) { try await fixture.store.apply(sends) }
        // Alice's and bob's sends of the failed batch took seq 6 and 7 in the writer's memory only: the next send
        // continues from what was committed.
        #expect(try await Self.send(from: "bob", in: fixture.store).get() == [6])
        let stored = try await fixture.store.events(appId: Self.appId, conversationId: "c_g", afterSeq: 0, limit: 20)
        #expect(stored.map(\.event.seq) == Array(1...6))
        try await fixture.close()
    }

    /// The unread counts read with a batch come from what its sends know when they can (``SendBatch/unread(_:)``):
    /// after every batch, each count asked for must be what a read of the database gives.
    @Test func unreadCountsWithABatchAreWhatTheDatabaseSays() async throws {
        let fixture = try await Fixture()
        let store = fixture.store
        func message(_ sender: String, _ id: String) -> Command {
            .sendMessage(
                .init(
                    appId: Self.appId, conversationId: "c_g", sender: sender, messageId: id, clientMessageId: nil,
                    parts: [.text("hi")], metadata: nil, alert: nil, now: 20
                ))
        }
        func receipt(_ uid: String, read: Int64) -> Command {
            .markReceipt(
                .init(appId: Self.appId, conversationId: "c_g", uid: uid, deliveredSeq: nil, readSeq: read, now: 21))
        }
        // Each batch asks for everyone's count in c_g, someone's who is not a participant, and bob's in c_g and a
        // conversation that is not there (no send read it: that one is read); what came with the batch must equal a
        // read after it.
        let asked = [
            ("alice", ["c_g"]), ("bob", ["c_g"]), ("dave", ["c_g"]), ("erin", ["c_g"]), ("bob", ["c_g", "c_none"]),
        ]
        func apply(_ commands: [Command]) async throws -> [String: Int] {
            let unread = try await store.apply(commands) { _ in
                asked.map {
                    UnreadRequest(appId: Self.appId, uid: $0.0, conversationIds: $0.1, everyConversation: false)
                }
            }.unread
            #expect(unread.count == asked.count)
            var totals: [String: Int] = [:]
            for (request, summary) in unread {
                let read = try await store.unread(
                    appId: Self.appId, uid: request.uid, conversationIds: request.conversationIds)
                #expect(summary == read, "\(request.uid) after \(commands.count) commands")
                totals[request.uid] = summary.total
            }
            return totals
        }
        // Alice created the group (seq 1-4, no messages): her first message is unread for bob and dave, not for her.
        #expect(try await apply([message("alice", "m1")]) == ["alice": 0, "bob": 1, "dave": 1, "erin": 0])
        #expect(try await apply([message("alice", "m2"), message("bob", "m3")])["dave"] == 3)
        // Sending reads the conversation: dave's count falls to 0 with his message, alice's and bob's rise.
        #expect(try await apply([message("dave", "m4")]) == ["alice": 2, "bob": 1, "dave": 0, "erin": 0])
        // A receipt in the batch, before a send to the same conversation, and one in a batch of its own.
        #expect(try await apply([receipt("alice", read: 8), message("bob", "m5")])["alice"] == 1)
        #expect(try await apply([receipt("dave", read: 9)])["dave"] == 0)
        #expect(try await apply([message("alice", "m6")])["dave"] == 1)
        // A deleted message past dave's read position is not counted.
        #expect(
            try await apply([
                .deleteMessage(
                    .init(appId: Self.appId, conversationId: "c_g", actor: "alice", messageId: "m6", now: 22)),
                message("bob", "m7"),
            ])["dave"] == 1)
        #expect(try await apply([message("alice", "m8")])["dave"] == 2)
        try await fixture.close()
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
