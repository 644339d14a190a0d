import Foundation
import ParleyProtocol
import ParleyStore
import Testing

/// The inbox in one request on every backend (docs/PROTOCOL.md, "The inbox"): each conversation's last message and
/// counts, the filters, the sorts, pages, and archives that come back with the next message.
extension StoreConformanceTests {
    func inbox(
        _ store: any ParleyStore, _ uid: String = "alice", filter: InboxFilter = .init(),
        sort: InboxSort = .activity, after: String? = nil, limit: Int = 50
    ) async throws -> InboxPage {
        try await store.inbox(
            InboxRequest(
                appId: Self.appId, uid: uid, filter: filter, sort: sort,
                after: try after.map { try InboxCursor(parsing: $0, sort: sort) }, limit: limit
            )
        )
    }

    func direct(_ store: any ParleyStore, id: String, _ creator: String, _ other: String, at now: Int64 = 5)
        async throws
    {
        _ = try await apply(
            store,
            .createConversation(
                .init(appId: Self.appId, newId: id, type: .direct, creator: creator, participants: [other], now: now))
        )
    }

    func read(_ store: any ParleyStore, _ conversationId: String, by uid: String, through seq: Int64) async throws {
        _ = try await store.apply([
            .markReceipt(
                .init(
                    appId: Self.appId, conversationId: conversationId, uid: uid, deliveredSeq: nil, readSeq: seq,
                    now: 90
                )
            )
        ])
    }

