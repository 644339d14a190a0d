import Foundation
import GRDB
import ParleyProtocol
import ParleyStore
import ParleyTesting
import Testing

@testable import ParleyStoreSQLite

/// A database written by an earlier schema opens under the current one with its data intact and derived columns
/// filled in.
@Suite struct SQLiteMigrationTests {
    @Test func aVersionOneDatabaseGetsItsUnreadCountsOnMigration() async throws {
        let path = try TemporaryDirectory(prefix: "parley-migration").path + "/parley.sqlite"
        let old = try DatabaseQueue(path: path)
        try SQLiteStore.migrator.migrate(old, upTo: "v1")
        try await old.write { db in
            try db.execute(sql: "INSERT INTO apps VALUES ('a', 'A', x'00', x'01', 1)")
            for uid in ["alice", "bob"] {
                try db.execute(
                    sql: "INSERT INTO users (app_id, uid, name, created_at, updated_at) VALUES ('a', ?, ?, 1, 1)",
                    arguments: [uid, uid])
            }
            try db.execute(
                sql: """
                    INSERT INTO conversations (pk, id, app_id, type, name, is_public, created_by, created_at, updated_at,
                        last_seq, last_activity_at, participant_count) VALUES (1, 'c', 'a', 'group', 'G', 0, 'alice', 1, 1, 5, 1, 2)
                    """
            )
            try db.execute(
                sql:
                    "INSERT INTO participants (conversation_pk, uid, role, joined_at, read_seq) VALUES (1, 'alice', 'owner', 1, 5), (1, 'bob', 'member', 1, 3)"
            )
            // seq 1 is a membership event; 2 to 5 are messages from alice.
            try db.execute(
                sql:
                    "INSERT INTO events (conversation_pk, seq, name, actor, created_at, body) VALUES (1, 1, 'conversation.create', 'alice', 1, x'7B7D')"
            )
            for seq in 2...5 {
                let message = Message(
                    id: "m\(seq)", conversationId: "c", seq: Int64(seq), sender: "alice", parts: [.text("\(seq)")],
                    sentAt: 1)
                let event = Event(
                    id: "c:\(seq)", appId: "a", name: .messageSent, conversationId: "c", seq: Int64(seq), timestamp: 1,
                    context: EventContext(createdBy: "alice"), payload: .messageSent(message))
                try db.execute(
                    sql:
                        "INSERT INTO events (conversation_pk, seq, name, actor, created_at, body) VALUES (1, ?, 'conversationMessage.sent', 'alice', 1, ?)",
                    arguments: [seq, Data(try WireCoding.encode(event))]
                )
            }
        }
        try old.close()

        let store = try SQLiteStore(path: path)
        // Bob read up to seq 3 (messages 2 and 3): 2 of 4 messages are unread.
        #expect(try await store.unread(appId: "a", uid: "bob", conversationIds: nil).total == 2)
        #expect(try await store.unread(appId: "a", uid: "alice", conversationIds: nil).total == 0)
        #expect(
            try await store.messages(appId: "a", conversationId: "c", query: HistoryQuery(limit: 10)).messages.map(
                \.seq) == [5, 4, 3, 2])
        // New messages continue the count.
        let result = try await store.apply([
            .sendMessage(
                .init(
                    appId: "a", conversationId: "c", sender: "alice", messageId: "m6", clientMessageId: nil,
                    parts: [.text("6")], metadata: nil, alert: nil, now: 2))
        ])
        #expect(try result[0].get().events.first?.event.seq == 6)
        #expect(try await store.unread(appId: "a", uid: "bob", conversationIds: nil).total == 3)

        // Messages stored before the lifecycle (v6) are found by id, edited, deleted and reacted to like new ones.
        #expect(try await store.message(appId: "a", conversationId: "c", messageId: "m3", viewer: "bob")?.text == "3")
        let changes = try await store.apply([
            .editMessage(
                .init(appId: "a", conversationId: "c", actor: "alice", messageId: "m3", parts: [.text("three")], now: 3)
            ),
            .deleteMessage(.init(appId: "a", conversationId: "c", actor: "alice", messageId: "m4", now: 3)),
            .react(.init(appId: "a", conversationId: "c", actor: "bob", messageId: "m5", key: "👍", add: true, now: 3)),
        ])
        #expect(try changes.map { try $0.get().events.first?.event.seq } == [7, 8, 9])
        let history = try await store.messages(
            appId: "a", conversationId: "c", query: HistoryQuery(limit: 10, viewer: "bob"))
        #expect(history.messages.map(\.text) == ["6", "5", "", "three", "2"])
        #expect(history.messages[1].reactions == [ReactionSummary(key: "👍", count: 1, reacted: true)])
        #expect(history.messages[2].isDeleted && history.lastSeq == 9)
        // The deleted message was unread for bob (read up to 3): it no longer counts.
        #expect(try await store.unread(appId: "a", uid: "bob", conversationIds: nil).total == 2)
        try await store.close()
    }
}
