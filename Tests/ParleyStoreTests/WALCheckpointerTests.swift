import Foundation
import GRDB
import ParleyProtocol
import ParleyStore
import ParleyTesting
import Testing

@testable import ParleyStoreSQLite

/// The SQLite store's WAL is copied back by ``WALCheckpointer`` on its own connection, never by the writer at a
/// commit, and stays bounded while messages keep coming (docs/BENCHMARKS.md, appendix "Design notes", "WAL checkpoints off the writer").
@Suite struct WALCheckpointerTests {
    static let appId = "app1"

    /// The test's own connections wait for a lock as the store's do, instead of failing at once with "database is
    /// locked" (SQLite's default): the store's checkpointer may hold the WAL's checkpoint lock when the observer asks
    /// for its own passive checkpoint (seen once under the whole suite's load).
    static var waiting: Configuration {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        return configuration
    }

    @Test func theCheckpointerCopiesTheWALBackAndTheWriterStartsItAgain() async throws {
        let directory = try TemporaryDirectory(prefix: "parley-checkpoint")
        let path = directory.path + "/parley.sqlite"
        let threshold = 64
        let store = try await Self.storeWithGroup(path: path, checkpointThreshold: threshold)

        // 3,000 messages in 300 commits: many times the threshold's worth of WAL frames.
        for batch in 0..<300 {
            let sends = (0..<10).map {
                Self.send(from: "alice", id: "m_\(batch)_\($0)", text: String(repeating: "x", count: 200))
            }
            for result in try await store.apply(sends) { _ = try result.get() }
        }
        await store.checkpointer.waitUntilIdle()
        #expect(store.checkpointer.rounds > 0)

        // Everything was copied back, so the next commit starts the WAL from its beginning: it then holds only that
        // commit's frames. Without the checkpointer it would hold every frame written above (SQLite's own checkpoint
        // is off, and 10,000 pages were never reached).
        _ = try await store.apply([Self.send(from: "bob", id: "m_last", text: "last")])[0].get()
        let observer = try DatabaseQueue(path: path, configuration: Self.waiting)
        let frames = try await observer.writeWithoutTransaction { db in try db.checkpoint(.passive).walFrameCount }
        #expect(frames > 0 && frames < threshold)

        // A closed store leaves an empty WAL, also while another connection keeps the file open (SQLite then does not
        // delete the WAL at the last close): the database file alone holds everything.
        try await store.close()
        let walSize = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int
        #expect(walSize == 0)
        try observer.close()
        // Nothing lost on the way: a reopened store reads every message.
        let reopened = try SQLiteStore(path: path)
        let newest = try await reopened.messages(
            appId: Self.appId, conversationId: "c_g", query: HistoryQuery(limit: 1)
        ).messages
        #expect(newest.map(\.id) == ["m_last"])
        try await reopened.close()
        let reader = try DatabaseQueue(path: path, configuration: Self.waiting)
        let stored = try await reader.read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM events WHERE name = 'conversationMessage.sent'")
        }
        try reader.close()
        #expect(stored == 3_001)
    }

    /// Readers keep reading while the checkpointer copies and restarts the WAL under them: every read sees a whole
    /// committed state (counts never go back), the writer is never refused, and the WAL still restarts.
    @Test func readersAndTheWriterGoOnWhileTheCheckpointerRuns() async throws {
        let directory = try TemporaryDirectory(prefix: "parley-checkpoint")
        let path = directory.path + "/parley.sqlite"
        let store = try await Self.storeWithGroup(path: path, checkpointThreshold: 32)
        let batches = 200
        let perBatch = 5
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<3 {
                group.addTask {
                    var last = 0
                    while last < batches * perBatch {
                        let everything = UnreadRequest(appId: Self.appId, uid: "bob", conversationIds: [])
                        // The readers' own read (InlineReads), on this thread.
                        let reads: any InlineReads = store
                        let total = try reads.unread([everything])[0].total
                        #expect(total >= last && total % perBatch == 0)
                        last = total
                        await Task.yield()
                    }
                }
            }
            group.addTask {
                for batch in 0..<batches {
                    let sends = (0..<perBatch).map {
                        Self.send(from: "alice", id: "m_\(batch)_\($0)", text: String(repeating: "y", count: 300))
                    }
                    for result in try await store.apply(sends) { _ = try result.get() }
                }
            }
            try await group.waitForAll()
        }
        await store.checkpointer.waitUntilIdle()
        #expect(store.checkpointer.rounds > 0)
        #expect(try await store.unread(appId: Self.appId, uid: "bob", conversationIds: nil).total == batches * perBatch)
        try await store.close()
    }

    /// Below the restart threshold a round only copies (PASSIVE), never holding the writer off: the WAL grows instead,
    /// and nothing is lost.
    @Test func roundsBelowTheRestartThresholdNeverRestartTheWAL() async throws {
        let directory = try TemporaryDirectory(prefix: "parley-checkpoint")
        let path = directory.path + "/parley.sqlite"
        let store = try await Self.storeWithGroup(path: path, checkpointThreshold: 32, restartThreshold: 1_000_000)
        // Four senders keep the writer committing while the checkpointer copies, so rounds end with frames left.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for sender in 0..<4 {
                group.addTask {
                    for batch in 0..<100 {
                        let text = String(repeating: "z", count: 200)
                        let sends = (0..<10).map {
                            Self.send(from: "alice", id: "m_\(sender)_\(batch)_\($0)", text: text)
                        }
                        for result in try await store.apply(sends) { _ = try result.get() }
                    }
                }
            }
            try await group.waitForAll()
        }
        await store.checkpointer.waitUntilIdle()
        #expect(store.checkpointer.rounds > 0)
        #expect(store.checkpointer.restarts == 0)
        #expect(try await store.unread(appId: Self.appId, uid: "bob", conversationIds: nil).total == 4_000)
        try await store.close()
        directory.remove()
    }

    /// The writer and the checkpointer wait for each other's locks by trying again every 100 µs (not SQLite's 1, 2,
    /// 5, 10... ms steps), for at least the time given, then give up.
    @Test func aLockedDatabaseIsTriedAgainEveryIntervalUntilTheTimeIsUp() throws {
        guard case .callback(let tryAgain) = Database.BusyMode.polling(seconds: 0.002, interval: 100) else {
            Issue.record("not a callback")
            return
        }
        #expect((0..<20).allSatisfy { tryAgain($0) })
        #expect(!tryAgain(20))

        // A write that finds another connection's write transaction is refused once its tries are used up (2 ms
        // here); once that transaction ends, writes go on.
        let directory = try TemporaryDirectory(prefix: "parley-busy")
        var configuration = Configuration()
        configuration.busyMode = .polling(seconds: 10)
        let pool = try DatabasePool(path: directory.path + "/db.sqlite", configuration: configuration)
        try pool.write { db in try db.execute(sql: "CREATE TABLE t (x INTEGER)") }
        let other = try DatabaseQueue(path: directory.path + "/db.sqlite")
        var quick = Configuration()
        quick.busyMode = .polling(seconds: 0.002)
        let refused = try DatabaseQueue(path: directory.path + "/db.sqlite", configuration: quick)
        try other.inDatabase { db in
            try db.execute(sql: "BEGIN IMMEDIATE")
            try db.execute(sql: "INSERT INTO t (x) VALUES (1)")
            #expect(throws: DatabaseError.self) {
                try refused.write { db in try db.execute(sql: "INSERT INTO t (x) VALUES (2)") }
            }
            try db.execute(sql: "COMMIT")
        }
        try refused.write { db in try db.execute(sql: "INSERT INTO t (x) VALUES (3)") }
        try pool.write { db in try db.execute(sql: "INSERT INTO t (x) VALUES (4)") }
        #expect(try pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") } == 3)
        try refused.close()
        try other.close()
        try pool.close()
        directory.remove()
    }

    /// A store at `path` with an app, alice and bob, and their group `c_g`; its checkpoint rounds end with a RESTART
    /// from `restartThreshold` frames on (by default every round does, unless it copied everything).
    static func storeWithGroup(
        path: String, checkpointThreshold: Int = SQLiteStore.defaultCheckpointThreshold, restartThreshold: Int? = nil
    ) async throws
        -> SQLiteStore
    {
        let store = try SQLiteStore(
            path: path, checkpointThreshold: checkpointThreshold,
            restartThreshold: restartThreshold ?? checkpointThreshold
        )
        try await store.insertApp(AppRecord(id: appId, name: "A", authKeyHash: [1], restAPIKeyHash: [2], createdAt: 1))
        for uid in ["alice", "bob"] {
            try await store.insertUser(appId: appId, User(uid: uid, name: uid, createdAt: 1, updatedAt: 1))
        }
        _ = try await store.apply([
            .createConversation(
                .init(
                    appId: appId, newId: "c_g", type: .group, creator: "alice", participants: ["bob"], name: "G",
                    isPublic: false, now: 1)
            )
        ])[0].get()
        return store
    }

    /// A message to `c_g`.
    static func send(from sender: String, id: String, text: String) -> Command {
        .sendMessage(
            .init(
                appId: appId, conversationId: "c_g", sender: sender, messageId: id, clientMessageId: nil,
                parts: [.text(text)], metadata: nil, alert: nil, now: 2
            )
        )
    }
}
