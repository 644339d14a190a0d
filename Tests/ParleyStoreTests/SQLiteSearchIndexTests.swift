import Foundation
import ParleyProtocol
import ParleyStore
import ParleyTesting
import Testing

@testable import ParleyStoreSQLite

/// SQLite's search index is a file of its own, derived from the database (docs/DEPLOYMENT.md, "Backup and restore"):
/// made again when missing or made for another database, and a deleted message is never answered while its refiling
/// waits.
@Suite struct SQLiteSearchIndexTests {
    static let appId = "app"

    static func store(in directory: TemporaryDirectory, texts: [String]) async throws -> SQLiteStore {
        let store = try SQLiteStore(path: directory.path + "/parley.sqlite")
        try await store.insertApp(AppRecord(id: appId, name: "a", authKeyHash: [1], restAPIKeyHash: [2], createdAt: 1))
        for uid in ["alice", "bob"] {
            try await store.insertUser(appId: appId, User(uid: uid, name: uid, createdAt: 1, updatedAt: 1))
        }
        _ = try await store.apply([
            .createConversation(
                .init(appId: appId, newId: "c_1", type: .group, creator: "alice", participants: ["bob"], now: 1)
            )
        ])
        for (index, text) in texts.enumerated() { _ = try await send(store, text, id: "m_\(index)") }
        return store
    }

    static func send(_ store: SQLiteStore, _ text: String, id: String) async throws -> Message {
        let result = try await store.apply([
            .sendMessage(
                .init(
                    appId: appId, conversationId: "c_1", sender: "bob", messageId: id, clientMessageId: nil,
                    parts: [.text(text)], metadata: nil, alert: nil, now: 2
                )
            )
        ])[0].get()
        guard case .message(let message, _) = result.outcome else { throw StoreTestError.noMessage }
        return message
    }

    static func found(_ store: SQLiteStore, _ word: String) async throws -> [String] {
        try await store.searchMessages(
            MessageSearchRequest(
                appId: appId, viewer: "alice", query: SearchQuery(terms: [.word(word, prefix: false)]), limit: 10
            )
        ).messages.map(\.text)
    }

    @Test func anIndexMadeForAnotherDatabaseOrMissingIsMadeAgain() async throws {
        let first = try TemporaryDirectory(prefix: "parley-search-a")
        let second = try TemporaryDirectory(prefix: "parley-search-b")
        let a = try await Self.store(in: first, texts: ["apple one", "apple two", "apple three"])
        while try await a.fileSearchIndex(limit: 100) == 100 {}
        #expect(try await Self.found(a, "apple").count == 3)
        try await a.close()
        let b = try await Self.store(in: second, texts: ["banana"])
        while try await b.fileSearchIndex(limit: 100) == 100 {}
        try await b.close()

        // a's index beside b's database: the positions it holds would name b's messages.
        for suffix in ["", "-wal", "-shm"] {
            let source = first.path + "/parley-search.sqlite" + suffix
            let target = second.path + "/parley-search.sqlite" + suffix
            try? FileManager.default.removeItem(atPath: target)
            if FileManager.default.fileExists(atPath: source) {
                try FileManager.default.copyItem(atPath: source, toPath: target)
            }
        }
        let reopened = try SQLiteStore(path: second.path + "/parley.sqlite")
        #expect(try await Self.found(reopened, "apple").isEmpty)
        #expect(try await Self.found(reopened, "banana").isEmpty, "made again: nothing filed yet")
        while try await reopened.fileSearchIndex(limit: 100) == 100 {}
        #expect(try await Self.found(reopened, "banana") == ["banana"])
        try await reopened.close()

        // Missing: made again from the log.
        for suffix in ["", "-wal", "-shm"] {
            try? FileManager.default.removeItem(atPath: first.path + "/parley-search.sqlite" + suffix)
        }
        let again = try SQLiteStore(path: first.path + "/parley.sqlite")
        while try await again.fileSearchIndex(limit: 100) == 100 {}
        #expect(try await Self.found(again, "apple").count == 3)
        try await again.close()
    }

    @Test func aDeletedMessageIsNotAnsweredWhileItsRefilingWaits() async throws {
        let directory = try TemporaryDirectory(prefix: "parley-search-c")
        let store = try await Self.store(in: directory, texts: [])
        let message = try await Self.send(store, "zebra crossing", id: "m_z")
        while try await store.fileSearchIndex(limit: 100) == 100 {}
        _ = try await store.apply([
            .deleteMessage(.init(appId: Self.appId, conversationId: "c_1", actor: "bob", messageId: message.id, now: 3))
        ])[0].get()
        #expect(try await Self.found(store, "zebra").isEmpty, "the index still has it; the tombstone is left out")
        while try await store.fileSearchIndex(limit: 100) == 100 {}
        #expect(try await Self.found(store, "zebra").isEmpty)
        try await store.close()
    }
}

extension SQLiteSearchIndexTests {
    @Test func twoFilersAtOnceFileEveryMessageOnce() async throws {
        let directory = try TemporaryDirectory(prefix: "parley-search-d")
        let store = try await Self.store(in: directory, texts: (0..<700).map { "word \($0)" })
        @Sendable func fileAll() async throws {
            while try await store.fileSearchIndex(limit: 64) == 64 {}
        }
        async let first: Void = fileAll()
        async let second: Void = fileAll()
        _ = try await (first, second)
        var seen: [String] = []
        var cursor: String?
        repeat {
            let page = try await store.searchMessages(
                MessageSearchRequest(
                    appId: Self.appId, viewer: "alice", query: SearchQuery(terms: [.word("word", prefix: false)]),
                    cursor: cursor, limit: 200
                )
            )
            seen += page.messages.map(\.text)
            cursor = page.nextCursor
        } while cursor != nil
        #expect(seen.count == 700 && Set(seen).count == 700)
        try await store.close()
    }
}

extension SQLiteSearchIndexTests {
    @Test func aDamagedIndexIsMadeAgainAndNeverStopsTheStore() async throws {
        let directory = try TemporaryDirectory(prefix: "parley-search-e")
        let store = try await Self.store(in: directory, texts: ["kiwi one", "kiwi two"])
        try await store.close()
        for suffix in ["-wal", "-shm"] {
            try? FileManager.default.removeItem(atPath: directory.path + "/parley-search.sqlite" + suffix)
        }
        try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: directory.path + "/parley-search.sqlite"))
        let reopened = try SQLiteStore(path: directory.path + "/parley.sqlite")
        while try await reopened.fileSearchIndex(limit: 100) == 100 {}
        #expect(try await Self.found(reopened, "kiwi").count == 2)
        try await reopened.close()
    }
}
