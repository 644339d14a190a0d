import Foundation
import ParleyProtocol
import ParleyStore
import ParleyTesting
import Testing

/// Message search on every backend (docs/PROTOCOL.md, "Search"): what is found, by whom, and what edits, deletions,
/// blocks and filters change.
extension StoreConformanceTests {
    /// Files what is waiting, then searches; the texts found, in order.
    func found(
        _ store: any ParleyStore, _ text: String, viewer: String? = "alice", conversationId: String? = nil,
        sender: String? = nil, hasFile: Bool = false, sentBefore: Int64? = nil, sentAfter: Int64? = nil,
        order: MessageSearchOrder = .newest, limit: Int = 50, appId: String = appId
    ) async throws -> [String] {
        try await fileEverything(store)
        let page = try await store.searchMessages(
            MessageSearchRequest(
                appId: appId, viewer: viewer, query: try SearchQuery.parse(text), conversationId: conversationId,
                sender: sender, hasFile: hasFile, sentBefore: sentBefore, sentAfter: sentAfter, order: order,
                limit: limit
            )
        )
        return page.messages.map { $0.text.isEmpty ? $0.files.map(\.name).joined() : $0.text }
    }

    func fileEverything(_ store: any ParleyStore) async throws {
        while try await store.fileSearchIndex(limit: 100) == 100 {}
    }

    func say(
        _ store: any ParleyStore, _ text: String, from sender: String, in conversationId: String = "c_g", at now: Int64
    )
        async throws -> Message
    {
        try await message(store, conversationId, from: sender, text: text, at: now)
    }

