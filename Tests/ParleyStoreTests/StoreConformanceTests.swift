import Foundation
import GRDB
import Logging
import ParleyProtocol
import ParleyStore
import ParleyStorePostgres
import ParleyStoreSQLite
import ParleyTesting
import Testing

/// The storage backends the conformance suite runs against.
///
/// PostgreSQL runs only when `PARLEY_TEST_DATABASE_URL` names a server (scripts/test starts a throwaway one); without
/// it the postgres cases are left out with a warning, and `PostgresStoreTests` shows as skipped with the reason.
enum Backend: String, CaseIterable, CustomTestStringConvertible {
    case sqlite
    case postgres

    static var allCases: [Backend] {
        guard PostgresTestDatabase.isConfigured else {
            _ = warnOnce
            return [.sqlite]
        }
        return [.sqlite, .postgres]
    }

    private static let warnOnce: Void = {
        FileHandle.standardError.write(Data("\nwarning: \(PostgresTestDatabase.skipReason)\n\n".utf8))
    }()

    var testDescription: String { rawValue }

    /// A new, empty store; closed (and its database dropped) when the test ends, under ``StoreCleanup``.
    func makeStore() async throws -> any ParleyStore {
        switch self {
        case .sqlite:
            let directory = try TemporaryDirectory(prefix: "parley-store")
            return try SQLiteStore(path: directory.path + "/parley.sqlite")
        case .postgres:
            let database = try await PostgresTestDatabase.create()
            let store = try await PostgresStore.connect(
                url: database.url, logger: .quiet, timeout: .seconds(60), maximumConnections: 10)
            await StoreCleanup.register(store, database: database)
            return store
        }
    }
}

