import Foundation
import ParleyProtocol
import ParleyStore
import Testing

/// One batch (one transaction) mixing sends with the commands that change what a send depends on: each command sees
/// what the commands before it in the batch did, exactly as if each had been applied alone, in order.
extension StoreConformanceTests {
    func remove(_ uid: String, from conversationId: String = "c_g", by actor: String) -> Command {
        .removeParticipant(.init(appId: Self.appId, conversationId: conversationId, actor: actor, uid: uid, now: 30))
    }

    func add(_ uid: String, to conversationId: String = "c_g", by actor: String = "alice") -> Command {
        .addParticipants(
            .init(appId: Self.appId, conversationId: conversationId, actor: actor, entries: [.init(uid: uid)], now: 30))
    }

    func seqs(_ result: Result<CommandResult, DomainError>) throws -> [Int64] {
        try result.get().events.compactMap(\.event.seq)
    }

    /// The sequence numbers the batch's commands took, refused ones left out.
    func seqs(_ results: [Result<CommandResult, DomainError>]) -> [Int64] {
        results.flatMap { (try? $0.get())?.events.compactMap(\.event.seq) ?? [] }
    }

    @Test(arguments: Backend.allCases) func aParticipantRemovedEarlierInTheBatchCannotSend(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])  // seq 1-4
        let results = try await store.apply([
            send(store, "c_g", from: "bob"),
            remove("bob", by: "alice"),
            send(store, "c_g", from: "bob"),
            send(store, "c_g", from: "carol"),
        ])
        #expect(try seqs(results[0]) == [5])
        #expect(try seqs(results[1]) == [6])
        #expect(results[2].failureCode == .conversationNotFound)
        #expect(try seqs(results[3]) == [7])
        // The send after the removal no longer reaches the removed participant.
        #expect(try Set(results[3].get().recipients) == ["alice", "carol"])
        #expect(try Set(results[0].get().recipients) == ["alice", "bob", "carol"])
    }

    @Test(arguments: Backend.allCases) func aParticipantWhoLeftEarlierInTheBatchCannotSendToAPublicGroup(
        _ backend: Backend
    ) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"], isPublic: true)
        let results = try await store.apply([
            send(store, "c_g", from: "bob"),
            remove("bob", by: "bob"),
            send(store, "c_g", from: "bob"),
            .join(action("c_g", by: "bob")),
            send(store, "c_g", from: "bob"),
        ])
        #expect(results.map(\.failureCode) == [nil, nil, .notAParticipant, nil, nil])
        #expect(seqs(results) == [4, 5, 6, 7])
    }

    @Test(arguments: Backend.allCases) func aSendToAConversationDeletedEarlierInTheBatchIsRefused(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store)
        let results = try await store.apply([
            send(store, "c_g", from: "bob"),
            .deleteConversation(action("c_g", by: "alice")),
            send(store, "c_g", from: "bob"),
            send(store, "c_g", from: "alice"),
            .undeleteConversation(action("c_g", by: "alice")),
            send(store, "c_g", from: "bob"),
        ])
        #expect(results.map(\.failureCode) == [nil, nil, .conversationNotFound, .conversationNotFound, nil, nil])
        #expect(seqs(results) == [4, 5, 6, 7])
        let (row, _) = try #require(try await store.conversation(appId: Self.appId, id: "c_g", viewer: "bob"))
        #expect(row.conversation.lastSeq == 7 && row.deletedAt == nil)
    }

    @Test(arguments: Backend.allCases) func aGroupMadePublicEarlierInTheBatchTellsOutsidersToJoin(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store)
        let update = Command.updateConversation(
            .init(
                appId: Self.appId, conversationId: "c_g", actor: "alice",
                update: UpdateConversationRequest(isPublic: true), now: 30)
        )
        let results = try await store.apply([
            send(store, "c_g", from: "carol"), update, send(store, "c_g", from: "carol"),
        ])
        #expect(results.map(\.failureCode) == [.conversationNotFound, nil, .notAParticipant])
    }

    @Test(arguments: Backend.allCases) func aConversationCreatedEarlierInTheBatchTakesSends(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        let create = Command.createConversation(
            .init(
                appId: Self.appId, newId: "c_new", type: .group, creator: "alice", participants: ["bob"], name: "N",
                now: 10)
        )
        let results = try await store.apply([
            send(store, "c_new", from: "alice"),  // not there yet
            create,
            send(store, "c_new", from: "alice"),
            send(store, "c_new", from: "bob"),
        ])
        #expect(results.map(\.failureCode) == [.conversationNotFound, nil, nil, nil])
        #expect(try seqs(results[1]) == [1, 2, 3])
        #expect(try seqs(results[2]) == [4] && seqs(results[3]) == [5])
    }

    @Test(arguments: Backend.allCases) func aParticipantAddedEarlierInTheBatchSendsAndReceives(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store)
        let results = try await store.apply([
            send(store, "c_g", from: "carol"),
            send(store, "c_g", from: "alice"),
            add("carol"),
            send(store, "c_g", from: "carol"),
            send(store, "c_g", from: "alice"),
        ])
        #expect(results.map(\.failureCode) == [.conversationNotFound, nil, nil, nil, nil])
        #expect(seqs(results) == [4, 5, 6, 7])
        #expect(try Set(results[1].get().recipients) == ["alice", "bob"])
        #expect(try Set(results[4].get().recipients) == ["alice", "bob", "carol"])
        // carol joined after alice's first message and has read nothing since: one unread, alice's last.
        #expect(try await store.unread(appId: Self.appId, uid: "carol", conversationIds: nil).total == 1)
    }

    @Test(arguments: Backend.allCases) func aClientMessageIdSentTwiceInOneBatchIsStoredOnce(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store)
        let results = try await store.apply([
            send(store, "c_g", from: "alice", text: "first", clientId: "cm-1"),
            send(store, "c_g", from: "bob", text: "other sender", clientId: "cm-1"),
            send(store, "c_g", from: "alice", text: "retry", clientId: "cm-1"),
            send(store, "c_g", from: "alice", text: "next", clientId: "cm-2"),
        ])
        guard case .message(let original, false) = try results[0].get().outcome,
            case .message(_, false) = try results[1].get().outcome,
            case .message(let repeated, true) = try results[2].get().outcome,
            case .message(let next, false) = try results[3].get().outcome
        else {
            Issue.record("expected new, new, duplicate, new")
            return
        }
        #expect(repeated == original && repeated.text == "first")
        #expect(try results[2].get().events.isEmpty)
        // The duplicate took no sequence number.
        #expect(original.seq == 4 && next.seq == 6)
        let history = try await store.messages(appId: Self.appId, conversationId: "c_g", query: HistoryQuery(limit: 10))
            .messages
        #expect(history.map(\.text) == ["next", "other sender", "first"])
        // And a later batch still finds it.
        let later = try await apply(store, send(store, "c_g", from: "alice", text: "again", clientId: "cm-1"))
        guard case .message(let found, true) = later.outcome else {
            Issue.record("expected a duplicate")
            return
        }
        #expect(found == original)
    }

    @Test(arguments: Backend.allCases)
    func clientMessageIdsRepeatedFromAnEarlierBatchAndAcrossAnotherCommandAreStoredOnce(_ backend: Backend) async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store)  // seq 1-3
        _ = try await apply(store, send(store, "c_g", from: "alice", text: "first", clientId: "cm-1"))  // 4
        let results = try await store.apply([
            send(store, "c_g", from: "alice", text: "second", clientId: "cm-2"),  // 5
            add("carol"),  // 6
            send(store, "c_g", from: "alice", text: "first again", clientId: "cm-1"),
            send(store, "c_g", from: "bob", text: "bob's own", clientId: "cm-1"),  // 7
            send(store, "c_g", from: "alice", text: "second again", clientId: "cm-2"),
        ])
        let outcomes = try results.map { result -> (String, Bool) in
            guard case .message(let message, let duplicate) = try result.get().outcome else { return ("", false) }
            return (message.text, duplicate)
        }
        #expect(outcomes.map(\.0) == ["second", "", "first", "bob's own", "second"])
        #expect(outcomes.map(\.1) == [false, false, true, false, true])
        #expect(seqs(results) == [5, 6, 7])
        let stored = try await store.events(appId: Self.appId, conversationId: "c_g", afterSeq: 0, limit: 20)
        #expect(stored.map(\.event.seq) == Array(1...7))
        // The membership change is recorded once.
        let carol = try await store.membershipChanges(appId: Self.appId, uid: "carol", afterUserSeq: 0, limit: 10)
        #expect(carol.map(\.seq) == [6])
    }

    @Test(arguments: Backend.allCases) func sendsToSeveralConversationsInOneBatchEachTakeTheirNextNumber(
        _ backend: Backend
    ) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, id: "c_1")
        _ = try await group(store, id: "c_2", owner: "bob", members: ["alice", "carol"])
        var batch: [Command] = []
        for index in 0..<6 {
            batch.append(send(store, index.isMultiple(of: 2) ? "c_1" : "c_2", from: "alice", text: "m\(index)"))
        }
        batch.append(send(store, "c_2", from: "carol", text: "m6"))
        let results = try await store.apply(batch)
        #expect(try results.map { try seqs($0) } == [[4], [5], [5], [6], [6], [7], [8]])
        let one = try await store.events(appId: Self.appId, conversationId: "c_1", afterSeq: 3, limit: 10)
        #expect(one.map(\.event.seq) == [4, 5, 6])
        let (row, _) = try #require(try await store.conversation(appId: Self.appId, id: "c_2", viewer: "alice"))
        #expect(row.conversation.lastSeq == 8 && row.lastActivityAt == 20)
        // Sending reads the conversation up to the message: alice read c_2 up to her last (seq 7), not carol's.
        let unread = try await store.unread(appId: Self.appId, uid: "alice", conversationIds: nil)
        #expect(unread.total == 1 && unread.conversations.map(\.readSeq) == [6, 7])
        #expect(try await store.unread(appId: Self.appId, uid: "bob", conversationIds: nil).total == 7)
        #expect(
            try await store.unread(appId: Self.appId, uid: "carol", conversationIds: ["c_2"]).conversations.first?
                .readSeq == 8)
    }

    @Test(arguments: Backend.allCases) func aReceiptInTheBatchSeesTheSendsBeforeIt(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])  // seq 1-4
        let results = try await store.apply([
            send(store, "c_g", from: "alice"),  // 5
            send(store, "c_g", from: "alice"),  // 6
            .markReceipt(
                .init(appId: Self.appId, conversationId: "c_g", uid: "bob", deliveredSeq: nil, readSeq: 100, now: 40)),
            send(store, "c_g", from: "alice"),  // 7
            send(store, "c_g", from: "carol"),  // 8
            .markReceipt(
                .init(appId: Self.appId, conversationId: "c_g", uid: "alice", deliveredSeq: 100, readSeq: nil, now: 41)),
        ])
        // Clamped to the last message at that point of the batch; a receipt names the message it reaches.
        func message(_ index: Int) throws -> Message {
            guard case .message(let message, _) = try results[index].get().outcome else {
                throw StoreTestError.noMessage
            }
            return message
        }
        let (sixth, eighth) = (try message(1), try message(4))
        #expect(
            try results[2].get().events.map(\.event.payload) == [
                .messageDelivered(Receipt(uid: "bob", seq: 6, messageId: sixth.id, timestamp: sixth.sentAt)),
                .messageRead(Receipt(uid: "bob", seq: 6, messageId: sixth.id, timestamp: sixth.sentAt)),
            ])
        #expect(
            try results[5].get().events.map(\.event.payload) == [
                .messageDelivered(Receipt(uid: "alice", seq: 8, messageId: eighth.id, timestamp: eighth.sentAt))
            ])
        #expect(try await store.unread(appId: Self.appId, uid: "bob", conversationIds: nil).total == 2)
        #expect(try await store.unread(appId: Self.appId, uid: "alice", conversationIds: nil).total == 1)
        #expect(try await store.unread(appId: Self.appId, uid: "carol", conversationIds: nil).total == 0)
    }

    @Test(arguments: Backend.allCases) func aRefusedCommandInTheBatchLeavesTheSendsAroundIt(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])
        let results = try await store.apply([
            send(store, "c_g", from: "alice"),
            add("ghost"),  // refused halfway: no such user
            send(store, "c_g", from: "bob"),
            remove("alice", by: "bob"),  // refused: a member cannot remove the owner
            send(store, "c_g", from: "alice"),
        ])
        #expect(results.map(\.failureCode) == [nil, .uidNotFound, nil, .forbidden, nil])
        #expect(seqs(results) == [4, 5, 6])
        let stored = try await store.events(appId: Self.appId, conversationId: "c_g", afterSeq: 0, limit: 20)
        #expect(stored.map(\.event.seq) == Array(1...6))
    }
}
