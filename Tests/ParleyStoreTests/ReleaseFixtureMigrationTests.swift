import Foundation
import GRDB
import Logging
import ParleyProtocol
import ParleyStore
import ParleyTesting
import PostgresNIO
import Testing

@testable import ParleyStorePostgres
@testable import ParleyStoreSQLite

/// Databases written by the release before `events` became a log (3b38d04: SQLite schema v13, PostgreSQL 15), made by
/// `Fixtures/release-v13/make.py` driving that release's server, migrate forward in place: every message (by history,
/// by id, by thread), reaction, file, receipt, unread count and unread mention the release's own API showed is found,
/// and the store goes on from there (a retried client message id is still the first message, seq continues).
@Suite(StoreCleanup()) struct ReleaseFixtureMigrationTests {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/release-v13")

    @Test func aSQLiteDatabaseOfTheReleaseMigratesWithEverythingInIt() async throws {
        let fixture = try ReleaseFixture.load(Self.folder.appendingPathComponent("sqlite/expected.json"))
        let directory = try TemporaryDirectory(prefix: "parley-release-fixture")
        let path = directory.path + "/parley.sqlite"
        try FileManager.default.copyItem(
            atPath: Self.folder.appendingPathComponent("sqlite/parley.sqlite").path, toPath: path)
        let store = try SQLiteStore(path: path)
        await StoreCleanup.register(store)
        let tables = try await store.pool.read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE tbl_name = 'events' ORDER BY name")
        }
        #expect(tables == ["events", "events_by_conversation", "events_by_thread"])
        try await fixture.verify(store)
        try await fixture.goesOn(store)
    }

    @Test(
        .enabled(if: PostgresTestDatabase.isConfigured, "PARLEY_TEST_DATABASE_URL is not set: PostgreSQL test SKIPPED.")
    )
    func aPostgreSQLDatabaseOfTheReleaseMigratesWithEverythingInIt() async throws {
        let fixture = try ReleaseFixture.load(Self.folder.appendingPathComponent("postgres/expected.json"))
        let version = try Int64(
            String(contentsOf: Self.folder.appendingPathComponent("postgres/schema-version.txt"), encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines))!
        let statements = try String(
            contentsOf: Self.folder.appendingPathComponent("postgres/data.sql"), encoding: .utf8
        )
        .split(separator: "\n").map(String.init).filter { !$0.isEmpty }
        let database = try await PostgresTestDatabase.create()
        await StoreCleanup.register(database: database)
        // The release's schema (migrations are never edited, so those up to its version are its schema), then its
        // rows as it wrote them.
        let configuration = try PostgresDatabaseURL(database.url).connectionConfiguration(connectTimeout: .seconds(10))
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: .quiet)
        do {
            let applied = try await PostgresStore.migrate(connection, logger: .quiet, through: version)
            #expect(applied.last == version)
            _ = try await connection.query("DELETE FROM deployment", logger: .quiet)
            for statement in statements {
                _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: .quiet)
            }
            try await connection.close()
        } catch {
            try? await connection.close()
            throw error
        }
        let store = try await PostgresStore.connect(
            url: database.url, logger: .quiet, timeout: .seconds(60), maximumConnections: 4)
        await StoreCleanup.register(store)
        try await fixture.verify(store)
        try await fixture.goesOn(store)
    }
}

/// What the release's API showed before its server stopped (`expected.json`).
struct ReleaseFixture: Decodable {
    struct App: Decodable { var id: String }
    struct Participant: Decodable {
        var uid: String
        var readSeq: Int64
    }
    struct StoredMessage: Decodable {
        var id: String
        var seq: Int64
        var sender: String
        var clientMessageId: String?
        var text: String?
        var deleted: Bool
        var editedAt: Int64?
        var replyTo: String?
        var replyCount: Int
        var mentions: [String]
        var attachments: [String]
        var reactions: [String: [String]]
    }
    struct Conversation: Decodable {
        var id: String
        var lastSeq: Int64
        var participants: [Participant]
        var messages: [StoredMessage]
    }
    struct ConversationUnread: Decodable {
        var unread: Int
        var readSeq: Int64
        var lastSeq: Int64
    }
    struct Unread: Decodable {
        var total: Int
        var conversations: [String: ConversationUnread]
    }
    struct File: Decodable {
        var id: String
        var conversationId: String
        var name: String
        var size: Int64
        var sha256: String
        var messageId: String?
    }

