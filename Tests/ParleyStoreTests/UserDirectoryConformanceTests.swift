import Foundation
import ParleyProtocol
import ParleyStore
import Testing

/// The user directory on every backend (docs/PROTOCOL.md, "Finding users"): what a query finds, in which order, who is
/// hidden from whom, and pages that hold while users are added.
extension StoreConformanceTests {
    /// The uids `query` finds for `viewer` (nil: the app's server).
    func directory(
        _ store: any ParleyStore, _ query: String, viewer: String? = "alice",
        visibility: UserDirectoryVisibility = .everyone, after: UserSearchCursor? = nil, limit: Int = 50,
        appId: String = appId
    ) async throws -> [String] {
        try await directoryPage(
            store, query, viewer: viewer, visibility: visibility, after: after, limit: limit, appId: appId
        ).users.map(\.uid)
    }

    func directoryPage(
        _ store: any ParleyStore, _ query: String, viewer: String? = "alice",
        visibility: UserDirectoryVisibility = .everyone, after: UserSearchCursor? = nil, limit: Int = 50,
        appId: String = appId
    ) async throws -> UserSearchPage {
        try await store.searchUsers(
            UserSearchRequest(
                appId: appId, prefixes: try UserDirectory.prefixes(of: query), viewer: viewer,
                visibility: visibility, after: after, limit: limit
            )
        )
    }

    func person(_ store: any ParleyStore, _ uid: String, _ name: String) async throws {
        try await store.insertUser(appId: Self.appId, User(uid: uid, name: name, createdAt: 1, updatedAt: 1))
    }

    @Test(arguments: Backend.allCases) func usersAreFoundByTheBeginningsOfTheirWords(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        try await person(store, "zoe_a", "Zoë Adams")
        try await person(store, "adam.smith", "Adam Smith")
        try await person(store, "ann", "Ann-Marie Adamson")

        #expect(try await directory(store, "zo") == ["zoe_a"])
        #expect(try await directory(store, "ZOE adams") == ["zoe_a"], "case and diacritics folded")
        #expect(try await directory(store, "zoë") == ["zoe_a"])
        // Ordered by the word the leading (longest) prefix matched, then uid; a user once, at their first such word.
        #expect(try await directory(store, "adam") == ["adam.smith", "zoe_a", "ann"])
        #expect(try await directory(store, "adam smi") == ["adam.smith"])
        #expect(try await directory(store, "marie") == ["ann"])
        #expect(try await directory(store, "ann marie adamson") == ["ann"])
        #expect(try await directory(store, "adam.sm") == ["adam.smith"], "a uid's parts are words")
        #expect(try await directory(store, "zoe_a") == ["zoe_a"])
        #expect(try await directory(store, "adamz").isEmpty)
        #expect(try await directory(store, "smith zoe").isEmpty, "every word must match")
        // The app's server; another app's users are never found.
        #expect(try await directory(store, "bo", viewer: nil) == ["bob"])
        #expect(try await directory(store, "m", viewer: nil, appId: Self.otherApp) == ["mallory"])
        #expect(try await directory(store, "mallory").isEmpty)
        // Query words the engines would read as operators are letters or nothing here.
        for hostile in ["a%", "_", "a' OR '1", "\\", "a*", "zo\u{10FFFF}"] {
            _ = try? await directory(store, hostile)
        }
        #expect(try await directory(store, "a%") == ["zoe_a", "adam.smith", "ann"], "zoe_a at her uid's word `a`")
    }

    @Test(arguments: Backend.allCases) func aRenamedUserIsFoundByTheNewNameOnly(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        try await person(store, "u1", "Erin Stone")
        #expect(try await directory(store, "erin") == ["u1"])
        _ = try await store.updateUser(appId: Self.appId, uid: "u1", UpdateUserRequest(name: "Erin Fields"), now: 5)
        #expect(try await directory(store, "stone").isEmpty)
        #expect(try await directory(store, "fie") == ["u1"])
        // Another field changed leaves the words.
        _ = try await store.updateUser(
            appId: Self.appId, uid: "u1", UpdateUserRequest(avatarURL: "https://a/b"), now: 6)
        #expect(try await directory(store, "erin fields") == ["u1"])
        // ensureUser of a known uid does not change the name nor its words.
        _ = try await store.ensureUser(appId: Self.appId, User(uid: "u1", name: "Other", createdAt: 7, updatedAt: 7))
        #expect(try await directory(store, "other").isEmpty)
    }