/// One suite of storage behaviour, run against every backend: what the server relies on.
@Suite(StoreCleanup()) struct StoreConformanceTests {
    static let appId = "app1"
    static let otherApp = "app2"

    func prepared(_ backend: Backend, users: [String] = ["alice", "bob", "carol", "dave"]) async throws
        -> any ParleyStore
    {
        let store = try await backend.makeStore()
        for app in [Self.appId, Self.otherApp] {
            try await store.insertApp(
                AppRecord(id: app, name: app, authKeyHash: [1, 2], restAPIKeyHash: Array(app.utf8), createdAt: 1)
            )
        }
        for uid in users {
            try await store.insertUser(appId: Self.appId, User(uid: uid, name: uid, createdAt: 1, updatedAt: 1))
        }
        try await store.insertUser(appId: Self.otherApp, User(uid: "mallory", name: "m", createdAt: 1, updatedAt: 1))
        return store
    }

    func apply(_ store: any ParleyStore, _ command: Command) async throws -> CommandResult {
        try await store.apply([command])[0].get()
    }

    func refusal(_ store: any ParleyStore, _ command: Command) async throws -> ErrorCode? {
        switch try await store.apply([command])[0] {
        case .success: return nil
        case .failure(let error): return error.code
        }
    }

    func group(
        _ store: any ParleyStore, id: String = "c_g", owner: String = "alice", members: [String] = ["bob"],
        isPublic: Bool = false
    )
        async throws -> Conversation
    {
        let result = try await apply(
            store,
            .createConversation(
                .init(
                    appId: Self.appId, newId: id, type: .group, creator: owner, participants: members, name: "G",
                    isPublic: isPublic, now: 10)
            )
        )
        guard case .conversation(let conversation, true) = result.outcome else {
            throw DomainError(.internalError, "no group")
        }
        return conversation
    }

    func send(
        _ store: any ParleyStore, _ conversationId: String, from sender: String, text: String = "hi",
        clientId: String? = nil, appId: String = appId
    )
        -> Command
    {
        .sendMessage(
            .init(
                appId: appId, conversationId: conversationId, sender: sender,
                messageId: "m_\(UUID().uuidString.prefix(8))",
                clientMessageId: clientId, parts: [.text(text)], metadata: nil, alert: nil, now: 20
            )
        )
    }

    // MARK: Apps, users, tokens

    @Test(arguments: Backend.allCases) func appsAreFoundByIdAndByKeyHash(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        #expect(try await store.app(id: Self.appId)?.name == Self.appId)
        #expect(try await store.app(restAPIKeyHash: Array(Self.otherApp.utf8))?.id == Self.otherApp)
        #expect(try await store.app(id: "nope") == nil)
        #expect(try await store.updateAppKeys(appId: Self.appId, authKeyHash: [9], restAPIKeyHash: [8]))
        #expect(try await store.app(restAPIKeyHash: Array(Self.appId.utf8)) == nil)
        #expect(try await store.app(restAPIKeyHash: [8])?.authKeyHash == [9])
        #expect(try await store.apps().map(\.id) == [Self.appId, Self.otherApp])
    }

    @Test(arguments: Backend.allCases) func usersAreUniquePerAppAndUpdatable(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        await #expect(throws: DomainError(.uidAlreadyExists, "A user alice already exists.")) {
            try await store.insertUser(appId: Self.appId, User(uid: "alice", name: "again", createdAt: 2, updatedAt: 2))
        }
        // The same uid may exist in another app.
        try await store.insertUser(appId: Self.otherApp, User(uid: "alice", name: "other", createdAt: 2, updatedAt: 2))
        #expect(try await store.user(appId: Self.appId, uid: "alice")?.name == "alice")
        let ensured = try await store.ensureUser(
            appId: Self.appId, User(uid: "alice", name: "ignored", createdAt: 3, updatedAt: 3))
        #expect(ensured.name == "alice")
        let updated = try await store.updateUser(
            appId: Self.appId, uid: "alice", UpdateUserRequest(name: "Alice", metadata: ["team": "red"]), now: 50
        )
        #expect(updated?.name == "Alice")
        #expect(try await store.user(appId: Self.appId, uid: "alice")?.metadata == ["team": "red"])
        #expect(try await store.user(appId: Self.appId, uid: "alice")?.updatedAt == 50)
        #expect(
            try await store.updateUser(appId: Self.appId, uid: "ghost", UpdateUserRequest(name: "x"), now: 1) == nil)
    }

    @Test(arguments: Backend.allCases) func tokensExpireAndRevoke(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        try await store.insertToken(TokenRecord(id: "t1", hash: [1], appId: Self.appId, uid: "alice", createdAt: 1))
        try await store.insertToken(
            TokenRecord(id: "t2", hash: [2], appId: Self.appId, uid: "alice", createdAt: 2, expiresAt: 100))
        try await store.insertToken(TokenRecord(id: "t3", hash: [3], appId: Self.appId, uid: "bob", createdAt: 3))
        #expect(try await store.token(hash: [2])?.isValid(at: 99) == true)
        #expect(try await store.token(hash: [2])?.isValid(at: 100) == false)
        #expect(try await store.tokens(appId: Self.appId, uid: "alice", now: 150).map(\.id) == ["t1"])
        #expect(try await store.revokeToken(appId: Self.appId, uid: "bob", tokenId: "t1", now: 5) == nil)
        #expect(try await store.revokeToken(appId: Self.appId, uid: "alice", tokenId: "t1", now: 5)?.revokedAt == 5)
        #expect(try await store.token(hash: [1])?.isValid(at: 6) == false)
        #expect(try await store.revokeTokens(appId: Self.appId, uid: "bob", now: 7) == ["t3"])
        #expect(try await store.tokens(appId: Self.appId, uid: "bob", now: 8).isEmpty)
    }

    // MARK: Push devices

    func device(_ id: String, token: String, environment: PushEnvironment = .production, at time: Int64) -> Device {
        Device(deviceId: id, platform: .apns, token: token, environment: environment, createdAt: time, updatedAt: time)
    }

    @Test(arguments: Backend.allCases) func aDeviceIsRegisteredPerUserAndItsTokenReplaced(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        let first = try await store.putDevice(appId: Self.appId, uid: "alice", device("phone", token: "aa11", at: 1))
        #expect(first == device("phone", token: "aa11", at: 1))
        _ = try await store.putDevice(appId: Self.appId, uid: "alice", device("tablet", token: "bb22", at: 2))
        let replaced = try await store.putDevice(
            appId: Self.appId, uid: "alice", device("phone", token: "cc33", environment: .sandbox, at: 3)
        )
        #expect(
            replaced
                == Device(
                    deviceId: "phone", platform: .apns, token: "cc33", environment: .sandbox, createdAt: 1, updatedAt: 3
                ))
        #expect(try await store.devices(appId: Self.appId, uid: "alice").map(\.token) == ["cc33", "bb22"])
        #expect(try await store.devices(appId: Self.appId, uid: "bob").isEmpty)
    }

    @Test(arguments: Backend.allCases) func aTokenRegisteredByAnotherUserMovesToThem(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await store.putDevice(appId: Self.appId, uid: "alice", device("phone", token: "aa11", at: 1))
        _ = try await store.putDevice(appId: Self.otherApp, uid: "mallory", device("phone", token: "aa11", at: 1))
        _ = try await store.putDevice(appId: Self.appId, uid: "bob", device("phone", token: "aa11", at: 2))
        #expect(try await store.devices(appId: Self.appId, uid: "alice").isEmpty)
        #expect(try await store.devices(appId: Self.appId, uid: "bob").map(\.deviceId) == ["phone"])
        // Tokens are unique per app: the other app's registration stays.
        #expect(try await store.devices(appId: Self.otherApp, uid: "mallory").map(\.token) == ["aa11"])
        // Another device id of the same user taking the token also removes the old one.
        _ = try await store.putDevice(appId: Self.appId, uid: "bob", device("phone-2", token: "aa11", at: 3))
        #expect(try await store.devices(appId: Self.appId, uid: "bob").map(\.deviceId) == ["phone-2"])
    }

    @Test(arguments: Backend.allCases) func aDeviceIsDeletedOnlyByItsUser(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await store.putDevice(appId: Self.appId, uid: "alice", device("phone", token: "aa11", at: 1))
        #expect(try await store.deleteDevice(appId: Self.appId, uid: "bob", deviceId: "phone") == false)
        #expect(try await store.deleteDevice(appId: Self.appId, uid: "alice", deviceId: "phone") == true)
        #expect(try await store.deleteDevice(appId: Self.appId, uid: "alice", deviceId: "phone") == false)
        #expect(try await store.devices(appId: Self.appId, uid: "alice").isEmpty)
    }

    // MARK: Conversations and sequence numbers

    @Test(arguments: Backend.allCases) func creatingAGroupEmitsCreateAndOneParticipantAddedPerMember(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        let result = try await apply(
            store,
            .createConversation(
                .init(
                    appId: Self.appId, newId: "c_g", type: .group, creator: "alice",
                    participants: ["bob", "carol", "bob"], name: "G", now: 10))
        )
        #expect(result.events.map(\.event.seq) == [1, 2, 3, 4])
        #expect(
            result.events.map(\.event.name) == [
                .conversationCreate, .participantAdded, .participantAdded, .participantAdded,
            ])
        guard case .participantAdded(let owner) = result.events[1].event.payload else {
            Issue.record("not a participant")
            return
        }
        #expect(owner.uid == "alice" && owner.role == .owner)
        #expect(Set(result.recipients) == ["alice", "bob", "carol"])
        let (row, role) = try #require(try await store.conversation(appId: Self.appId, id: "c_g", viewer: "alice"))
        #expect(row.conversation.lastSeq == 4 && row.conversation.participantCount == 3 && role == .owner)
        #expect(try await store.conversation(appId: Self.otherApp, id: "c_g", viewer: "alice") == nil)
    }

    @Test(arguments: Backend.allCases) func directConversationsAreOnePerPair(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        let first = try await apply(
            store,
            .createConversation(
                .init(appId: Self.appId, newId: "c_d1", type: .direct, creator: "alice", participants: ["bob"], now: 1))
        )
        let second = try await apply(
            store,
            .createConversation(
                .init(appId: Self.appId, newId: "c_d2", type: .direct, creator: "bob", participants: ["alice"], now: 2))
        )
        guard case .conversation(let a, true) = first.outcome, case .conversation(let b, false) = second.outcome else {
            Issue.record("expected created, then existing")
            return
        }
        #expect(a.id == "c_d1" && b.id == "c_d1" && second.events.isEmpty)
        #expect(
            try await refusal(
                store,
                .createConversation(
                    .init(
                        appId: Self.appId, newId: "x", type: .direct, creator: "alice", participants: ["alice"], now: 3)
                )) == .badRequest)
        #expect(
            try await refusal(
                store,
                .createConversation(
                    .init(
                        appId: Self.appId, newId: "x", type: .direct, creator: "alice", participants: ["bob", "carol"],
                        now: 3))) == .badRequest)
        #expect(
            try await refusal(
                store,
                .createConversation(
                    .init(
                        appId: Self.appId, newId: "x", type: .direct, creator: "alice", participants: ["mallory"],
                        now: 3))) == .uidNotFound)
    }

    @Test(arguments: Backend.allCases) func sequenceNumbersIncreaseByOneAcrossEventKinds(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store)
        var seqs: [Int64] = []
        for index in 0..<5 {
            seqs += try await apply(store, send(store, "c_g", from: index.isMultiple(of: 2) ? "alice" : "bob")).events
                .compactMap(\.event.seq)
        }
        seqs += try await apply(
            store,
            .addParticipants(
                .init(appId: Self.appId, conversationId: "c_g", actor: "alice", entries: [.init(uid: "carol")], now: 30)
            )
        ).events.compactMap(\.event.seq)
        seqs += try await apply(store, send(store, "c_g", from: "carol")).events.compactMap(\.event.seq)
        #expect(seqs == Array(4...10))
    }

    @Test(arguments: Backend.allCases) func concurrentWritersNeverShareOrSkipASequenceNumber(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store)
        let seqs = try await withThrowingTaskGroup(of: [Int64].self) { tasks in
            for writer in 0..<8 {
                tasks.addTask {
                    var seqs: [Int64] = []
                    for _ in 0..<25 {
                        let batch = (0..<3).map { _ in
                            send(store, "c_g", from: writer.isMultiple(of: 2) ? "alice" : "bob")
                        }
                        for result in try await store.apply(batch) {
                            seqs += try result.get().events.compactMap(\.event.seq)
                        }
                    }
                    return seqs
                }
            }
            return try await tasks.reduce(into: []) { $0 += $1 }
        }
        #expect(seqs.sorted() == Array(4...Int64(3 + 8 * 25 * 3)))
    }

    @Test(arguments: Backend.allCases) func aRefusedCommandDoesNotDisturbItsBatch(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store)
        let results = try await store.apply([
            send(store, "c_g", from: "alice"),
            send(store, "c_nope", from: "alice"),
            send(store, "c_g", from: "carol"),
            send(store, "c_g", from: "bob"),
        ])
        #expect(try results[0].get().events.map(\.event.seq) == [4])
        #expect(results[1].failureCode == .conversationNotFound)
        #expect(results[2].failureCode == .conversationNotFound)
        #expect(try results[3].get().events.map(\.event.seq) == [5])
    }

    @Test(arguments: Backend.allCases) func aClientMessageIdIsStoredOnce(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store)
        let first = try await apply(store, send(store, "c_g", from: "alice", text: "once", clientId: "cm-1"))
        let again = try await apply(store, send(store, "c_g", from: "alice", text: "once", clientId: "cm-1"))
        let otherSender = try await apply(store, send(store, "c_g", from: "bob", text: "same id", clientId: "cm-1"))
        guard case .message(let original, false) = first.outcome, case .message(let repeated, true) = again.outcome,
            case .message(_, false) = otherSender.outcome
        else {
            Issue.record("expected new, duplicate, new")
            return
        }
        #expect(repeated == original && again.events.isEmpty)
        let history = try await store.messages(appId: Self.appId, conversationId: "c_g", query: HistoryQuery(limit: 10))
            .messages
        #expect(history.map(\.seq) == [5, 4])
    }

    @Test(arguments: Backend.allCases) func onlyParticipantsSendAndPrivacyHidesConversations(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, id: "c_private")
        _ = try await group(store, id: "c_public", isPublic: true)
        #expect(try await refusal(store, send(store, "c_private", from: "carol")) == .conversationNotFound)
        #expect(try await refusal(store, send(store, "c_public", from: "carol")) == .notAParticipant)
        #expect(
            try await refusal(store, send(store, "c_private", from: "mallory", appId: Self.otherApp))
                == .conversationNotFound)
        let (_, role) = try #require(try await store.conversation(appId: Self.appId, id: "c_private", viewer: "carol"))
        #expect(role == nil)
    }

    @Test(arguments: Backend.allCases) func rolesDecideWhoAddsParticipants(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store)
        func add(_ actor: String, _ uid: String, _ role: ParticipantRole? = nil) -> Command {
            .addParticipants(
                .init(
                    appId: Self.appId, conversationId: "c_g", actor: actor, entries: [.init(uid: uid, role: role)],
                    now: 40))
        }
        #expect(try await refusal(store, add("bob", "carol")) == .forbidden)
        #expect(try await refusal(store, add("alice", "carol", .owner)) == .forbidden)
        #expect(try await refusal(store, add("alice", "ghost")) == .uidNotFound)
        #expect(try await refusal(store, add("carol", "dave")) == .conversationNotFound)
        let added = try await apply(store, add("alice", "carol", .admin))
        #expect(added.events.count == 1 && Set(added.recipients) == ["alice", "bob", "carol"])
        #expect(try await apply(store, add("carol", "dave")).events.count == 1)
        // Adding someone who is already there changes nothing.
        #expect(try await apply(store, add("alice", "dave")).events.isEmpty)
        let direct = try await apply(
            store,
            .createConversation(
                .init(appId: Self.appId, newId: "c_d", type: .direct, creator: "alice", participants: ["bob"], now: 1)))
        guard case .conversation(let conversation, _) = direct.outcome else { return }
        #expect(
            try await refusal(
                store,
                .addParticipants(
                    .init(
                        appId: Self.appId, conversationId: conversation.id, actor: "alice",
                        entries: [.init(uid: "carol")], now: 2))) == .forbidden)
    }

    @Test(arguments: Backend.allCases) func historyPagesBackwardsOverMessagesOnly(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store)
        for index in 1...7 { _ = try await apply(store, send(store, "c_g", from: "alice", text: "m\(index)")) }
        let newest = try await store.messages(appId: Self.appId, conversationId: "c_g", query: HistoryQuery(limit: 3))
            .messages
        #expect(newest.map(\.text) == ["m7", "m6", "m5"])
        let older = try await store.messages(
            appId: Self.appId, conversationId: "c_g", query: HistoryQuery(beforeSeq: newest.last!.seq, limit: 10)
        ).messages
        #expect(older.map(\.text) == ["m4", "m3", "m2", "m1"])
        #expect(
            try await store.messages(appId: Self.otherApp, conversationId: "c_g", query: HistoryQuery(limit: 10))
                .messages.isEmpty)
    }

    @Test(arguments: Backend.allCases) func conversationsAreListedByRecentActivityWithACursor(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        for index in 0..<5 { _ = try await group(store, id: "c_\(index)") }
        _ = try await apply(store, send(store, "c_2", from: "bob"))
        let first = try await store.conversations(appId: Self.appId, uid: "bob", query: ConversationQuery(limit: 3))
        #expect(first.first?.conversation.id == "c_2")
        let rest = try await store.conversations(
            appId: Self.appId, uid: "bob", query: ConversationQuery(after: first.last!.position, limit: 10))
        #expect(Set((first + rest).map(\.conversation.id)) == Set((0..<5).map { "c_\($0)" }))
        #expect(first.count + rest.count == 5)
        #expect(
            try await store.conversations(appId: Self.appId, uid: "dave", query: ConversationQuery(limit: 10)).isEmpty)
    }
}