    @Test(arguments: Backend.allCases) func theInboxHasEachConversationsLastMessageAndCounts(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])
        try await direct(store, id: "c_d", "carol", "alice")
        _ = try await group(store, id: "c_x", owner: "bob", members: ["carol"])
        _ = try await message(store, from: "bob", text: "one", at: 20)
        let mention = try await message(store, from: "carol", text: "@alice two", mentions: ["alice"], at: 21)
        let direct = try await message(store, "c_d", from: "carol", text: "hello", at: 22)
        _ = try await message(store, "c_x", from: "bob", text: "not alice's", at: 23)

        let page = try await inbox(store)
        #expect(page.entries.map(\.id) == ["c_d", "c_g"], "most recently active first; never another's")
        #expect(page.totalUnread == 3 && page.nextCursor == nil)
        let (first, second) = (page.entries[0], page.entries[1])
        #expect(first.lastMessage?.id == direct.id && first.unread == 1 && first.unreadMentions == 0)
        #expect(first.otherMember?.uid == "carol" && first.conversation.type == .direct)
        #expect(first.membership.uid == "alice" && !first.archived && first.lastActivityAt == 22)
        #expect(second.lastMessage?.id == mention.id && second.unread == 2 && second.unreadMentions == 1)
        #expect(second.otherMember == nil && second.membership.role == .owner)

        // Read, deleted, blocked: the counts and the last message follow.
        try await read(store, "c_g", by: "alice", through: mention.seq)
        let afterRead = try await inbox(store)
        #expect(afterRead.totalUnread == 1)
        #expect(afterRead.entries[1].unread == 0 && afterRead.entries[1].unreadMentions == 0)
        _ = try await apply(store, delete(direct, by: "carol"))
        #expect(try await inbox(store).entries[0].lastMessage?.isDeleted == true)
        #expect(try await inbox(store).totalUnread == 0, "a deleted message is not unread")
        _ = try await store.block(appId: Self.appId, blocker: "alice", blocked: "carol", now: 95)
        let blocked = try await inbox(store)
        #expect(blocked.entries[1].lastMessage?.text == "one", "a blocked user's message is never the last one shown")
    }

    @Test(arguments: Backend.allCases) func theInboxFiltersSortsAndPages(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, id: "c_1", members: ["bob"])
        _ = try await group(store, id: "c_2", members: ["bob"])
        try await direct(store, id: "c_3", "bob", "alice")
        _ = try await group(store, id: "c_4", members: ["bob"])
        _ = try await message(store, "c_1", from: "bob", text: "for @alice", mentions: ["alice"], at: 30)
        _ = try await message(store, "c_2", from: "alice", text: "mine", at: 31)
        _ = try await message(store, "c_3", from: "bob", text: "direct", at: 32)
        _ = try await message(store, "c_4", from: "alice", text: "mine too", at: 33)

        #expect(try await inbox(store).entries.map(\.id) == ["c_4", "c_3", "c_2", "c_1"])
        #expect(try await inbox(store, filter: InboxFilter(unreadOnly: true)).entries.map(\.id) == ["c_3", "c_1"])
        #expect(try await inbox(store, filter: InboxFilter(type: .direct)).entries.map(\.id) == ["c_3"])
        #expect(try await inbox(store, filter: InboxFilter(type: .group)).entries.map(\.id) == ["c_4", "c_2", "c_1"])
        #expect(try await inbox(store, filter: InboxFilter(mentionsOnly: true)).entries.map(\.id) == ["c_1"])
        #expect(try await inbox(store, sort: .unread).entries.map(\.id) == ["c_3", "c_1", "c_4", "c_2"])
        let filtered = try await inbox(store, filter: InboxFilter(type: .direct, mentionsOnly: true))
        #expect(filtered.entries.isEmpty && filtered.totalUnread == 2, "the total counts every conversation")

        // Pages of two, in both sorts; a conversation that becomes active meanwhile moves ahead of the cursor.
        for sort in InboxSort.allCases {
            var seen: [String] = []
            var page = try await inbox(store, sort: sort, limit: 2)
            seen += page.entries.map(\.id)
            while let cursor = page.nextCursor, seen.count < 10 {
                page = try await inbox(store, sort: sort, after: cursor, limit: 2)
                seen += page.entries.map(\.id)
            }
            #expect(seen == (sort == .activity ? ["c_4", "c_3", "c_2", "c_1"] : ["c_3", "c_1", "c_4", "c_2"]))
        }
        let first = try await inbox(store, limit: 2)
        _ = try await message(store, "c_1", from: "alice", text: "later", at: 40)
        let rest = try await inbox(store, after: first.nextCursor, limit: 2)
        #expect(rest.entries.map(\.id) == ["c_2"], "c_1 moved ahead: not listed again, nothing skipped")
        // A cursor of the other sort, or not one of ours, is refused.
        #expect(throws: DomainError.self) { try InboxCursor(parsing: first.nextCursor ?? "", sort: .unread) }
        for bad in ["", "a", "a1", "a1.x", "a-1.2", "u2.1.1", "x1.2", "a1.2.3"] {
            #expect(throws: DomainError.self) { try InboxCursor(parsing: bad, sort: .activity) }
        }
    }

    @Test(arguments: Backend.allCases) func anArchivedConversationComesBackWithTheNextMessage(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])
        _ = try await group(store, id: "c_x", owner: "carol", members: ["dave"])
        _ = try await message(store, from: "bob", text: "one", at: 20)
        #expect(try await store.setArchived(appId: Self.appId, conversationId: "c_g", uid: "alice", archived: true))
        #expect(try await inbox(store).entries.isEmpty)
        let archived = try await inbox(store, filter: InboxFilter(archived: true))
        #expect(archived.entries.map(\.id) == ["c_g"] && archived.entries[0].archived)
        #expect(try await inbox(store, "bob").entries.map(\.id) == ["c_g"], "only for the one who archived it")
        // One conversation by id, archived or not; never one the user is not in.
        let one = try await inbox(store, filter: InboxFilter(conversationId: "c_g"))
        #expect(one.entries.map(\.id) == ["c_g"] && one.entries[0].archived && one.totalUnread == 1)
        #expect(try await inbox(store, filter: InboxFilter(conversationId: "c_x")).entries.isEmpty)
        #expect(try await inbox(store, filter: InboxFilter(conversationId: "c_nope")).entries.isEmpty)

        _ = try await message(store, from: "bob", text: "two", at: 21)
        let back = try await inbox(store)
        #expect(back.entries.map(\.id) == ["c_g"] && !back.entries[0].archived && back.entries[0].unread == 2)

        // Archived again, then brought back by hand; never someone else's conversation, nor a deleted one.
        #expect(try await store.setArchived(appId: Self.appId, conversationId: "c_g", uid: "alice", archived: true))
        #expect(try await store.setArchived(appId: Self.appId, conversationId: "c_g", uid: "alice", archived: false))
        #expect(try await inbox(store).entries.map(\.id) == ["c_g"])
        #expect(try await !store.setArchived(appId: Self.appId, conversationId: "c_x", uid: "alice", archived: true))
        #expect(try await !store.setArchived(appId: Self.appId, conversationId: "c_nope", uid: "alice", archived: true))
        #expect(try await !store.setArchived(appId: Self.otherApp, conversationId: "c_g", uid: "alice", archived: true))
        _ = try await apply(
            store, .deleteConversation(.init(appId: Self.appId, conversationId: "c_x", actor: "carol", now: 30)))
        #expect(try await !store.setArchived(appId: Self.appId, conversationId: "c_x", uid: "dave", archived: true))
        #expect(try await inbox(store, "dave").entries.isEmpty, "a deleted conversation is in nobody's inbox")
    }
}
