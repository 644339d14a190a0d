import Foundation
import ParleyProtocol
import ParleyStore
import Testing

/// The durable push queue, on every backend: what the push dispatcher relies on for "no push dropped, none sent
/// twice".
extension StoreConformanceTests {
    func pushedSend(
        _ store: any ParleyStore, _ conversationId: String, from sender: String, text: String, clientId: String? = nil
    )
        -> Command
    {
        guard case .sendMessage(var send) = send(store, conversationId, from: sender, text: text, clientId: clientId)
        else {
            fatalError("send(...) makes a sendMessage command")
        }
        send.queuesPush = true
        return .sendMessage(send)
    }

    func job(
        _ entry: Int64, uid: String = "bob", device: String = "phone", token: String = "aa11", at time: Int64 = 100
    )
        -> PushJob
    {
        PushJob(
            appId: Self.appId, uid: uid, deviceId: device, token: token, environment: .sandbox,
            collapseId: "m_\(entry)",
            payload: Array(#"{"aps":{}}"#.utf8), createdAt: time, notBefore: time
        )
    }

    @Test(arguments: Backend.allCases) func messagesStoredWithPushOnAreInTheOutboxOnceEach(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store)
        _ = try await apply(store, send(store, "c_g", from: "alice", text: "push off"))
        // A batch of two, and the same client message id again: the duplicate is not queued a second time.
        let results = try await store.apply([
            pushedSend(store, "c_g", from: "alice", text: "one", clientId: "cm-1"),
            pushedSend(store, "c_g", from: "bob", text: "two"),
            pushedSend(store, "c_g", from: "alice", text: "one", clientId: "cm-1"),
        ])
        #expect(results.allSatisfy { (try? $0.get()) != nil })
        let outbox = try await store.pushOutbox(limit: 10)
        #expect(outbox.map(\.message?.text) == ["one", "two"])
        #expect(outbox.map(\.seq) == [5, 6])
        #expect(outbox.allSatisfy { $0.appId == Self.appId && $0.conversationId == "c_g" && $0.createdAt == 20 })
        #expect(try await store.pushOutbox(limit: 1).map(\.seq) == [5])
        #expect(try await store.pushQueueDepth() == PushQueueDepth(outbox: 2, jobs: 0))
    }