    @Test(arguments: Backend.allCases) func aUserNeverFindsThemselfNorWhoBlocksOrIsBlocked(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend, users: ["alice", "alan", "alba", "alma"])
        #expect(try await directory(store, "al") == ["alan", "alba", "alma"])
        _ = try await store.block(appId: Self.appId, blocker: "alice", blocked: "alan", now: 2)
        _ = try await store.block(appId: Self.appId, blocker: "alba", blocked: "alice", now: 2)
        #expect(try await directory(store, "al") == ["alma"])
        #expect(try await directory(store, "al", viewer: "alma") == ["alan", "alba", "alice"])
        #expect(try await directory(store, "al", viewer: nil) == ["alan", "alba", "alice", "alma"])
        await #expect(throws: Never.self) {
            try await store.unblock(appId: Self.appId, blocker: "alice", blocked: "alan")
        }
        #expect(try await directory(store, "al") == ["alan", "alma"])
    }

    @Test(arguments: Backend.allCases) func contactsOnlyFindsWhoSharesAConversation(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])
        _ = try await group(store, id: "c_x", owner: "carol", members: ["dave"])
        #expect(try await directory(store, "b", visibility: .contacts) == ["bob"])
        #expect(try await directory(store, "c", visibility: .contacts).isEmpty)
        #expect(try await directory(store, "c", visibility: .everyone) == ["carol"])
        #expect(try await directory(store, "d", viewer: "carol", visibility: .contacts) == ["dave"])
        #expect(
            try await directory(store, "a", viewer: nil, visibility: .contacts) == ["alice"], "the server finds all")
        // A deleted conversation makes no contact; a blocked contact stays hidden.
        _ = try await apply(
            store, .deleteConversation(.init(appId: Self.appId, conversationId: "c_g", actor: "alice", now: 30)))
        #expect(try await directory(store, "b", visibility: .contacts).isEmpty)
        _ = try await store.block(appId: Self.appId, blocker: "dave", blocked: "carol", now: 31)
        #expect(try await directory(store, "d", viewer: "carol", visibility: .contacts).isEmpty)
    }

    @Test(arguments: Backend.allCases) func pagesHoldWhileUsersAreAdded(_ backend: Backend) async throws {
        let store = try await prepared(backend, users: ["alice"])
        for index in 0..<7 { try await person(store, "p\(index)", "Pat \(index)") }
        var seen: [String] = []
        var page = try await directoryPage(store, "pa", limit: 3)
        seen += page.users.map(\.uid)
        // Users added ahead of the cursor are found later, those behind it are not repeated or missed.
        try await person(store, "p9", "Pat 9")
        try await person(store, "p00", "Pat 00")
        while let cursor = page.nextCursor, seen.count < 20 {
            page = try await directoryPage(store, "pa", after: try UserSearchCursor(parsing: cursor), limit: 3)
            seen += page.users.map(\.uid)
        }
        #expect(seen == ["p0", "p1", "p2", "p3", "p4", "p5", "p6", "p9"])
        #expect(page.users.count < 3 || page.nextCursor == nil)
    }
}

extension StoreConformanceTests {
    @Test(arguments: Backend.allCases) func aDeactivatedUserIsMarkedAndHiddenFromOtherUsers(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend, users: ["alice", "bob", "bobby"])
        let deactivated = try await store.setUserDeactivated(
            appId: Self.appId, uid: "bob", deactivated: true, now: 77)
        #expect(deactivated?.deactivatedAt == 77 && deactivated?.uid == "bob")
        let again = try await store.setUserDeactivated(appId: Self.appId, uid: "bob", deactivated: true, now: 88)
        #expect(again?.deactivatedAt == 77, "already deactivated: the first time stays")
        #expect(try await store.user(appId: Self.appId, uid: "bob")?.deactivatedAt == 77)
        #expect(try await store.users(appId: Self.appId, after: nil, limit: 10).map(\.deactivatedAt) == [nil, 77, nil])
        #expect(try await directory(store, "bob") == ["bobby"], "other users no longer find them")
        #expect(try await directoryPage(store, "bob", viewer: nil).users.map(\.deactivatedAt) == [77, nil])
        let back = try await store.setUserDeactivated(appId: Self.appId, uid: "bob", deactivated: false, now: 99)
        #expect(back != nil && back?.deactivatedAt == nil)
        #expect(try await directory(store, "bob") == ["bob", "bobby"])
        #expect(try await store.setUserDeactivated(appId: Self.appId, uid: "nobody", deactivated: true, now: 1) == nil)
        #expect(try await store.setUserDeactivated(appId: Self.otherApp, uid: "bob", deactivated: true, now: 1) == nil)
    }
}

extension StoreConformanceTests {
    @Test(arguments: Backend.allCases) func theRarestQueryWordLeadsAndOrders(_ backend: Backend) async throws {
        let store = try await prepared(backend, users: ["alice"])
        for index in 0..<6 {
            try await person(store, "m\(index)", "Martin \(["zed", "ann", "bo", "cy", "di", "ed"][index])")
        }
        try await person(store, "z9", "Zed Quinn")
        // Each prefix's words, counted up to the cap + 1.
        #expect(
            try await store.userWordCounts(appId: Self.appId, prefixes: ["martin", "ze", "q"], cap: 100) == [6, 2, 1])
        #expect(try await store.userWordCounts(appId: Self.appId, prefixes: ["martin", "m"], cap: 3) == [4, 4])
        #expect(try await store.userWordCounts(appId: Self.otherApp, prefixes: ["martin"], cap: 3) == [0])
        #expect(UserDirectory.lead(counts: [6, 2, 1]) == 2 && UserDirectory.lead(counts: [4, 4]) == 0)

        // Led by `ze` (fewer words than `martin`): the same users, in the order of the word `ze` matched.
        let prefixes = try UserDirectory.prefixes(of: "martin ze")
        let request = UserSearchRequest(
            appId: Self.appId, prefixes: prefixes, lead: 1, viewer: "alice", visibility: .everyone, limit: 1)
        let first = try await store.searchUsers(request)
        #expect(first.users.map(\.uid) == ["m0"])
        let cursor = try UserSearchCursor(parsing: try #require(first.nextCursor))
        #expect(cursor.lead == 1 && cursor.word == "zed")
        var next = request
        next.after = cursor
        #expect(try await store.searchUsers(next).users.isEmpty, "z9 has `ze` but not `martin`")
        #expect(try await directory(store, "martin ze") == ["m0"])
    }
}
