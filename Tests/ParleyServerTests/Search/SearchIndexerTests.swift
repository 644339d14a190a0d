import Foundation
import Logging
import ParleyProtocol
import ParleyStore
import ParleyStoreSQLite
import ParleyTesting
import Testing

@testable import ParleyServer

/// The indexer files what the writer reports, an interval after its last filing, and nothing unreported (virtual
/// time; SQLite, which files after the commit).
@Suite(.timeLimit(.minutes(1))) struct SearchIndexerTests {
    @Test func reportedMessagesAreFiledAnIntervalAfterTheLastFiling() async throws {
        let directory = try TemporaryDirectory(prefix: "parley-search").path
        let store = try openSQLiteStore(in: directory)
        try await store.insertApp(
            AppRecord(id: "app", name: "app", authKeyHash: [1], restAPIKeyHash: [2], createdAt: 1)
        )
        for uid in ["alice", "bob"] {
            try await store.insertUser(appId: "app", User(uid: uid, name: uid, createdAt: 1, updatedAt: 1))
        }
        _ = try await store.apply([
            .createConversation(
                .init(appId: "app", newId: "c_1", type: .group, creator: "alice", participants: ["bob"], now: 1)
            )
        ])
        func send(_ text: String) async throws {
            let result = try await store.apply([
                .sendMessage(
                    .init(
                        appId: "app", conversationId: "c_1", sender: "bob", messageId: "m_\(text)",
                        clientMessageId: nil, parts: [.text(text)], metadata: nil, alert: nil, now: 2
                    )
                )
            ])
            _ = try result[0].get()
        }
        func found(_ word: String) async throws -> Bool {
            let page = try await store.searchMessages(
                MessageSearchRequest(
                    appId: "app", viewer: "alice", query: SearchQuery(terms: [.word(word, prefix: false)]), limit: 10
                )
            )
            return !page.messages.isEmpty
        }

        try await send("before")  // stored before the indexer runs: filed when it starts
        let clock = ManualClock()
        let indexer = SearchIndexer(
            store: store, interval: .seconds(1), time: ServerClock(timeline: Timeline(clock)),
            logger: Logger(label: "test")
        )
        let running = Task { try await indexer.run() }
        _ = await clock.sleeper(at: .seconds(1))
        #expect(try await found("before"))

        try await send("reported")
        indexer.messagesStored()
        #expect(try await !found("reported"), "filed an interval after the last filing, not at once")
        clock.advance(by: .seconds(1))
        _ = await clock.sleeper(at: .seconds(2))  // filed, waiting again
        #expect(try await found("reported"))

        // Nothing reported: the indexer waits for a report, not for the clock.
        try await send("unreported")
        clock.advance(by: .seconds(1))
        #expect(try await !found("unreported"))
        indexer.messagesStored()
        _ = await clock.sleeper(at: .seconds(3))
        #expect(try await found("unreported"))

        running.cancel()
        _ = await running.result
        try await store.close()
    }
}