    @Test(arguments: Backend.allCases) func everyWordIsFoundFoldedAndTheLastOneAsAPrefix(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])
        _ = try await say(store, "Café MEETING at noon", from: "bob", at: 20)
        _ = try await say(store, "the meeting moved to Zürich", from: "carol", at: 21)
        _ = try await say(store, "Résumé attached; see §3 (final)", from: "alice", at: 22)

        #expect(try await found(store, "cafe") == ["Café MEETING at noon"])
        #expect(try await found(store, "ZURICH ") == ["the meeting moved to Zürich"])
        #expect(try await found(store, "meet") == ["the meeting moved to Zürich", "Café MEETING at noon"])
        #expect(try await found(store, "meet ").isEmpty, "a word followed by a space is whole")
        #expect(try await found(store, "noon meeting") == ["Café MEETING at noon"])
        #expect(try await found(store, "\"meeting at\"") == ["Café MEETING at noon"])
        #expect(try await found(store, "\"at meeting\"").isEmpty)
        #expect(try await found(store, "résumé final") == ["Résumé attached; see §3 (final)"])
        // What the engines would read as operators is text here.
        for hostile in [
            "meeting OR noon", "NOT meeting", "meeting*", "(noon", "col:meeting", "'noon'", "\"", "-x",
            "NEAR(a b)", "a & b | !c", "^zz", "meeting AND",
        ] {
            _ = try await found(store, hostile)
        }
        #expect(try await found(store, "meeting OR noon").isEmpty, "OR is a word that no message has")
        #expect(try await found(store, "(noon") == ["Café MEETING at noon"])
        #expect(try await found(store, "'noon'") == ["Café MEETING at noon"])
    }

    @Test(arguments: Backend.allCases) func aUserFindsOnlyWhatTheyCanRead(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])
        _ = try await group(store, id: "c_x", owner: "carol", members: ["dave"])
        _ = try await say(store, "secret plan one", from: "bob", at: 20)
        _ = try await say(store, "secret plan two", from: "dave", in: "c_x", at: 21)

        #expect(try await found(store, "secret") == ["secret plan one"])
        #expect(try await found(store, "secret", viewer: "carol") == ["secret plan two"])
        #expect(try await found(store, "secret", viewer: nil) == ["secret plan two", "secret plan one"])
        #expect(try await found(store, "secret", viewer: nil, appId: Self.otherApp).isEmpty)
        #expect(try await found(store, "secret", viewer: "mallory", appId: Self.otherApp).isEmpty)

        // Blocking hides the blocked user's messages from the blocker, not the other way round.
        _ = try await store.block(appId: Self.appId, blocker: "alice", blocked: "bob", now: 30)
        #expect(try await found(store, "secret").isEmpty)
        #expect(try await found(store, "secret", viewer: "bob") == ["secret plan one"])
        try await store.unblock(appId: Self.appId, blocker: "alice", blocked: "bob")
        #expect(try await found(store, "secret") == ["secret plan one"])

        // Leaving a conversation, or its deletion, takes its messages out of a user's search.
        _ = try await apply(
            store,
            .removeParticipant(.init(appId: Self.appId, conversationId: "c_g", actor: "bob", uid: "bob", now: 40))
        )
        #expect(try await found(store, "secret", viewer: "bob").isEmpty)
        _ = try await apply(
            store, .deleteConversation(.init(appId: Self.appId, conversationId: "c_x", actor: "carol", now: 41))
        )
        #expect(try await found(store, "secret", viewer: "carol").isEmpty)
        #expect(try await found(store, "secret", viewer: nil) == ["secret plan one"])
    }

    @Test(arguments: Backend.allCases) func editsAndDeletionsLeaveNoOldWordsToFind(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])
        let filed = try await say(store, "apple pie", from: "bob", at: 20)
        #expect(try await found(store, "apple") == ["apple pie"])
        _ = try await apply(store, edit(filed, by: "bob", text: "banana split"))
        #expect(try await found(store, "apple").isEmpty)
        #expect(try await found(store, "banana") == ["banana split"])
        _ = try await apply(store, delete(filed, by: "bob"))
        #expect(try await found(store, "banana").isEmpty)
        #expect(try await found(store, "split", viewer: nil).isEmpty)

        // Edited and deleted before the indexer files them: filed as they are then.
        let early = try await say(store, "cherry tart", from: "bob", at: 21)
        let gone = try await say(store, "plum jam", from: "bob", at: 22)
        _ = try await apply(store, edit(early, by: "bob", text: "durian tart"))
        _ = try await apply(store, delete(gone, by: "bob"))
        #expect(try await found(store, "tart") == ["durian tart"])
        #expect(try await found(store, "cherry").isEmpty)
        #expect(try await found(store, "plum").isEmpty)
        // Edited again once filed: the second edit finds the words the first one filed.
        _ = try await apply(store, edit(early, by: "bob", text: "fig tart", at: 50))
        #expect(try await found(store, "tart") == ["fig tart"])
    }

    @Test(arguments: Backend.allCases) func filtersNarrowTheSearch(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])
        _ = try await group(store, id: "c_two", members: ["bob"])
        // (A file message is sent at 20: first, so that the log's order and the times agree.)
        try await upload(store, "f_report", by: "bob")
        _ = try await apply(store, fileSend(from: "bob", files: ["f_report"]))
        _ = try await say(store, "report draft", from: "bob", at: 100)
        _ = try await say(store, "report final", from: "carol", at: 200)
        _ = try await say(store, "report elsewhere", from: "bob", in: "c_two", at: 300)

        #expect(
            try await found(store, "report", sender: "bob") == ["report elsewhere", "report draft", "f_report.png"])
        #expect(try await found(store, "report", conversationId: "c_two") == ["report elsewhere"])
        #expect(try await found(store, "report", sentBefore: 200) == ["report draft", "f_report.png"])
        #expect(
            try await found(store, "report", sentBefore: 301, sentAfter: 200) == ["report elsewhere", "report final"])
        #expect(try await found(store, "report", hasFile: true) == ["f_report.png"])
        #expect(try await found(store, "", hasFile: true) == ["f_report.png"])
        #expect(try await found(store, "f_rep", hasFile: true) == ["f_report.png"], "a file is found by its name")
    }

    @Test(arguments: Backend.allCases) func pagesCoverEveryResultOnceInEitherOrder(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])
        for index in 1...7 {
            let words = index == 4 ? "kiwi kiwi kiwi kiwi" : "kiwi lime mango pear"
            _ = try await say(store, "\(words) \(index)", from: "bob", at: Int64(100 + index))
        }
        try await fileEverything(store)
        for order in [MessageSearchOrder.newest, .relevance] {
            var seen: [String] = []
            var cursor: String?
            repeat {
                let page = try await store.searchMessages(
                    MessageSearchRequest(
                        appId: Self.appId, viewer: "alice", query: try SearchQuery.parse("kiwi "), order: order,
                        cursor: cursor, limit: 3
                    )
                )
                #expect(page.messages.count <= 3)
                seen += page.messages.compactMap(\.text)
                cursor = page.nextCursor
            } while cursor != nil
            #expect(seen.count == 7 && Set(seen).count == 7, "\(order): \(seen)")
            if order == .newest { #expect(seen.first == "kiwi lime mango pear 7") }
            if order == .relevance { #expect(seen.first == "kiwi kiwi kiwi kiwi 4") }
        }
        // A cursor of the other order, or not one of ours, is refused.
        for (cursor, order) in [
            ("r3", MessageSearchOrder.newest), ("p1", .relevance), ("x", .newest), ("r99999", .relevance),
        ] {
            await #expect(throws: DomainError.self) {
                _ = try await store.searchMessages(
                    MessageSearchRequest(
                        appId: Self.appId, viewer: "alice", query: try SearchQuery.parse("kiwi"), order: order,
                        cursor: cursor, limit: 3
                    )
                )
            }
        }
    }
}