    var app: App
    var conversations: [Conversation]
    var unread: [String: Unread]
    var unreadMentions: [String: [String]]
    var attachments: [File]

    static func load(_ url: URL) throws -> ReleaseFixture {
        try JSONDecoder().decode(ReleaseFixture.self, from: Data(contentsOf: url))
    }

    var appId: String { app.id }

    /// Everything the release showed, read back through the store.
    func verify(_ store: any ParleyStore) async throws {
        #expect(conversations.map(\.messages.count).reduce(0, +) == 35)
        for conversation in conversations {
            let uids = conversation.participants.map(\.uid)
            for viewer in uids {
                let history = try await store.messages(
                    appId: appId, conversationId: conversation.id, query: HistoryQuery(limit: 500, viewer: viewer))
                #expect(history.lastSeq == conversation.lastSeq)
                // History lists top-level messages and replies alike, newest first.
                let found = history.messages.reversed()
                #expect(found.map(\.id) == conversation.messages.map(\.id), "history of \(conversation.id)")
                for (message, expected) in zip(found, conversation.messages) {
                    check(message, expected, viewer: viewer)
                }
            }
            for expected in conversation.messages {
                let message = try await store.message(
                    appId: appId, conversationId: conversation.id, messageId: expected.id, viewer: uids[0])
                #expect(message?.seq == expected.seq, "\(expected.id) by id")
                if let message { check(message, expected, viewer: uids[0]) }
                guard expected.replyCount > 0 else { continue }
                let thread = try await store.messages(
                    appId: appId, conversationId: conversation.id,
                    query: HistoryQuery(limit: 50, viewer: uids[0], thread: expected.id))
                #expect(thread.parent?.id == expected.id)
                #expect(
                    Set(thread.messages.map(\.id))
                        == Set(conversation.messages.filter { $0.replyTo == expected.id }.map(\.id)))
            }
        }
        for (uid, expected) in unread {
            let summary = try await store.unread(appId: appId, uid: uid, conversationIds: nil)
            #expect(summary.total == expected.total, "unread total of \(uid)")
            for (id, counts) in expected.conversations {
                let found = summary.conversations.first { $0.conversationId == id }
                #expect(found?.unread == counts.unread, "unread of \(uid) in \(id)")
                #expect(found?.readSeq == counts.readSeq, "read position of \(uid) in \(id)")
                #expect(found?.lastSeq == counts.lastSeq)
            }
        }
        for (uid, expected) in unread {
            // The inbox of the release's users agrees with their unread counts.
            let inbox = try await store.inbox(InboxRequest(appId: appId, uid: uid, limit: 200))
            #expect(inbox.totalUnread == expected.total, "inbox total of \(uid)")
            for entry in inbox.entries {
                #expect(entry.unread == expected.conversations[entry.id]?.unread, "inbox of \(uid): \(entry.id)")
                let messages = conversations.first { $0.id == entry.id }?.messages
                #expect(entry.lastMessage?.id == messages?.last?.id, "last message of \(entry.id) for \(uid)")
            }
        }
        for (uid, expected) in unreadMentions {
            let rows = try await store.unreadMentions(appId: appId, uid: uid, after: nil, limit: 50)
            #expect(Set(rows.map(\.message.id)) == Set(expected), "unread mentions of \(uid)")
        }
        // The messages stored before the search existed are found once filed (the server's indexer does it at start).
        while try await store.fileSearchIndex(limit: 100) == 100 {}
        var searched = 0
        for conversation in conversations {
            for expected in conversation.messages where !expected.deleted {
                guard let word = MessageSearch.tokens(expected.text ?? "").first else { continue }
                let page = try await store.searchMessages(
                    MessageSearchRequest(
                        appId: appId, viewer: nil, query: SearchQuery(terms: [.word(word, prefix: false)]),
                        conversationId: conversation.id, limit: 200
                    )
                )
                #expect(page.messages.contains { $0.id == expected.id }, "\(expected.id) found by \(word)")
                searched += 1
            }
        }
        #expect(searched > 20)
        // The users of the release are in the directory (the migration filed their words).
        var users: [User] = []
        var after: String?
        repeat {
            users += try await store.users(appId: appId, after: after, limit: 100)
            after = users.count % 100 == 0 ? users.last?.uid : nil
        } while after != nil
        #expect(users.count > 2)
        for user in users {
            let page = try await store.searchUsers(
                UserSearchRequest(
                    appId: appId, prefixes: try UserDirectory.prefixes(of: user.name), viewer: nil,
                    visibility: .everyone, limit: 100
                )
            )
            #expect(page.users.contains { $0.uid == user.uid }, "\(user.uid) found by their name \(user.name)")
        }
        #expect(!attachments.isEmpty)
        for file in attachments {
            let record = try await store.attachment(appId: appId, id: file.id)
            #expect(record?.attachment.name == file.name)
            #expect(record?.attachment.size == file.size)
            #expect(record?.attachment.sha256 == file.sha256)
            #expect(record?.attachment.conversationId == file.conversationId)
            #expect(record?.messageId == file.messageId)
        }
    }

    private func check(_ message: Message, _ expected: StoredMessage, viewer: String) {
        #expect(message.seq == expected.seq)
        #expect(message.sender == expected.sender)
        #expect(message.clientMessageId == expected.clientMessageId)
        #expect(message.isDeleted == expected.deleted, "\(expected.id) deleted")
        #expect(message.text == (expected.text ?? ""), "\(expected.id) text")
        #expect(message.editedAt == expected.editedAt)
        #expect(message.replyTo == expected.replyTo)
        #expect((message.replyCount ?? 0) == expected.replyCount, "\(expected.id) replies")
        #expect(Set(message.mentions ?? []) == Set(expected.mentions))
        #expect(message.parts.compactMap(\.file?.id) == expected.attachments)
        let reactions = message.reactions ?? []
        #expect(Set(reactions.map(\.key)) == Set(expected.reactions.keys), "\(expected.id) reactions")
        for reaction in reactions {
            let uids = expected.reactions[reaction.key] ?? []
            #expect(reaction.count == uids.count)
            #expect(reaction.reacted == uids.contains(viewer))
        }
    }

    /// After the migration: a retry of a message the release stored is still that message, an edit and a reaction
    /// find an old message by its id, and a new message continues the conversation's sequence.
    func goesOn(_ store: any ParleyStore) async throws {
        let conversation = try #require(conversations.first { $0.messages.count > 20 })
        let old = try #require(
            conversation.messages.last { !$0.deleted && $0.clientMessageId != nil && $0.replyTo == nil })
        let now: Int64 = 1_900_000_000_000
        let retry = try await store.apply([
            .sendMessage(
                .init(
                    appId: appId, conversationId: conversation.id, sender: old.sender, messageId: "m_after1",
                    clientMessageId: old.clientMessageId, parts: [.text("again")], metadata: nil, alert: nil, now: now))
        ])[0].get()
        guard case .message(let first, let duplicate) = retry.outcome else {
            Issue.record("a send answered \(retry.outcome)")
            return
        }
        #expect(duplicate && first.id == old.id && first.seq == old.seq)
        let clientId = TimeOrderedUUID.make(milliseconds: now).uuidString
        let results = try await store.apply([
            .sendMessage(
                .init(
                    appId: appId, conversationId: conversation.id, sender: old.sender, messageId: "m_after2",
                    clientMessageId: clientId, parts: [.text("new")], metadata: nil, alert: nil, now: now)),
            .editMessage(
                .init(
                    appId: appId, conversationId: conversation.id, actor: old.sender, messageId: old.id,
                    parts: [.text("edited after the migration")], now: now)),
            .react(
                .init(
                    appId: appId, conversationId: conversation.id, actor: old.sender, messageId: old.id, key: "🧪",
                    add: true, now: now)),
        ])
        let sent = try results[0].get().events.first?.event.seq
        #expect(sent == conversation.lastSeq + 1)
        for result in results { _ = try result.get() }
        let edited = try await store.message(
            appId: appId, conversationId: conversation.id, messageId: old.id, viewer: old.sender)
        #expect(edited?.text == "edited after the migration")
        #expect(edited?.reactions?.contains { $0.key == "🧪" && $0.reacted } == true)
        #expect(
            try await store.message(appId: appId, conversationId: conversation.id, messageId: "m_after2", viewer: nil)?
                .clientMessageId == clientId)
    }
}
