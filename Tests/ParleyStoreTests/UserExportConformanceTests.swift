import Foundation
import ParleyProtocol
import ParleyStore
import Testing

/// A user's export on every backend: docs/PROTOCOL.md, "Exporting a user".
extension StoreConformanceTests {
    @Test(arguments: Backend.allCases) func anExportHoldsEveryMessageTheUserSentAndTheirMemberships(
        _ backend: Backend
    ) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])  // c_g
        _ = try await group(store, id: "c_h", owner: "bob", members: ["alice"])
        _ = try await group(store, id: "c_x", owner: "bob", members: ["carol"])  // alice never in it
        var sent: [String] = []
        for index in 0..<7 {
            sent.append(try await message(store, from: "alice", text: "g\(index)").id)
            _ = try await message(store, from: "bob", text: "not alice's")
        }
        let inH = try await message(store, "c_h", from: "alice", text: "in h")
        _ = try await message(store, "c_x", from: "bob", text: "elsewhere")
        let deleted = try await message(store, from: "alice", text: "gone")
        _ = try await apply(store, delete(deleted, by: "alice"))
        // alice leaves c_h: its messages are still hers.
        _ = try await apply(
            store,
            .removeParticipant(.init(appId: Self.appId, conversationId: "c_h", actor: "alice", uid: "alice", now: 50)))

        let memberships = try await store.memberships(appId: Self.appId, uid: "alice")
        #expect(memberships.map(\.conversation.id) == ["c_g"])
        #expect(memberships.first?.participant.role == .owner)

        // Small pages: every message of alice's once, by conversation then seq; the tombstone as one.
        var ids: [String] = []
        var after: UserExport.Position?
        var pages = 0
        repeat {
            let page = try await store.exportMessages(
                appId: Self.appId, uid: "alice", after: after, limit: 3, scan: 5)
            #expect(page.messages.count <= 3)
            #expect(page.messages.allSatisfy { $0.sender == "alice" })
            ids += page.messages.map(\.id)
            after = page.next
            pages += 1
        } while after != nil && pages < 100
        let gPK = try #require(try await store.conversation(appId: Self.appId, id: "c_g", viewer: "alice")?.0.pk)
        let hPK = try #require(try await store.conversation(appId: Self.appId, id: "c_h", viewer: "alice")?.0.pk)
        let inOrder = gPK < hPK ? sent + [deleted.id, inH.id] : [inH.id] + sent + [deleted.id]
        #expect(ids == inOrder)
        let whole = try await store.exportMessages(
            appId: Self.appId, uid: "alice", after: nil, limit: 100, scan: UserExport.scanPerPage)
        #expect(whole.messages.map(\.id) == inOrder && whole.next == nil)
        #expect(whole.messages.first { $0.id == deleted.id }?.isDeleted == true)
        // Nobody else's, no other app's.
        let none = try await store.exportMessages(appId: Self.otherApp, uid: "alice", after: nil, limit: 100, scan: 100)
        #expect(none.messages.isEmpty && none.next == nil)
        #expect(try await store.memberships(appId: Self.appId, uid: "dave").isEmpty)
    }
}
