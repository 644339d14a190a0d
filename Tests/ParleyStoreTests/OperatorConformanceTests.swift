import Foundation
import ParleyProtocol
import ParleyStore
import Testing

/// What an app's operator reads and changes with the REST API key, on every backend: allowed origins, every user and
/// every conversation of the app (and none of another app's), counts.
extension StoreConformanceTests {
    @Test(arguments: Backend.allCases) func allowedOriginsAreKeptPerApp(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        #expect(try await store.app(id: Self.appId)?.allowedOrigins == [])
        let origins = ["https://chat.example.com", "http://localhost:3000"]
        #expect(try await store.updateAppOrigins(appId: Self.appId, origins: origins))
        #expect(try await store.app(id: Self.appId)?.allowedOrigins == origins)
        #expect(try await store.apps().first { $0.id == Self.appId }?.allowedOrigins == origins)
        #expect(try await store.app(id: Self.otherApp)?.allowedOrigins == [])
        #expect(try await store.updateAppOrigins(appId: Self.appId, origins: []))
        #expect(try await store.app(id: Self.appId)?.allowedOrigins == [])
        #expect(try await !store.updateAppOrigins(appId: "nope", origins: ["*"]))
    }

    @Test(arguments: Backend.allCases) func theOperatorPagesThroughEveryUserAndConversationOfTheApp(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        let first = try await store.users(appId: Self.appId, after: nil, limit: 3)
        #expect(first.map(\.uid) == ["alice", "bob", "carol"])
        #expect(try await store.users(appId: Self.appId, after: "carol", limit: 3).map(\.uid) == ["dave"])
        #expect(try await store.users(appId: Self.otherApp, after: nil, limit: 10).map(\.uid) == ["mallory"])

        _ = try await group(store, id: "c_1", members: ["bob"])
        _ = try await group(store, id: "c_2", owner: "bob", members: ["carol"])
        _ = try await group(store, id: "c_3", owner: "carol", members: ["dave"])
        _ = try await apply(
            store,
            .deleteConversation(.init(appId: Self.appId, conversationId: "c_2", actor: "bob", now: 20))
        )
        // Newest first, deleted ones left out; a page ends where the cursor (the row's key) says.
        let page = try await store.appConversations(appId: Self.appId, beforePK: nil, limit: 1)
        #expect(page.map(\.conversation.id) == ["c_3"])
        let rest = try await store.appConversations(appId: Self.appId, beforePK: page.last?.pk, limit: 10)
        #expect(rest.map(\.conversation.id) == ["c_1"])
        #expect(try await store.appConversations(appId: Self.otherApp, beforePK: nil, limit: 10).isEmpty)
        #expect(try await store.appCounts(appId: Self.appId) == AppCounts(users: 4, conversations: 2))
        #expect(try await store.appCounts(appId: Self.otherApp) == AppCounts(users: 1, conversations: 0))
    }
}
