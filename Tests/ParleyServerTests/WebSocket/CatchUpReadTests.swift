import Foundation
import Logging
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore
import ParleyStoreSQLite
import ParleyTesting
import Testing

@testable import ParleyServer

/// A WebSocket handshake reads the user's positions, registers the connection, and reads them again only when the
/// writer may have stored something in between (``WriteEpoch``): the plan must be the one a second read gives.
@Suite(.timeLimit(.minutes(2))) struct CatchUpReadTests {
    /// The store's inline reads, counting the catch-up reads.
    final class CountingReads: InlineReads {
        let store: SQLiteStore
        let catchUps = NIOLockedValueBox(0)

        init(_ store: SQLiteStore) { self.store = store }

        func connectionOpening(tokenHash: [UInt8]) throws -> ConnectionOpening? {
            try store.connectionOpening(tokenHash: tokenHash)
        }

        func catchUpState(appId: String, uid: String, afterUserSeq: Int64, limit: Int) throws -> CatchUpState {
            catchUps.withLockedValue { $0 += 1 }
            return try store.catchUpState(appId: appId, uid: uid, afterUserSeq: afterUserSeq, limit: limit)
        }

        func contacts(of users: [(appId: String, uid: String)]) throws -> [[String]] {
            try store.contacts(of: users)
        }

        func unread(_ requests: [UnreadRequest]) throws -> [UnreadSummary] { try store.unread(requests) }
    }

    /// A gateway over a real SQLite store with alice, bob and a token of bob's, its writer running in `body`.
    func withGateway(
        _ body: (WebSocketGateway, SQLiteStore, CountingReads) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory(prefix: "parley-catch-up")
        let store = try openSQLiteStore(in: directory.path)
        try await store.insertApp(AppRecord(id: "app1", name: "A", authKeyHash: [1], restAPIKeyHash: [2], createdAt: 1))
        for uid in ["alice", "bob"] {
            try await store.insertUser(appId: "app1", User(uid: uid, name: uid, createdAt: 1, updatedAt: 1))
        }
        try await store.insertToken(
            TokenRecord(
                id: "t1", hash: try Authenticator.hash(of: "bob-token"), appId: "app1", uid: "bob", createdAt: 1)
        )
        let logger = Logger(label: "test")
        let time = ServerClock(timeline: Timeline(ContinuousClock()))
        let hub = Hub()
        let relay = Relay(hub: hub, cluster: nil)
        let typing = TypingTracker(store: store, relay: relay, timeout: .seconds(5), time: time, logger: logger)
        let unread = UnreadNotifier(store: store, hub: hub, interval: .seconds(1), time: time, logger: logger)
        let publisher = EventPublisher(
            hub: hub, typing: typing, unread: unread, relay: relay, cluster: nil, store: nil,
            positions: ConversationPositions(), logger: logger)
        let writer = CommandWriter(store: store, publisher: publisher, maxBatch: 16, logger: logger)
        let gateway = WebSocketGateway(
            authenticator: Authenticator(store: store, time: time), store: store, hub: hub, writer: writer,
            typing: typing,
            presence: PresenceTracker(
                store: store, relay: relay, cluster: nil, grace: .seconds(5), time: time, logger: logger),
            sockets: SocketRegistry(), expiry: TokenExpiry(time: time), admission: AdmissionGate(limit: 16), time: time,
            configuration: ServerConfiguration(), logger: logger
        )
        let running = Task { try await writer.run() }
        do {
            try await body(gateway, store, CountingReads(store))
        } catch {
            writer.stop()
            _ = await running.result
            throw error
        }
        writer.stop()
        try await running.value
    }

    func createGroup(_ id: String, _ gateway: WebSocketGateway, with participants: [String]) async throws {
        _ = try await gateway.writer.submit(
            .createConversation(
                .init(appId: "app1", newId: id, type: .group, creator: "alice", participants: participants, now: 2)
            )
        )
    }

    func send(_ text: String, to conversation: String, _ gateway: WebSocketGateway) async throws {
        _ = try await gateway.writer.submit(
            .sendMessage(
                .init(
                    appId: "app1", conversationId: conversation, sender: "alice", messageId: UUID().uuidString,
                    clientMessageId: nil, parts: [.text(text)], metadata: nil, alert: nil, now: 3
                )
            )
        )
    }

    /// The opening of bob's connection, once the writer has finished the batches it was given (it counts a batch
    /// finished just after answering its callers).
    func opening(_ gateway: WebSocketGateway, _ reads: CountingReads) async throws -> WebSocketGateway.Opening {
        #expect(await eventually { gateway.writer.epoch.quietMark() != nil })
        return try gateway.authenticate(token: "bob-token", inline: reads).get()
    }

    func plan(
        _ gateway: WebSocketGateway, _ opened: WebSocketGateway.Opening, resume: ResumeRequest? = nil,
        quiet: Bool = true, _ reads: CountingReads
    ) throws -> ReplayPlan {
        try gateway.replayPlan(
            principal: opened.principal, resume: resume, baseline: opened.baseline,
            quietMark: quiet ? opened.quietMark : nil, inline: reads
        )
    }

    @Test func withNothingWrittenSinceTheBaselineThePositionsAreNotReadAgain() async throws {
        try await withGateway { gateway, _, reads in
            try await createGroup("g1", gateway, with: ["bob"])
            try await send("one", to: "g1", gateway)
            let opened = try await opening(gateway, reads)
            #expect(opened.quietMark != nil)
            let skipped = try plan(gateway, opened, reads)
            #expect(reads.catchUps.withLockedValue { $0 } == 0)
            // The same plan as a second read makes.
            #expect(skipped == (try plan(gateway, opened, quiet: false, reads)))
            let g1 = try #require(opened.baseline.conversations["g1"])
            #expect(skipped.positions == ["g1": g1] && skipped.ranges.isEmpty)
            // A resume from the baseline's own userSeq needs no read either; its older position of g1 is replayed.
            let resumed = try plan(
                gateway, opened, resume: ResumeRequest(userSeq: opened.baseline.userSeq, conversations: ["g1": 1]),
                reads
            )
            #expect(reads.catchUps.withLockedValue { $0 } == 1)
            #expect(resumed.ranges == [ReplayPlan.Range(conversationId: "g1", after: 1, through: g1)])
        }
    }

    @Test func whatTheWriterStoresAfterTheBaselineIsReadAndReplayed() async throws {
        try await withGateway { gateway, _, reads in
            try await createGroup("g1", gateway, with: ["bob"])
            let opened = try await opening(gateway, reads)
            // Between the baseline and the registration: a message in g1, and bob added to a new group.
            try await send("one", to: "g1", gateway)
            try await createGroup("g2", gateway, with: ["bob"])
            let plan = try plan(gateway, opened, reads)
            #expect(reads.catchUps.withLockedValue { $0 } == 1)
            let g1 = try #require(opened.baseline.conversations["g1"])
            let g2 = try #require(plan.positions["g2"])
            #expect(plan.positions == ["g1": g1 + 1, "g2": g2])
            #expect(
                plan.ranges == [
                    ReplayPlan.Range(conversationId: "g1", after: g1, through: g1 + 1),
                    ReplayPlan.Range(conversationId: "g2", after: 0, through: g2),
                ]
            )
            #expect(plan.userSeq == opened.baseline.userSeq + 1)
        }
    }

    @Test func aResumeFromAnOlderUserSeqReadsItsMembershipChanges() async throws {
        try await withGateway { gateway, _, reads in
            try await createGroup("g1", gateway, with: ["bob"])
            try await createGroup("g2", gateway, with: ["bob"])
            let opened = try await opening(gateway, reads)
            #expect(opened.quietMark != nil && opened.baseline.userSeq == 2)
            let plan = try plan(gateway, opened, resume: ResumeRequest(userSeq: 1, conversations: ["g1": 1]), reads)
            #expect(reads.catchUps.withLockedValue { $0 } == 1)
            #expect(plan.userSeq == 2 && plan.positions == opened.baseline.conversations)
            // g2 was joined after userSeq 1: it is replayed from its start.
            #expect(plan.ranges.contains { $0.conversationId == "g2" && $0.after == 0 })
        }
    }

    /// The writer's batches count from before their transaction to after their publication: a mark taken while one
    /// is published (here, from its caller's completion, which runs in the publication) is no mark.
    @Test func noMarkIsTakenWhileABatchIsStoredOrPublished() async throws {
        try await withGateway { gateway, _, reads in
            let before = try #require(gateway.writer.epoch.quietMark())
            let during = NIOLockedValueBox<WriteEpoch.Mark??>(nil)
            try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
                gateway.writer.enqueue(
                    .createConversation(
                        .init(appId: "app1", newId: "g1", type: .group, creator: "alice", participants: [], now: 2)
                    )
                ) { result in
                    during.withLockedValue { $0 = .some(gateway.writer.epoch.quietMark()) }
                    done.resume(with: result.map { _ in () })
                }
            }
            #expect(during.withLockedValue { $0 } == .some(nil))
            #expect(!gateway.writer.epoch.unchanged(since: before))
            #expect(await eventually { gateway.writer.epoch.quietMark() != nil })
            let after = try #require(gateway.writer.epoch.quietMark())
            #expect(gateway.writer.epoch.unchanged(since: after))
            _ = reads
        }
    }
}
