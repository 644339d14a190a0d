import Foundation
import ParleyProtocol
import ParleyStore
import Testing

/// Commands applied one batch (one transaction) after another: a send sees what every earlier batch did, however
/// much a store keeps in memory between batches (the SQLite writer keeps the conversations its sends read).
extension StoreConformanceTests {
    /// The sequence numbers a send took in its own batch, or its refusal.
    func sendAlone(_ store: any ParleyStore, _ conversationId: String = "c_g", from sender: String) async throws
        -> Result<[Int64], DomainError>
    {
        try await store.apply([send(store, conversationId, from: sender)])[0].map { $0.events.compactMap(\.event.seq) }
    }

    @Test(arguments: Backend.allCases) func sequenceNumbersContinueFromBatchToBatch(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])  // seq 1-3
        #expect(try await sendAlone(store, from: "alice").get() == [4])
        #expect(try await sendAlone(store, from: "bob").get() == [5])
        _ = try await store.apply([
            .markReceipt(
                .init(appId: Self.appId, conversationId: "c_g", uid: "bob", deliveredSeq: nil, readSeq: 5, now: 40))
        ])
        #expect(try await sendAlone(store, from: "alice").get() == [6])
        let stored = try await store.events(appId: Self.appId, conversationId: "c_g", afterSeq: 0, limit: 20)
        #expect(stored.map(\.event.seq) == Array(1...6))
        #expect(try await store.unread(appId: Self.appId, uid: "bob", conversationIds: nil).total == 1)
    }

    @Test(arguments: Backend.allCases) func aParticipantRemovedInAnEarlierBatchCannotSendOrReceive(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])
        #expect(try await sendAlone(store, from: "bob").get() == [5])
        _ = try await apply(store, remove("bob", by: "alice"))  // 6
        #expect(try await sendAlone(store, from: "bob").failureCode == .conversationNotFound)
        let next = try await store.apply([send(store, "c_g", from: "carol")])[0].get()
        #expect(next.events.compactMap(\.event.seq) == [7])
        #expect(Set(next.recipients) == ["alice", "carol"])
    }

    @Test(arguments: Backend.allCases) func aParticipantAddedInAnEarlierBatchCanSendAndReceives(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])
        #expect(try await sendAlone(store, from: "alice").get() == [4])
        #expect(try await sendAlone(store, from: "dave").failureCode == .conversationNotFound)
        _ = try await apply(store, add("dave"))  // 5
        let fromDave = try await store.apply([send(store, "c_g", from: "dave")])[0].get()
        #expect(fromDave.events.compactMap(\.event.seq) == [6])
        #expect(Set(fromDave.recipients) == ["alice", "bob", "dave"])
    }

    @Test(arguments: Backend.allCases) func aConversationDeletedInAnEarlierBatchRefusesSendsUntilRestored(
        _ backend: Backend
    ) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])
        #expect(try await sendAlone(store, from: "bob").get() == [4])
        _ = try await apply(store, .deleteConversation(action("c_g", by: "alice")))  // 5
        #expect(try await sendAlone(store, from: "bob").failureCode == .conversationNotFound)
        _ = try await apply(store, .undeleteConversation(action("c_g", by: "alice")))  // 6
        #expect(try await sendAlone(store, from: "bob").get() == [7])
    }

    @Test(arguments: Backend.allCases) func aConversationCreatedAfterASendToItsIdWasRefusedTakesSends(
        _ backend: Backend
    ) async throws {
        let store = try await prepared(backend)
        // Refused first (no such conversation); a store that remembered "none" must see it once it exists.
        #expect(try await sendAlone(store, "c_late", from: "alice").failureCode == .conversationNotFound)
        _ = try await group(store, id: "c_late", members: ["bob"])
        #expect(try await sendAlone(store, "c_late", from: "bob").get() == [4])
    }
}
