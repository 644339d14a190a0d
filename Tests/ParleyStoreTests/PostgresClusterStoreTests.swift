import Foundation
import ParleyProtocol
import ParleyStore
import ParleyTesting
import Testing

@testable import ParleyStorePostgres

/// The database's side of several nodes (``ClusterStore``): the claim that keeps a node without NATS alone, and the
/// reads that fill a gap in what NATS delivered.
extension PostgresStoreTests {
    @Test func aDatabaseIsClaimedAloneOrSharedNeverBoth() async throws {
        let database = try await freshDatabase()
        let store = try await store(on: database)
        // Nodes with NATS share it.
        let first = try await store.claimDeployment(shared: true)
        let second = try await store.claimDeployment(shared: true)
        // A node without NATS is refused, and told that nodes with NATS hold it.
        await #expect {
            _ = try await store.claimDeployment(shared: false)
        } throws: { error in
            (error as? DeploymentClaimError)?.heldAlone == false
        }
        await first.release()
        await second.release()
        // Released: a node without NATS takes it alone; then neither kind gets it.
        let alone = try await store.claimDeployment(shared: false)
        for shared in [true, false] {
            await #expect {
                _ = try await store.claimDeployment(shared: shared)
            } throws: { error in
                (error as? DeploymentClaimError)?.heldAlone == true
            }
        }
        #expect(await alone.isHeld())
        await alone.release()
    }

    @Test func aClaimWhoseConnectionEndsIsGoneAndCanBeTakenAgain() async throws {
        let database = try await freshDatabase()
        let store = try await store(on: database)
        let claim = try await store.claimDeployment(shared: false)
        #expect(await claim.isHeld())
        try await database.terminateClaims()
        #expect(await claim.isHeld() == false, "the session ended, and its lock with it")
        let again = try await store.claimDeployment(shared: false)
        #expect(await again.isHeld())
        await again.release()
        await claim.release()
    }

    @Test func theDeploymentIdIsOnePerDatabase() async throws {
        let one = try await store(on: try await freshDatabase())
        let other = try await store(on: try await freshDatabase())
        let id = try await one.deploymentId()
        let again = try await one.deploymentId()
        let otherId = try await other.deploymentId()
        #expect(!id.isEmpty && id == again)
        #expect(id != otherId)
    }

    @Test func lastSeqsAnswerForTheConversationsThatExist() async throws {
        let store = try await store(on: try await freshDatabase())
        try await prepare(store)
        _ = try await store.apply([send("c_g", from: "alice"), send("c_g", from: "bob")])
        let group = ConversationRef(appId: Self.appId, conversationId: "c_g")
        let missing = ConversationRef(appId: Self.appId, conversationId: "c_missing")
        let otherApp = ConversationRef(appId: "another app", conversationId: "c_g")
        let positions = try await store.lastSeqs([group, missing, otherApp])
        let stored = try await store.streamPositions(appId: Self.appId, uid: "alice").conversations["c_g"]
        #expect(positions == [group: try #require(stored)])
    }

    @Test func membershipChangesOfManyUsersComeInOrderAndSayWhatDidNotFit() async throws {
        let store = try await store(on: try await freshDatabase())
        try await prepare(store, group: nil)
        for id in ["c_1", "c_2", "c_3"] {
            _ = try await store.apply([
                .createConversation(
                    .init(
                        appId: Self.appId, newId: id, type: .group, creator: "alice", participants: ["bob", "carol"],
                        name: id, now: 1))
            ])[0].get()
        }
        let bob = UserRef(appId: Self.appId, uid: "bob")
        let carol = UserRef(appId: Self.appId, uid: "carol")
        let all = try await store.membershipChanges([bob: 0, carol: 0], limit: 100)
        #expect(all.incomplete.isEmpty)
        #expect(all.changes[bob]?.map(\.conversationId) == ["c_1", "c_2", "c_3"])
        #expect(all.changes[bob]?.allSatisfy(\.joined) == true)
        #expect(all.changes[carol]?.map(\.userSeq) == all.changes[carol]?.map(\.userSeq).sorted())
        // After a position: only what follows it.
        let after = try #require(all.changes[bob]?.first?.userSeq)
        #expect(try await store.membershipChanges([bob: after], limit: 100).changes[bob]?.count == 2)
        // Four changes asked, three fit: bob's (first in order) fit, carol's are cut and listed.
        let cut = try await store.membershipChanges([bob: 0, carol: 0], limit: 4)
        #expect(cut.changes[bob]?.count == 3)
        #expect(cut.changes[carol] == nil && cut.incomplete == [carol])
    }
}
