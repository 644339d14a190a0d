import Foundation
import GRDB
import ParleyProtocol
import ParleyStore
import ParleyTesting
import Testing

@testable import ParleyStoreSQLite

/// Messages are found by id and by client message id whether they are filed (`message_ids`, `client_message_ids`) or
/// still in the log's tail, filed every ``SQLiteStore/logIndexInterval`` events; after a crash the tail is filed when
/// the store opens, and nothing is found twice or lost.
@Suite(StoreCleanup()) struct SQLiteLogIndexTests {
    static let appId = "app1"

    private static func open(_ path: String) async throws -> SQLiteStore {
        let store = try SQLiteStore(path: path)
        await StoreCleanup.register(store)
        return store
    }

    /// A new store with alice's group `c_g` with bob.
    private static func storeWithGroup(_ path: String) async throws -> SQLiteStore {
        let store = try await WALCheckpointerTests.storeWithGroup(path: path)
        await StoreCleanup.register(store)
        return store
    }

    private static func send(_ number: Int, from sender: String = "alice", text: String? = nil) -> Command {
        .sendMessage(
            .init(
                appId: appId, conversationId: "c_g", sender: sender, messageId: "m_\(number)",
                clientMessageId: "client-\(number)", parts: [.text(text ?? "message \(number)")], metadata: nil,
                alert: nil, now: 20 + Int64(number)))
    }

    /// Sends `numbers`, `perBatch` to a batch; returns each message's seq.
    private static func sendAll(_ numbers: Range<Int>, perBatch: Int, to store: SQLiteStore) async throws -> [Int:
        Int64]
    {
        var seqs: [Int: Int64] = [:]
        for start in stride(from: numbers.lowerBound, to: numbers.upperBound, by: perBatch) {
            let batch = Array(start..<min(start + perBatch, numbers.upperBound))
            let results = try await store.apply(batch.map { send($0) })
            for (number, result) in zip(batch, results) {
                guard case .message(let message, let duplicate) = try result.get().outcome else {
                    Issue.record("send \(number) answered \(try result.get().outcome)")
                    continue
                }
                #expect(!duplicate)
                seqs[number] = message.seq
            }
        }
        return seqs
    }

    /// Where filing stands: the last position filed, the log's end, the client ids filed, and the client ids of the
    /// log up to the last position filed.
    private static func state(_ store: SQLiteStore) async throws -> (
        indexedThrough: Int64, last: Int64, filed: Int, toFile: Int
    ) {
        try await store.pool.read { db in
            let through = try SQLiteStore.indexedThrough(db)
            return (
                through, try SQLiteStore.lastLogPosition(db),
                try Int.fetchOne(db, sql: "SELECT count(*) FROM client_message_ids") ?? 0,
                try Int.fetchOne(
                    db, sql: "SELECT count(*) FROM events WHERE position <= ? AND client_message_id IS NOT NULL",
                    arguments: [through]) ?? -1
            )
        }
    }

    /// Every message by id (readers) and every client id repeated (the writer) finds the first message, filed or not.
    private static func expectFound(_ seqs: [Int: Int64], in store: SQLiteStore) async throws {
        for (number, seq) in seqs {
            let message = try await store.message(
                appId: appId, conversationId: "c_g", messageId: "m_\(number)", viewer: nil)
            #expect(message?.seq == seq, "m_\(number) by id")
        }
        let repeats = try await store.apply(seqs.keys.sorted().map { send($0, text: "again") })
        for (number, result) in zip(seqs.keys.sorted(), repeats) {
            guard case .message(let message, let duplicate) = try result.get().outcome else {
                Issue.record("repeat \(number) answered \(try result.get().outcome)")
                continue
            }
            #expect(duplicate && message.seq == seqs[number] && message.text == "message \(number)", "repeat \(number)")
        }
    }

    @Test func messagesAreFoundFiledAndInTheTailAndTheTailIsFiledInSteps() async throws {
        let directory = try TemporaryDirectory(prefix: "parley-log-index")
        let store = try await Self.storeWithGroup(directory.path + "/parley.sqlite")
        let interval = Int(SQLiteStore.logIndexInterval)
        // Batches of 7: the tail is filed by the batch that takes it past the interval, not one message later.
        let seqs = try await Self.sendAll(0..<(interval * 2 + 40), perBatch: 7, to: store)
        let (through, last, filed, toFile) = try await Self.state(store)
        #expect(through > SQLiteStore.logIndexInterval && last - through < SQLiteStore.logIndexInterval)
        #expect(last > through, "the last messages are in the tail")
        #expect(filed == toFile && filed > interval)
        try await Self.expectFound(seqs, in: store)
        // Repeats store nothing: the log did not grow.
        #expect(try await Self.state(store).last == last)

        // An edit and a reaction find a filed message and one in the tail, and a reply names either.
        let filedOne = try #require(seqs.min { $0.value < $1.value }?.key)
        let tailOne = try #require(seqs.max { $0.value < $1.value }?.key)
        for number in [filedOne, tailOne] {
            let results = try await store.apply([
                .editMessage(
                    .init(
                        appId: Self.appId, conversationId: "c_g", actor: "alice", messageId: "m_\(number)",
                        parts: [.text("edited \(number)")], now: 99_000)),
                .react(
                    .init(
                        appId: Self.appId, conversationId: "c_g", actor: "bob", messageId: "m_\(number)", key: "👍",
                        add: true, now: 99_000)),
            ])
            for result in results { _ = try result.get() }
            let message = try await store.message(
                appId: Self.appId, conversationId: "c_g", messageId: "m_\(number)", viewer: "bob")
            #expect(message?.text == "edited \(number)")
            #expect(message?.reactions?.first?.reacted == true)
        }
    }

    @Test func aCrashBeforeTheTailIsFiledLosesNothingAndStoresNothingTwice() async throws {
        let directory = try TemporaryDirectory(prefix: "parley-log-index-crash")
        let path = directory.path + "/parley.sqlite"
        let store = try await Self.storeWithGroup(path)
        let seqs = try await Self.sendAll(0..<(Int(SQLiteStore.logIndexInterval) + 100), perBatch: 3, to: store)
        let before = try await Self.state(store)
        #expect(before.last > before.indexedThrough)
        // The files as a crash leaves them: the database and its WAL, copied while the store is open.
        let image = try TemporaryDirectory(prefix: "parley-log-index-image")
        for suffix in ["", "-wal"] {
            try FileManager.default.copyItem(atPath: path + suffix, toPath: image.path + "/parley.sqlite" + suffix)
        }
        let reopened = try await Self.open(image.path + "/parley.sqlite")
        let after = try await Self.state(reopened)
        #expect(after.last == before.last)
        #expect(after.indexedThrough == after.last, "the tail is filed at open")
        #expect(after.filed == seqs.count)
        try await Self.expectFound(seqs, in: reopened)
        // The next message continues the conversation.
        let next = try await reopened.apply([Self.send(10_000)])[0].get().events.first?.event.seq
        #expect(next == seqs.values.max()! + 1)
    }
}