    @Test(arguments: Backend.allCases) func anOutboxEntryYieldsItsJobsOnceEvenWhenExpandedTwice(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store)
        _ = try await store.apply([
            pushedSend(store, "c_g", from: "alice", text: "one"), pushedSend(store, "c_g", from: "alice", text: "two"),
        ])
        let entries = try await store.pushOutbox(limit: 10)
        let expansions = [
            PushExpansion(entryId: entries[0].id, jobs: [job(1), job(1, device: "tablet", token: "bb22")]),
            PushExpansion(entryId: entries[1].id, jobs: []),
        ]
        // Two nodes expanding the same entries at once: one of them inserts.
        async let first = store.expandPushOutbox(expansions)
        async let second = store.expandPushOutbox(expansions)
        let inserted = try await [first, second]
        #expect(inserted.sorted() == [0, 2])
        #expect(try await store.pushQueueDepth() == PushQueueDepth(outbox: 0, jobs: 2))
        #expect(try await store.pushOutbox(limit: 10).isEmpty)
    }

    @Test(arguments: Backend.allCases) func aClaimedJobIsLeasedUntilSentRetriedOrReleased(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store)
        _ = try await store.apply([pushedSend(store, "c_g", from: "alice", text: "one")])
        let entry = try await store.pushOutbox(limit: 1)[0]
        try await store.expandPushOutbox([
            PushExpansion(entryId: entry.id, jobs: [job(1), job(1, device: "tablet", token: "bb22", at: 150)])
        ])
        #expect(try await store.nextPushJobDue() == 100)
        // Not due before its time; oldest first; each claimed by one node.
        #expect(try await store.claimPushJobs(owner: "a", now: 99, leaseUntil: 1_000, limit: 10).isEmpty)
        let claimed = try await store.claimPushJobs(owner: "a", now: 200, leaseUntil: 1_000, limit: 1)
        #expect(claimed.map(\.deviceId) == ["phone"])
        #expect(claimed.first?.payload == Array(#"{"aps":{}}"#.utf8) && claimed.first?.collapseId == "m_1")
        let other = try await store.claimPushJobs(owner: "b", now: 200, leaseUntil: 1_000, limit: 10)
        #expect(other.map(\.deviceId) == ["tablet"])
        #expect(try await store.claimPushJobs(owner: "b", now: 999, leaseUntil: 2_000, limit: 10).isEmpty)
        // A lease that ended (its node died) makes the job due again.
        #expect(try await store.nextPushJobDue() == 1_000)
        #expect(try await store.claimPushJobs(owner: "b", now: 1_000, leaseUntil: 100_000, limit: 10).count == 2)

        // Retried: due again at its new time, attempts counted.
        try await store.retryPushJob(id: claimed[0].id, attempts: 1, notBefore: 5_000)
        #expect(try await store.claimPushJobs(owner: "a", now: 4_999, leaseUntil: 9_000, limit: 10).isEmpty)
        let retried = try await store.claimPushJobs(owner: "a", now: 5_000, leaseUntil: 9_000, limit: 10)
        #expect(retried.map(\.attempts) == [1])
        // Released by its owner (a graceful stop): due at once; another owner's lease stays.
        try await store.releasePushJobs(owner: "a")
        #expect(
            try await store.claimPushJobs(owner: "c", now: 5_000, leaseUntil: 9_000, limit: 10).map(\.deviceId) == [
                "phone"
            ])
        try await store.releasePushJobs(owner: nil)
        #expect(try await store.claimPushJobs(owner: "c", now: 5_000, leaseUntil: 9_000, limit: 10).count == 2)

        try await store.completePushJob(id: claimed[0].id)
        try await store.completePushJob(id: other[0].id)
        #expect(try await store.pushQueueDepth() == PushQueueDepth(outbox: 0, jobs: 0))
        #expect(try await store.nextPushJobDue() == nil)
    }

    @Test(arguments: Backend.allCases) func anInvalidTokenRemovesItsDeviceAndJobsUnlessRegisteredAgainSince(
        _ backend: Backend
    ) async throws {
        let store = try await prepared(backend)
        _ = try await group(store)
        _ = try await store.putDevice(appId: Self.appId, uid: "bob", device("phone", token: "aa11", at: 100))
        _ = try await store.putDevice(appId: Self.appId, uid: "bob", device("tablet", token: "bb22", at: 100))
        _ = try await store.apply([pushedSend(store, "c_g", from: "alice", text: "one")])
        let entry = try await store.pushOutbox(limit: 1)[0]
        try await store.expandPushOutbox([
            PushExpansion(entryId: entry.id, jobs: [job(1), job(1, device: "tablet", token: "bb22")])
        ])
        // APNs knew the token invalid before the device registered it: kept.
        #expect(
            try await store.removeInvalidToken(
                appId: Self.appId, uid: "bob", deviceId: "phone", token: "aa11", invalidSince: 99) == false)
        // Another token than the device holds now: kept.
        #expect(
            try await store.removeInvalidToken(
                appId: Self.appId, uid: "bob", deviceId: "phone", token: "cc33", invalidSince: nil) == false)
        #expect(try await store.pushQueueDepth().jobs == 2)
        #expect(
            try await store.removeInvalidToken(
                appId: Self.appId, uid: "bob", deviceId: "phone", token: "aa11", invalidSince: 100) == true)
        #expect(try await store.devices(appId: Self.appId, uid: "bob").map(\.deviceId) == ["tablet"])
        #expect(
            try await store.claimPushJobs(owner: "a", now: 200, leaseUntil: 1_000, limit: 10).map(\.token) == ["bb22"])
    }

    @Test(arguments: Backend.allCases) func waitingPushesLeaveWithTheirDeviceAndNeverFollowATokenToAnotherUser(
        _ backend: Backend
    ) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])
        _ = try await store.putDevice(appId: Self.appId, uid: "bob", device("phone", token: "aa11", at: 100))
        _ = try await store.putDevice(appId: Self.appId, uid: "bob", device("tablet", token: "bb22", at: 100))
        _ = try await store.apply([pushedSend(store, "c_g", from: "alice", text: "for bob")])
        let entry = try await store.pushOutbox(limit: 1)[0]
        try await store.expandPushOutbox([
            PushExpansion(entryId: entry.id, jobs: [job(1), job(1, device: "tablet", token: "bb22")])
        ])
        // Bob signs out on the tablet: its waiting push goes.
        #expect(try await store.deleteDevice(appId: Self.appId, uid: "bob", deviceId: "tablet"))
        // The phone changes hands: carol registers its token; bob's push must not reach her.
        _ = try await store.putDevice(appId: Self.appId, uid: "carol", device("phone", token: "aa11", at: 200))
        #expect(try await store.pushQueueDepth() == PushQueueDepth(outbox: 0, jobs: 0))
    }
}