extension StoreConformanceTests {
    func action(_ conversationId: String, by actor: String) -> Command.ConversationAction {
        .init(appId: Self.appId, conversationId: conversationId, actor: actor, now: 50)
    }

    @Test(arguments: Backend.allCases) func groupsAreUpdatedDeletedAndRestoredWithOneEventEach(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store)
        let updated = try await apply(
            store,
            .updateConversation(
                .init(
                    appId: Self.appId, conversationId: "c_g", actor: "alice",
                    update: UpdateConversationRequest(name: "New", isPublic: true), now: 40)))
        guard case .conversation(let conversation, false) = updated.outcome else {
            Issue.record("no conversation")
            return
        }
        #expect(conversation.name == "New" && conversation.isPublic && conversation.lastSeq == 4)
        #expect(updated.events.map(\.event.name) == [.conversationUpdate] && updated.events.first?.event.seq == 4)
        #expect(
            try await refusal(
                store,
                .updateConversation(
                    .init(
                        appId: Self.appId, conversationId: "c_g", actor: "bob",
                        update: UpdateConversationRequest(name: "x"), now: 41))) == .forbidden)

        #expect(try await refusal(store, .deleteConversation(action("c_g", by: "bob"))) == .forbidden)
        let deleted = try await apply(store, .deleteConversation(action("c_g", by: "alice")))
        #expect(deleted.events.map(\.event.name) == [.conversationDelete])
        #expect(try await refusal(store, send(store, "c_g", from: "bob")) == .conversationNotFound)
        #expect(try await store.activeParticipants(appId: Self.appId, conversationId: "c_g") == nil)
        #expect(try await refusal(store, .undeleteConversation(action("c_g", by: "bob"))) == .conversationNotFound)
        let restored = try await apply(store, .undeleteConversation(action("c_g", by: "alice")))
        #expect(restored.events.map(\.event.name) == [.conversationUndelete] && restored.events.first?.event.seq == 6)
        // Deleting twice, or restoring what is not deleted, changes nothing.
        #expect(try await apply(store, .undeleteConversation(action("c_g", by: "alice"))).events.isEmpty)
    }

    @Test(arguments: Backend.allCases) func participantsJoinChangeRoleAndLeave(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, id: "c_pub", isPublic: true)
        _ = try await group(store, id: "c_priv")
        #expect(try await refusal(store, .join(action("c_priv", by: "carol"))) == .conversationNotFound)
        let joined = try await apply(store, .join(action("c_pub", by: "carol")))
        #expect(
            joined.events.map(\.event.name) == [.participantAdded]
                && Set(joined.recipients) == ["alice", "bob", "carol"])
        #expect(try await apply(store, .join(action("c_pub", by: "carol"))).events.isEmpty)

        func role(_ actor: String, _ uid: String, _ role: ParticipantRole) -> Command {
            .updateParticipant(
                .init(appId: Self.appId, conversationId: "c_pub", actor: actor, uid: uid, role: role, now: 60))
        }
        #expect(try await refusal(store, role("bob", "carol", .admin)) == .forbidden)
        #expect(try await refusal(store, role("alice", "alice", .member)) == .forbidden)
        let promoted = try await apply(store, role("alice", "carol", .admin))
        guard case .participant(let carol) = promoted.outcome else {
            Issue.record("no participant")
            return
        }
        #expect(carol.role == .admin && promoted.events.map(\.event.name) == [.participantUpdated])

        func remove(_ actor: String, _ uid: String) -> Command {
            .removeParticipant(.init(appId: Self.appId, conversationId: "c_pub", actor: actor, uid: uid, now: 70))
        }
        #expect(try await refusal(store, remove("carol", "alice")) == .forbidden)
        #expect(try await refusal(store, remove("alice", "alice")) == .forbidden)
        let removed = try await apply(store, remove("carol", "bob"))
        #expect(
            Set(removed.recipients) == ["alice", "bob", "carol"] && Set(removed.participants) == ["alice", "carol"])
        guard case .participantRemoved(let bob) = removed.events.first?.event.payload else {
            Issue.record("no event")
            return
        }
        #expect(bob.uid == "bob")
        #expect(try await refusal(store, send(store, "c_pub", from: "bob")) == .notAParticipant)
        let left = try await apply(store, remove("carol", "carol"))
        #expect(left.events.count == 1 && left.participants == ["alice"])
    }

    @Test(arguments: Backend.allCases) func receiptsMoveForwardAndUnreadCountsFollow(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob", "carol"])
        var seqs: [Int64] = []
        var sent: [Message] = []
        for index in 0..<4 {
            let result = try await apply(store, send(store, "c_g", from: index == 2 ? "bob" : "alice"))
            seqs += result.events.compactMap(\.event.seq)
            sent += result.events.compactMap(\.event.payload.message)
        }
        // alice sent 3, bob 1: sending reads the conversation up to your message.
        let bobUnread = try await store.unread(appId: Self.appId, uid: "bob", conversationIds: nil)
        #expect(bobUnread.total == 1 && bobUnread.conversations.first?.unread == 1)
        #expect(try await store.unread(appId: Self.appId, uid: "carol", conversationIds: nil).total == 4)
        // Her last message came after bob's.
        #expect(try await store.unread(appId: Self.appId, uid: "alice", conversationIds: nil).total == 0)

        func mark(_ uid: String, delivered: Int64? = nil, read: Int64? = nil) -> Command {
            .markReceipt(
                .init(
                    appId: Self.appId, conversationId: "c_g", uid: uid, deliveredSeq: delivered, readSeq: read, now: 90)
            )
        }
        let marked = try await apply(store, mark("carol", delivered: seqs[3], read: seqs[1]))
        #expect(marked.events.map(\.event.name) == [.messageDelivered, .messageRead])
        #expect(marked.events.allSatisfy { $0.event.seq == nil })
        // Each receipt names the newest message it reaches.
        #expect(
            marked.events.map(\.event.payload) == [
                .messageDelivered(
                    Receipt(uid: "carol", seq: seqs[3], messageId: sent[3].id, timestamp: sent[3].sentAt)),
                .messageRead(Receipt(uid: "carol", seq: seqs[1], messageId: sent[1].id, timestamp: sent[1].sentAt)),
            ])
        #expect(
            try await store.unread(appId: Self.appId, uid: "carol", conversationIds: ["c_g"]).conversations.first?
                .unread == 2)
        #expect(try await apply(store, mark("carol", read: seqs[0])).events.isEmpty)
        let clamped = try await apply(store, mark("carol", read: 10_000))
        guard case .participant(let carol) = clamped.outcome else {
            Issue.record("no participant")
            return
        }
        #expect(carol.readSeq == seqs[3] && carol.deliveredSeq == seqs[3])
        #expect(try await store.unread(appId: Self.appId, uid: "carol", conversationIds: nil).total == 0)
        #expect(try await refusal(store, mark("dave", read: 1)) == .conversationNotFound)
    }

    @Test(arguments: Backend.allCases) func unreadCountsOfListedConversationsLeaveTheOthersOut(_ backend: Backend)
        async throws
    {
        let store = try await prepared(backend)
        for id in ["c_1", "c_2", "c_3"] { _ = try await group(store, id: id, members: ["bob", "carol"]) }
        _ = try await group(store, id: "c_mine", members: ["carol"])
        for (id, count) in [("c_1", 1), ("c_2", 2), ("c_3", 3), ("c_mine", 4)] {
            for _ in 0..<count { _ = try await apply(store, send(store, id, from: "alice")) }
        }
        let all = try await store.unread(appId: Self.appId, uid: "bob", conversationIds: nil)
        #expect(all.total == 6 && all.conversations.map(\.conversationId) == ["c_1", "c_2", "c_3"])
        // Only those asked for, the total over them; one asked for twice counts once.
        let listed = try await store.unread(appId: Self.appId, uid: "bob", conversationIds: ["c_3", "c_1", "c_3"])
        #expect(listed.total == 4 && listed.conversations.map(\.conversationId) == ["c_1", "c_3"])
        #expect(listed.conversations.map(\.unread) == [1, 3])
        #expect(listed.conversations == all.conversations.filter { $0.conversationId != "c_2" })
        // A conversation bob is not in, one that does not exist, one he left, one deleted: left out.
        _ = try await apply(
            store,
            .removeParticipant(.init(appId: Self.appId, conversationId: "c_2", actor: "bob", uid: "bob", now: 30)))
        _ = try await apply(store, .deleteConversation(action("c_3", by: "alice")))
        let gone = try await store.unread(
            appId: Self.appId, uid: "bob", conversationIds: ["c_mine", "c_none", "c_2", "c_3", "c_1"])
        #expect(gone.total == 1 && gone.conversations.map(\.conversationId) == ["c_1"])
        #expect(try await store.unread(appId: Self.appId, uid: "bob", conversationIds: []).total == 0)
        // Another app's user of the same name reads nothing of this app.
        #expect(
            try await store.unread(appId: Self.otherApp, uid: "bob", conversationIds: ["c_1"]).conversations.isEmpty)
    }

    /// The unread notifier's pushes read many users at once: each answer is what that user's read alone would be.
    @Test(arguments: Backend.allCases) func unreadCountsOfManyUsersAreEachUsersOwn(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        for id in ["c_1", "c_2"] { _ = try await group(store, id: id, members: ["bob", "carol"]) }
        for _ in 0..<2 { _ = try await apply(store, send(store, "c_1", from: "alice")) }
        _ = try await apply(store, send(store, "c_2", from: "bob"))
        let requests = [
            UnreadRequest(appId: Self.appId, uid: "bob", conversationIds: ["c_1"], everyConversation: true),
            UnreadRequest(
                appId: Self.appId, uid: "carol", conversationIds: ["c_2", "c_none"], everyConversation: false),
            UnreadRequest(appId: Self.appId, uid: "nobody", conversationIds: [], everyConversation: true),
            UnreadRequest(appId: Self.appId, uid: "bob", conversationIds: ["c_2", "c_1"], everyConversation: false),
            UnreadRequest(appId: Self.otherApp, uid: "carol", conversationIds: ["c_1"], everyConversation: false),
        ]
        let together = try await store.unread(requests)
        var alone: [UnreadSummary] = []
        for request in requests {
            alone.append(try await store.unread(appId: request.appId, uid: request.uid, conversationIds: request.reads))
        }
        #expect(together == alone)
        #expect(together.map(\.total) == [2, 1, 0, 2, 0])
        #expect(try await store.unread([]).isEmpty)
    }

    @Test func aWholeReadForABatchFailsForAUserInMoreConversationsThanItAllows() async throws {
        let store = try await prepared(.sqlite)
        for id in ["c_1", "c_2", "c_3"] { _ = try await group(store, id: id, members: ["bob"]) }
        _ = try await apply(store, send(store, "c_2", from: "alice"))
        let reads = try #require(store as? any InlineReads)
        func request(everyConversation: Bool = true, max: Int?) -> UnreadRequest {
            UnreadRequest(
                appId: Self.appId, uid: "bob", conversationIds: ["c_2"], everyConversation: everyConversation,
                maxConversations: max)
        }
        #expect(throws: DatabaseError.self) { try reads.unread([request(max: 2)]) }
        #expect(try reads.unread([request(max: 3)])[0].total == 1)
        #expect(try reads.unread([request(max: nil)])[0].conversations.count == 3)
        // A read of what changed reads only that, whatever the bound.
        #expect(try reads.unread([request(everyConversation: false, max: 0)])[0].conversations.count == 1)
    }

    @Test(arguments: Backend.allCases) func newParticipantsStartWithNothingUnread(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store)
        for _ in 0..<3 { _ = try await apply(store, send(store, "c_g", from: "alice")) }
        _ = try await apply(
            store,
            .addParticipants(
                .init(appId: Self.appId, conversationId: "c_g", actor: "alice", entries: [.init(uid: "carol")], now: 95)
            ))
        #expect(try await store.unread(appId: Self.appId, uid: "carol", conversationIds: nil).total == 0)
        _ = try await apply(store, send(store, "c_g", from: "bob"))
        #expect(try await store.unread(appId: Self.appId, uid: "carol", conversationIds: nil).total == 1)
    }

    @Test(arguments: Backend.allCases) func contactsAreTheUsersSharingALiveConversation(_ backend: Backend) async throws
    {
        let store = try await prepared(backend)
        _ = try await group(store, id: "c_1", members: ["bob"])
        _ = try await group(store, id: "c_2", owner: "carol", members: ["alice", "dave"])
        #expect(Set(try await store.contacts(appId: Self.appId, uid: "alice")) == ["bob", "carol", "dave"])
        #expect(Set(try await store.contacts(appId: Self.appId, uid: "bob")) == ["alice"])
        if let inline = store as? any InlineReads {
            // Several users' contacts in one read (the presence tracker's batches), in the order asked.
            let asked = [(Self.appId, "bob"), (Self.appId, "alice"), (Self.otherApp, "alice"), (Self.appId, "nobody")]
            let together = try inline.contacts(of: asked)
            #expect(together.count == asked.count)
            for (index, (appId, uid)) in asked.enumerated() where index < together.count {
                #expect(Set(together[index]) == Set(try await store.contacts(appId: appId, uid: uid)), "\(uid)")
            }
            #expect(Set(together[1]) == ["bob", "carol", "dave"])
        }
        // The same through the store's own batch read (one query per app on PostgreSQL), a user asked twice included.
        let users = [
            UserRef(appId: Self.appId, uid: "bob"), UserRef(appId: Self.appId, uid: "alice"),
            UserRef(appId: Self.otherApp, uid: "alice"), UserRef(appId: Self.appId, uid: "nobody"),
            UserRef(appId: Self.appId, uid: "bob"),
        ]
        let batched = try await store.contacts(of: users)
        #expect(batched.count == users.count)
        for (index, user) in users.enumerated() where index < batched.count {
            #expect(Set(batched[index]) == Set(try await store.contacts(appId: user.appId, uid: user.uid)), "\(user)")
        }
        #expect(Set(batched[1]) == ["bob", "carol", "dave"] && batched[3].isEmpty)
        _ = try await apply(store, .deleteConversation(action("c_2", by: "carol")))
        #expect(Set(try await store.contacts(appId: Self.appId, uid: "alice")) == ["bob"])
        #expect(try await store.contacts(appId: Self.otherApp, uid: "alice").isEmpty)
    }

    // MARK: Resume

    @Test(arguments: Backend.allCases) func eventsAfterAPositionComeInSequenceOrder(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])  // seq 1 create, 2 and 3 participants added
        for index in 0..<4 { _ = try await apply(store, send(store, "c_g", from: "alice", text: "m\(index)")) }
        let all = try await store.events(appId: Self.appId, conversationId: "c_g", afterSeq: 0, limit: 100)
        #expect(all.map(\.event.seq) == [1, 2, 3, 4, 5, 6, 7])
        #expect(all.first?.event.name == .conversationCreate && all.last?.event.name == .messageSent)
        let page = try await store.events(appId: Self.appId, conversationId: "c_g", afterSeq: 3, limit: 2)
        #expect(page.map(\.event.seq) == [4, 5])
        guard case .messageSent(let message) = page[0].event.payload else {
            Issue.record("not a message")
            return
        }
        #expect(message.parts == [.text("m0")])
        // The stored JSON is the event as it was published.
        let decoded = try JSONDecoder().decode(Event.self, from: Data(page[1].json))
        #expect(decoded == page[1].event)
        #expect(try await store.events(appId: Self.appId, conversationId: "c_g", afterSeq: 7, limit: 10).isEmpty)
        #expect(try await store.events(appId: Self.appId, conversationId: "c_none", afterSeq: 0, limit: 10).isEmpty)
        #expect(try await store.events(appId: Self.otherApp, conversationId: "c_g", afterSeq: 0, limit: 10).isEmpty)
    }

    @Test(arguments: Backend.allCases) func eachUsersStreamRecordsJoinsAndDepartures(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, id: "c_1", members: ["bob"])  // created at seq 1 (bob's participantAdded: 3)
        _ = try await group(store, id: "c_2", owner: "carol", members: [], isPublic: true)
        _ = try await apply(store, .join(action("c_2", by: "bob")))  // seq 3 of c_2
        _ = try await apply(store, send(store, "c_1", from: "alice"))  // seq 4 of c_1
        _ = try await apply(
            store,
            .removeParticipant(.init(appId: Self.appId, conversationId: "c_1", actor: "alice", uid: "bob", now: 50))
        )  // seq 5 of c_1
        let bob = try await store.membershipChanges(appId: Self.appId, uid: "bob", afterUserSeq: 0, limit: 10)
        #expect(
            bob == [
                // A creation's members join at the creation event; a later join at its participantAdded event.
                MembershipChange(userSeq: 1, conversationId: "c_1", joined: true, seq: 1),
                MembershipChange(userSeq: 2, conversationId: "c_2", joined: true, seq: 3),
                MembershipChange(userSeq: 3, conversationId: "c_1", joined: false, seq: 5),
            ]
        )
        #expect(
            try await store.membershipChanges(appId: Self.appId, uid: "bob", afterUserSeq: 1, limit: 1).map(\.userSeq)
                == [2])
        #expect(
            try await store.membershipChanges(appId: Self.appId, uid: "alice", afterUserSeq: 0, limit: 10)
                == [MembershipChange(userSeq: 1, conversationId: "c_1", joined: true, seq: 1)]
        )
        #expect(
            try await store.streamPositions(appId: Self.appId, uid: "bob")
                == StreamPositions(userSeq: 3, conversations: ["c_2": 3]))
        #expect(
            try await store.streamPositions(appId: Self.appId, uid: "alice")
                == StreamPositions(userSeq: 1, conversations: ["c_1": 5]))
        #expect(
            try await store.streamPositions(appId: Self.appId, uid: "dave")
                == StreamPositions(userSeq: 0, conversations: [:]))
        #expect(try await store.membershipChanges(appId: Self.otherApp, uid: "bob", afterUserSeq: 0, limit: 10).isEmpty)
    }

    @Test(arguments: Backend.allCases) func aRefusedCommandLeavesNoTraceInAnyStream(_ backend: Backend) async throws {
        let store = try await prepared(backend)
        _ = try await group(store, members: ["bob"])
        let results = try await store.apply([
            .addParticipants(
                .init(appId: Self.appId, conversationId: "c_g", actor: "bob", entries: [.init(uid: "carol")], now: 30)),
            .addParticipants(
                .init(
                    appId: Self.appId, conversationId: "c_g", actor: "alice",
                    entries: [.init(uid: "carol"), .init(uid: "nobody")], now: 30)),
            .addParticipants(
                .init(appId: Self.appId, conversationId: "c_g", actor: "alice", entries: [.init(uid: "dave")], now: 30)),
        ])
        #expect(results.map(\.failureCode) == [.forbidden, .uidNotFound, nil])
        #expect(try await store.membershipChanges(appId: Self.appId, uid: "carol", afterUserSeq: 0, limit: 10).isEmpty)
        #expect(
            try await store.membershipChanges(appId: Self.appId, uid: "dave", afterUserSeq: 0, limit: 10).map(\.seq)
                == [4])
        #expect(
            try await store.events(appId: Self.appId, conversationId: "c_g", afterSeq: 0, limit: 10).map(\.event.seq)
                == [1, 2, 3, 4])
    }
}

extension Result where Failure == DomainError {
    var failureCode: ErrorCode? {
        if case .failure(let error) = self { return error.code }
        return nil
    }
}
