import ArgumentParser
import Foundation
import Logging
import ParleyProtocol
import ParleyStore
import ParleyStorePostgres
import ParleyStoreSQLite

/// `inbox`: the inbox in one request for a user in many conversations, at the store (a REST request adds its usual
/// fraction of a millisecond). The user `me` is in `--conversations` conversations (a fifth of them direct), each with
/// `--messages` messages from its other members, one in ten mentioning `me`, and has read half of them; beside them,
/// `--background` conversations of other users. Times the first page (by activity, unread first, unread only, with
/// mentions) and a walk through every page.
struct InboxScenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inbox",
        abstract: "Inbox request times for a user in many conversations (SQLite, or PostgreSQL with --database-url)."
    )

    @Option(help: "Conversations the user is in.") var conversations: Int = 500
    @Option(help: "Messages in each.") var messages: Int = 20
    @Option(help: "Conversations of other users beside them.") var background: Int = 5000
    @Option(help: "Requests of each kind.") var queries: Int = 200
    @Option(help: "Conversations a page.") var limit: Int = 50
    @Option(help: "An empty PostgreSQL database to fill (default: SQLite in a temporary directory).")
    var databaseURL: String?

    func run() async throws {
        let rng = SeededDraws(seed: 7)
        let bench = try await BenchStore.open(databaseURL: databaseURL, name: "inbox")
        let store = bench.store
        let app = BenchStore.app
        let users = 2000
        for uid in ["me"] + (0..<users).map({ "u\($0)" }) {
            try await store.insertUser(appId: app, User(uid: uid, name: uid, createdAt: 1, updatedAt: 1))
        }
        note("filling \(conversations) + \(background) conversations")
        var time: Int64 = 1_000
        var batch: [Command] = []
        func flush() async throws {
            for result in try await store.apply(batch) { _ = try result.get() }
            batch.removeAll(keepingCapacity: true)
        }
        for index in 0..<(conversations + background) {
            let mine = index < conversations
            let direct = mine && index % 5 == 0
            var others = Set<String>()
            // One direct conversation per pair: each with a user of its own.
            if direct { others.insert("u\(index % users)") }
            while others.count < (direct ? 1 : 4) { others.insert("u\(rng.next(below: users))") }
            let members = Array(others).sorted()
            let creator = mine ? "me" : members[0]
            let id = "c\(index)"
            try await store.apply([
                .createConversation(
                    .init(
                        appId: app, newId: id, type: direct ? .direct : .group, creator: creator,
                        participants: mine ? members : Array(members.dropFirst()), now: time
                    )
                )
            ])[0].get()
            for number in 0..<messages {
                time += 1
                let mention = mine && number % 10 == 3
                batch.append(
                    .sendMessage(
                        .init(
                            appId: app, conversationId: id, sender: members[rng.next(below: members.count)],
                            messageId: "m\(index).\(number)", clientMessageId: nil,
                            parts: [.text(mention ? "@me look" : "message \(number)")], metadata: nil, alert: nil,
                            mentions: mention ? ["me"] : nil, now: time
                        )
                    )
                )
            }
            try await flush()
            if mine && index % 2 == 0 {
                // Read through the middle of the conversation.
                let seq = try await store.messages(
                    appId: app, conversationId: id, query: HistoryQuery(limit: messages / 2 + 1, viewer: "me")
                ).messages.last?.seq
                if let seq {
                    batch.append(
                        .markReceipt(
                            .init(appId: app, conversationId: id, uid: "me", deliveredSeq: nil, readSeq: seq, now: time)
                        )
                    )
                    try await flush()
                }
            }
        }

        let kinds: [(String, InboxFilter, InboxSort)] = [
            ("activity", InboxFilter(), .activity),
            ("unreadFirst", InboxFilter(), .unread),
            ("unreadOnly", InboxFilter(unreadOnly: true), .activity),
            ("mentionsOnly", InboxFilter(mentionsOnly: true), .activity),
            ("groups", InboxFilter(type: .group), .activity),
        ]
        var line: [String] = []
        for (kind, filter, sort) in kinds {
            var times: [Double] = []
            var shown = 0
            for _ in 0..<queries {
                let start = Date()
                let page = try await store.inbox(
                    InboxRequest(appId: app, uid: "me", filter: filter, sort: sort, limit: limit))
                times.append(Date().timeIntervalSince(start) * 1000)
                shown = page.entries.count
            }
            times.sort()
            line.append(
                "\(kind) p50=\(Format.ms(times[times.count / 2])) "
                    + "p99=\(Format.ms(times[min(times.count - 1, times.count * 99 / 100)])) rows=\(shown)"
            )
        }
        // Every page, one after the other.
        var walks: [Double] = []
        var total = 0
        for _ in 0..<max(queries / 10, 1) {
            let start = Date()
            var cursor: InboxCursor?
            total = 0
            repeat {
                let page = try await store.inbox(InboxRequest(appId: app, uid: "me", after: cursor, limit: limit))
                total += page.entries.count
                cursor = try page.nextCursor.map { try InboxCursor(parsing: $0, sort: .activity) }
            } while cursor != nil && total < conversations
            walks.append(Date().timeIntervalSince(start) * 1000)
        }
        walks.sort()
        line.append("everyPage p50=\(Format.ms(walks[walks.count / 2])) conversations=\(total)")
        try await bench.remove()
        print(
            "inbox: conversations=\(conversations) background=\(background) messages=\(messages) limit=\(limit) "
                + "store=\(databaseURL == nil ? "sqlite" : "postgres") " + line.joined(separator: " ")
        )
    }

    private func note(_ text: String) { FileHandle.standardError.write(Data("[inbox] \(text)\n".utf8)) }
}
