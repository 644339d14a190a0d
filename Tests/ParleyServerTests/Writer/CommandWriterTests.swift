import Foundation
import Logging
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore
import ParleyStoreSQLite
import ParleyTesting
import Testing

@testable import ParleyServer

/// The ordered writer, on a thread of its own (SQLite on a single node) or in two loops that store batch N+1 while
/// batch N is published: answers and publications must come in commit order, and the storing side must never run
/// more than one batch ahead.
@Suite(.timeLimit(.minutes(2))) struct CommandWriterTests {
    /// A writer over `store` on a single node, publishing to a hub nobody listens to.
    static func writer(store: SQLiteStore, maxBatch: Int, ownThread: Bool) -> CommandWriter {
        let logger = Logger(label: "test")
        let time = ServerClock(timeline: Timeline(ContinuousClock()))
        let hub = Hub()
        let relay = Relay(hub: hub, cluster: nil)
        let publisher = EventPublisher(
            hub: hub,
            typing: TypingTracker(store: store, relay: relay, timeout: .seconds(5), time: time, logger: logger),
            unread: UnreadNotifier(store: store, hub: hub, interval: .seconds(1), time: time, logger: logger),
            relay: relay, cluster: nil, store: nil, positions: ConversationPositions(), logger: logger
        )
        return CommandWriter(
            store: store, publisher: publisher, maxBatch: maxBatch, ownThread: ownThread, logger: logger
        )
    }

    @Test func aHandOffGivesEveryElementInOrderAndPutReturnsOnlyOnceItsElementIsTaken() async {
        let handOff = HandOff<Int>()
        let returned = NIOLockedValueBox(Set<Int>())
        let count = 500
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for value in 1...count {
                    await handOff.put(value)
                    returned.withLockedValue { _ = $0.insert(value) }
                    if value.isMultiple(of: 7) { await Task.yield() }
                }
                handOff.finish()
            }
            group.addTask {
                var expected = 1
                while true {
                    // Not taken yet, so the put that hands it over cannot have returned.
                    let early = returned.withLockedValue { $0.contains(expected) }
                    #expect(!early, "put(\(expected)) returned before its element was taken")
                    guard let value = await handOff.take() else { break }
                    #expect(value == expected)
                    expected += 1
                    if value.isMultiple(of: 5) { await Task.yield() }
                }
                #expect(expected == count + 1)
                // Finished and empty: it stays at the end.
                #expect(await handOff.take() == nil)
            }
        }
    }

    @Test func aHandOffFinishedWhileTheConsumerWaitsEndsIt() async {
        let handOff = HandOff<Int>()
        async let end = handOff.take()
        await Task.yield()
        handOff.finish()
        #expect(await end == nil)
    }

    /// Many small batches (on the writer's thread, or with storing and publishing overlapping all the time): each
    /// command is answered after the ones enqueued before it (one connection's sends keep their order) and the
    /// answers follow sequence order.
    @Test(arguments: [true, false]) func everyCommandIsAnsweredInCommitOrderAcrossSmallBatches(ownThread: Bool)
        async throws
    {
        let directory = try TemporaryDirectory(prefix: "parley-writer")
        let store = try SQLiteStore(path: directory.path + "/parley.sqlite")
        try await store.insertApp(AppRecord(id: "a", name: "a", authKeyHash: [1], restAPIKeyHash: [2], createdAt: 1))
        for uid in ["alice", "bob", "carol"] {
            try await store.insertUser(appId: "a", User(uid: uid, name: uid, createdAt: 1, updatedAt: 1))
        }
        _ = try await store.apply([
            .createConversation(
                .init(appId: "a", newId: "c_g", type: .group, creator: "alice", participants: ["bob", "carol"], now: 1)
            )
        ])
        let writer = Self.writer(store: store, maxBatch: 3, ownThread: ownThread)
        // (sender, the sender's own number, seq), in the order the answers came.
        let answers = NIOLockedValueBox([(String, Int, Int64)]())
        let perSender = 100

        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await writer.run() }
            try await withThrowingTaskGroup(of: Void.self) { senders in
                for sender in ["alice", "bob", "carol"] {
                    senders.addTask {
                        let done = AsyncStream.makeStream(of: Void.self)
                        for number in 0..<perSender {
                            let send = Command.SendMessage(
                                appId: "a", conversationId: "c_g", sender: sender, messageId: "m_\(sender)_\(number)",
                                clientMessageId: nil, parts: [.text("\(number)")], metadata: nil, alert: nil, now: 2
                            )
                            writer.enqueue(.sendMessage(send)) { result in
                                guard case .success(let outcome) = result,
                                    case .message(let message, false) = outcome.outcome
                                else {
                                    Issue.record("a send failed: \(result)")
                                    return
                                }
                                answers.withLockedValue { $0.append((sender, number, message.seq)) }
                                if number == perSender - 1 { done.continuation.finish() }
                            }
                            if number.isMultiple(of: 10) { await Task.yield() }
                        }
                        for await _ in done.stream {}
                    }
                }
                try await senders.waitForAll()
            }
            writer.stop()
            try await group.waitForAll()
        }

        let all = answers.withLockedValue { $0 }
        #expect(all.count == 3 * perSender)
        // Answered in commit order: one conversation, so in sequence order, with nothing skipped.
        #expect(all.map(\.2) == Array(5...Int64(4 + 3 * perSender)))  // 1-4: the creation and its 3 members
        for sender in ["alice", "bob", "carol"] {
            #expect(all.filter { $0.0 == sender }.map(\.1) == Array(0..<perSender))
        }
        try await store.close()
    }
    /// On the writer's own thread a batch's callers are answered before the next batch is stored (the store and
    /// publish loops take turns on one thread), so the writer is never between two batches' commits: each answer sees
    /// only its own batch started.
    @Test func onItsOwnThreadABatchIsAnsweredBeforeTheNextIsStored() async throws {
        let directory = try TemporaryDirectory(prefix: "parley-writer-turns")
        let store = try SQLiteStore(path: directory.path + "/parley.sqlite")
        try await store.insertApp(AppRecord(id: "a", name: "a", authKeyHash: [1], restAPIKeyHash: [2], createdAt: 1))
        try await store.insertUser(appId: "a", User(uid: "alice", name: "alice", createdAt: 1, updatedAt: 1))
        let writer = Self.writer(store: store, maxBatch: 3, ownThread: true)
        // Every command queued before the writer runs: it finds the next batch waiting after each commit.
        let seen = NIOLockedValueBox([UInt64]())
        for number in 0..<9 {
            let create = Command.CreateConversation(
                appId: "a", newId: "c_\(number)", type: .group, creator: "alice", participants: [], now: 1
            )
            writer.enqueue(.createConversation(create)) { result in
                if case .failure(let error) = result { Issue.record("\(error)") }
                seen.withLockedValue { $0.append(writer.epoch.batches.started) }
            }
        }
        let running = Task { try await writer.run() }
        writer.stop()
        try await running.value
        #expect(seen.withLockedValue { $0 } == [1, 1, 1, 2, 2, 2, 3, 3, 3])
        try await store.close()
    }

    /// Stopping: what was queued before is still stored and answered, what comes after is refused, and `run()`
    /// returns once the queue is empty.
    @Test(arguments: [true, false]) func commandsQueuedBeforeStopAreAppliedAndLaterOnesRefused(ownThread: Bool)
        async throws
    {
        let directory = try TemporaryDirectory(prefix: "parley-writer-stop")
        let store = try SQLiteStore(path: directory.path + "/parley.sqlite")
        try await store.insertApp(AppRecord(id: "a", name: "a", authKeyHash: [1], restAPIKeyHash: [2], createdAt: 1))
        try await store.insertUser(appId: "a", User(uid: "alice", name: "alice", createdAt: 1, updatedAt: 1))
        _ = try await store.apply([
            .createConversation(
                .init(appId: "a", newId: "c_g", type: .group, creator: "alice", participants: [], now: 1)
            )
        ])
        let writer = Self.writer(store: store, maxBatch: 4, ownThread: ownThread)
        let seqs = NIOLockedValueBox([Int64]())
        let refusals = NIOLockedValueBox([ErrorCode]())
        func send(_ number: Int) {
            let send = Command.SendMessage(
                appId: "a", conversationId: "c_g", sender: "alice", messageId: "m_\(number)", clientMessageId: nil,
                parts: [.text("\(number)")], metadata: nil, alert: nil, now: 2
            )
            writer.enqueue(.sendMessage(send)) { result in
                switch result {
                case .success(let outcome):
                    if case .message(let message, _) = outcome.outcome {
                        seqs.withLockedValue { $0.append(message.seq) }
                    }
                case .failure(let error):
                    refusals.withLockedValue { $0.append((error as? DomainError)?.code ?? .internalError) }
                }
            }
        }
        // Queued before the writer runs, then stopped: it must still take all of them before it returns.
        for number in 0..<50 { send(number) }
        writer.stop()
        send(50)
        try await writer.run()
        #expect(seqs.withLockedValue { $0 } == Array(3...52))  // 1-2: the creation and its creator
        #expect(refusals.withLockedValue { $0 } == [.serverShuttingDown])
        try await store.close()
    }
    /// A cancelled writer (its service group cancels it when another service fails) stops like a stopped one: every
    /// command queued is answered and `run()` returns. On its own thread they are also stored; in the overlapping
    /// loops the store's async calls see the cancellation and refuse (GRDB throws `CancellationError`).
    @Test(arguments: [true, false]) func aCancelledWriterAnswersWhatWasQueuedAndReturns(ownThread: Bool) async throws {
        let directory = try TemporaryDirectory(prefix: "parley-writer-cancel")
        let store = try SQLiteStore(path: directory.path + "/parley.sqlite")
        try await store.insertApp(AppRecord(id: "a", name: "a", authKeyHash: [1], restAPIKeyHash: [2], createdAt: 1))
        try await store.insertUser(appId: "a", User(uid: "alice", name: "alice", createdAt: 1, updatedAt: 1))
        let writer = Self.writer(store: store, maxBatch: 4, ownThread: ownThread)
        let answers = NIOLockedValueBox((succeeded: 0, failed: 0))
        let running = Task { try await writer.run() }
        for number in 0..<20 {
            let create = Command.CreateConversation(
                appId: "a", newId: "c_\(number)", type: .group, creator: "alice", participants: [], now: 1
            )
            writer.enqueue(.createConversation(create)) { result in
                answers.withLockedValue {
                    if case .success = result { $0.succeeded += 1 } else { $0.failed += 1 }
                }
            }
        }
        running.cancel()
        try await running.value
        let (succeeded, failed) = answers.withLockedValue { $0 }
        #expect(succeeded + failed == 20)
        if ownThread { #expect(succeeded == 20) }
        try await store.close()
    }
}
