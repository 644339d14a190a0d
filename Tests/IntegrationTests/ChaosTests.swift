import Foundation
import NIOConcurrencyHelpers
import Parley
import ParleyTesting
import Testing

/// Several clients in several conversations send hundreds of messages through a proxy that cuts connections at
/// random byte counts (mid-frame too), while the server restarts and one client's app restarts. At the end every
/// client has every message of its conversations exactly once, in order, and the server stored each message once.
@Suite struct ChaosTests {
    static let seed: UInt64 = 0x5EED_CAFE
    static let users = ["u0", "u1", "u2", "u3"]
    /// Conversation name -> members.
    static let conversations: [(name: String, members: [String])] = [
        ("g0", ["u0", "u1", "u2"]), ("g1", ["u1", "u2", "u3"]), ("g2", ["u0", "u3"]), ("g3", ["u0", "u1", "u2", "u3"]),
    ]
    static let messagesPerClient = 200

    /// Every message event one user received, across restarts of their app.
    final class Inbox: ParleyEventListener {
        let received = NIOLockedValueBox<[Message]>([])
        let resyncs = NIOLockedValueBox(0)
        let changes: AsyncStream<Void>
        private let sink: AsyncStream<Void>.Continuation

        init() { (changes, sink) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1)) }

        func onMessageSent(_ message: Message, event: Event) {
            received.withLockedValue { $0.append(message) }
            sink.yield()
        }

        func onResyncRequired(_ resync: ResyncFrame, event: Event) { resyncs.withLockedValue { $0 += 1 } }

        func count(in conversationId: String) -> Int {
            received.withLockedValue { $0.count { $0.conversationId == conversationId } }
        }
    }

    @Test(.timeLimit(.minutes(3))) func everyMessageArrivesExactlyOnceInOrderThroughCutsAndRestarts() async throws {
        var server = try await TestServer.start()
        let port = server.port
        let proxy = try await TCPProxy.start(targetPort: port)
        var tuning = ConnectionTuning()
        tuning.initialBackoff = .milliseconds(20)
        tuning.maximumBackoff = .milliseconds(300)
        tuning.requestTimeout = .seconds(2)
        tuning.connectTimeout = .seconds(5)
        let storages = try Dictionary(uniqueKeysWithValues: Self.users.map { ($0, try TemporaryDirectory(prefix: "parley-chaos")) })
        let inboxes = Dictionary(uniqueKeysWithValues: Self.users.map { ($0, Inbox()) })
        let settings = { (uid: String) in
            AppSettings.Builder()
                .serverURL(URL(string: "http://127.0.0.1:\(proxy.port)")!)
                .storageDirectory(storages[uid]!.url)
                .connectionTuning(tuning)
                .appLifecycle(nil)
                .networkReachability(nil)
                .build()
        }
        func open(_ uid: String, login: Bool) async throws -> ParleyClient {
            let client = try ParleyClient(appId: server.app.appId, settings: settings(uid))
            client.addEventListener("inbox", inboxes[uid]!)
            try await client.start()
            if login { try await client.login(uid: uid, authKey: server.app.authKey) }
            return client
        }
        var clients: [String: ParleyClient] = [:]
        for uid in Self.users { clients[uid] = try await open(uid, login: true) }
        var ids: [String: String] = [:]
        for (name, members) in Self.conversations {
            ids[name] = try await clients[members[0]]!.createGroup(name: name, participants: Array(members.dropFirst())).id
        }
        for uid in Self.users { await clients[uid]!.waitUntilConnected() }

        // The plan: each client writes to its conversations in turn; cuts start now.
        var plan: [String: [(conversationId: String, text: String)]] = [:]
        for uid in Self.users {
            let mine = Self.conversations.filter { $0.members.contains(uid) }.map { ids[$0.name]! }
            plan[uid] = (0..<Self.messagesPerClient).map { (mine[$0 % mine.count], "\(uid)#\($0)") }
        }
        proxy.cutRandomly(seed: Self.seed, bytes: 2_000...40_000)

        let restartServerAt = Self.messagesPerClient / 3
        let restartClientAt = Self.messagesPerClient * 2 / 3
        for index in 0..<Self.messagesPerClient {
            if index == restartServerAt {
                try await server.stop()
                server = try await TestServer.start(dataDirectory: server.dataDirectory, port: port)
            }
            if index == restartClientAt {
                await clients["u3"]!.shutdown()  // the app is killed with messages in its outbox
                clients["u3"] = try await open("u3", login: false)
            }
            for uid in Self.users {
                let (conversationId, text) = plan[uid]![index]
                _ = try clients[uid]!.queueMessage(parts: [.text(text)], to: .conversation(conversationId), clientMessageId: text)
            }
            if index % 20 == 0 { await Task.yield() }
        }

        // Wait until every client has every message of its conversations (each is counted once per receiver).
        let expected = Dictionary(grouping: plan.values.flatMap { $0 }, by: \.conversationId).mapValues(\.count)
        for uid in Self.users {
            let inbox = inboxes[uid]!
            let mine = Self.conversations.filter { $0.members.contains(uid) }.map { ids[$0.name]! }
            func complete() -> Bool { mine.allSatisfy { inbox.count(in: $0) >= expected[$0]! } }
            if !complete() {
                for await _ in inbox.changes where complete() { break }
            }
        }
        proxy.cutRandomly(seed: nil)

        var deliveries = 0
        for uid in Self.users {
            let inbox = inboxes[uid]!
            for conversationId in Self.conversations.filter({ $0.members.contains(uid) }).map({ ids[$0.name]! }) {
                let got = inbox.received.withLockedValue { $0.filter { $0.conversationId == conversationId } }
                deliveries += got.count
                #expect(got.count == expected[conversationId], "\(uid) in \(conversationId): \(got.count)")
                #expect(Set(got.map(\.seq)).count == got.count, "\(uid) got a duplicate in \(conversationId)")
                #expect(got.map(\.seq) == got.map(\.seq).sorted(), "\(uid) got \(conversationId) out of order")
                // Each sender's messages in the order they were written.
                for sender in Self.users {
                    let indices = got.filter { $0.sender == sender }.compactMap { Int($0.text.split(separator: "#")[1]) }
                    #expect(indices == indices.sorted(), "\(sender)'s order in \(conversationId) as \(uid) saw it")
                }
            }
            #expect(inbox.resyncs.withLockedValue { $0 } == 0)
        }
        // The server stored each message once.
        var stored = 0
        for (name, _) in Self.conversations {
            let history = try await server.store.messages(appId: server.app.appId, conversationId: ids[name]!, query: .init(limit: 10_000))
            stored += history.count
            #expect(history.count == expected[ids[name]!])
            #expect(Set(history.compactMap(\.clientMessageId)).count == history.count)
        }
        print(
            "chaos: seed \(Self.seed), \(Self.users.count) clients, \(Self.users.count * Self.messagesPerClient) messages sent, "
                + "\(stored) stored, \(deliveries) deliveries, \(proxy.randomCuts) connections cut, "
                + "\(proxy.acceptedConnections) connections accepted, 1 server restart, 1 app restart"
        )
        for client in clients.values { await client.shutdown() }
        try await proxy.stop()
        try await server.stop()
    }
}