/// History after a position (jump to a message, docs/PROTOCOL.md "Pagination"), on every backend.
extension StoreConformanceTests {
    @Test(arguments: Backend.allCases) func historyAfterAPositionIsOldestFirst(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])  // seq 1-3
        var sent: [Message] = []
        for index in 1...5 { sent.append(try await say(store, "m\(index)", from: "bob", at: Int64(100 + index))) }
        let reply = try await message(store, from: "alice", text: "r1", replyTo: sent[0].id, at: 200)
        let after = try await store.messages(
            appId: Self.appId, conversationId: "c_g", query: HistoryQuery(afterSeq: sent[1].seq, limit: 3)
        )
        #expect(after.messages.map(\.text) == ["m3", "m4", "m5"])
        let rest = try await store.messages(
            appId: Self.appId, conversationId: "c_g", query: HistoryQuery(afterSeq: sent[4].seq, limit: 3)
        )
        #expect(rest.messages.map(\.text) == ["r1"])
        let thread = try await store.messages(
            appId: Self.appId, conversationId: "c_g",
            query: HistoryQuery(afterSeq: 0, limit: 10, thread: sent[0].id)
        )
        #expect(thread.messages.map(\.id) == [reply.id] && thread.parent?.id == sent[0].id)
        #expect(after.lastSeq == reply.seq)
    }
}

extension StoreConformanceTests {
    /// A user in more conversations than a search names one by one (SQLite: 64) still finds only theirs.
    @Test(arguments: Backend.allCases) func aUserInManyConversationsFindsOnlyTheirs(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        for index in 0..<70 { _ = try await group(store, id: "c_\(index)", members: ["bob"]) }
        _ = try await group(store, id: "c_other", owner: "carol", members: ["dave"])
        _ = try await say(store, "needle of carol", from: "dave", in: "c_other", at: 100)
        for index in [0, 33, 69] { _ = try await say(store, "needle \(index)", from: "bob", in: "c_\(index)", at: 200) }
        #expect(Set(try await found(store, "needle")) == ["needle 0", "needle 33", "needle 69"])
        #expect(try await found(store, "needle", viewer: "carol") == ["needle of carol"])
        #expect(try await found(store, "needle", viewer: "erin").isEmpty, "no conversation, nothing found")
    }
}

extension StoreConformanceTests {
    /// A search that runs out of its time is stopped with `ERR_SEARCH_TIMEOUT`, and the reader serves the next one.
    /// SQLite's progress handler is asked every 100 steps: with a deadline already passed it stops the first statement
    /// that runs that long, which every search does. PostgreSQL's `statement_timeout` counts in milliseconds: see
    /// ``aPostgresSearchThatRunsOutOfTimeIsStopped()``.
    @Test func aSearchThatRunsOutOfTimeIsStopped() async throws {
        let store = try await prepared(.sqlite)
        _ = try await group(store, members: ["bob"])
        for index in 0..<50 { _ = try await say(store, "common word \(index)", from: "bob", at: 100 + Int64(index)) }
        try await fileEverything(store)
        func search(_ limit: Duration) async throws -> MessageSearchPage {
            try await store.searchMessages(
                MessageSearchRequest(
                    appId: Self.appId, viewer: nil, query: try SearchQuery.parse("common"), limit: 20,
                    timeLimit: limit)
            )
        }
        await #expect(throws: MessageSearch.timedOut(.nanoseconds(1))) { _ = try await search(.nanoseconds(1)) }
        #expect(try await search(MessageSearch.timeLimit).messages.count == 20)
    }

    /// On PostgreSQL: ranking 20,000 matches by relevance takes tens of milliseconds (40 ms here), far past a 1 ms
    /// `statement_timeout`, which stops it; the same search with the default limit answers.
    @Test(.enabled(if: PostgresTestDatabase.isConfigured, "needs PARLEY_TEST_DATABASE_URL (scripts/test)"))
    func aPostgresSearchThatRunsOutOfTimeIsStopped() async throws {
        let store = try await prepared(.postgres)
        _ = try await group(store, members: ["bob"])
        for batch in 0..<20 {
            let sends: [Command] = (0..<1_000).map { index in
                .sendMessage(
                    .init(
                        appId: Self.appId, conversationId: "c_g", sender: "bob",
                        messageId: "m_\(batch)_\(index)", clientMessageId: nil, parts: [.text("common word \(index)")],
                        metadata: nil, alert: nil, now: 100 + Int64(batch * 1_000 + index)
                    )
                )
            }
            _ = try await store.apply(sends)
        }
        func search(_ limit: Duration) async throws -> MessageSearchPage {
            try await store.searchMessages(
                MessageSearchRequest(
                    appId: Self.appId, viewer: nil, query: try SearchQuery.parse("common"), order: .relevance,
                    limit: 20, timeLimit: limit)
            )
        }
        await #expect(throws: MessageSearch.timedOut(.milliseconds(1))) { _ = try await search(.milliseconds(1)) }
        #expect(try await search(MessageSearch.timeLimit).messages.count == 20)
    }
}
