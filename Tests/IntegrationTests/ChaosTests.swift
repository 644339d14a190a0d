import Foundation
import NIOConcurrencyHelpers
import ParleyTesting
import Testing

@testable import Parley

/// Several clients in several conversations send hundreds of messages through a proxy that cuts connections at
/// random byte counts (mid-frame too), and edit, delete and react to messages through the outbox (the ones not sent
/// yet by their queued id), while the server restarts and one client's app restarts. At the end every client has every
/// message of its conversations exactly once, in order, the server stored each message once, and each client's events
/// fold into exactly what the server reads for it: every edit, deletion and reaction applied once.
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
        /// Every durable event, and the highest sequence number seen per conversation.
        let durable = NIOLockedValueBox<(events: [Event], lastSeq: [String: Int64])>(([], [:]))
        let resyncs = NIOLockedValueBox(0)
        let changes: AsyncStream<Void>
        private let sink: AsyncStream<Void>.Continuation

        init() { (changes, sink) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1)) }

        func onEvent(_ event: Event) {
            guard let conversationId = event.conversationId, let seq = event.seq else { return }
            durable.withLockedValue { durable in
                durable.events.append(event)
                durable.lastSeq[conversationId] = max(durable.lastSeq[conversationId] ?? 0, seq)
            }
            sink.yield()
        }

        func lastSeq(in conversationId: String) -> Int64 { durable.withLockedValue { $0.lastSeq[conversationId] ?? 0 } }

        /// The conversation's messages as this user's events build them, from the first event on.
        func timeline(of conversationId: String, viewer: String) -> [Message] {
            var timeline = MessageTimeline(viewer: viewer, thread: nil)
            let events = durable.withLockedValue { $0.events.filter { $0.conversationId == conversationId } }
            for event in events.sorted(by: { $0.seq! < $1.seq! }) { timeline.apply(event) }
            return timeline.messages
        }

        /// The newest message of someone else this user has received in the conversation.
        func latest(in conversationId: String, notBy uid: String) -> Message? {
            received.withLockedValue { $0.last { $0.conversationId == conversationId && $0.sender != uid } }
        }

        func onMessageSent(_ message: Message, event: Event) {
            received.withLockedValue { $0.append(message) }
            sink.yield()
        }

        func onResyncRequired(_ resync: ResyncFrame, event: Event) { resyncs.withLockedValue { $0 += 1 } }

        func count(in conversationId: String) -> Int {
            received.withLockedValue { $0.count { $0.conversationId == conversationId } }
        }
    }

    @Test(.timeLimit(.minutes(4))) func everyMessageArrivesExactlyOnceInOrderThroughCutsAndRestarts() async throws {
        var server = try await TestServer.start(port: RestartablePort.take())
        let port = server.port
        let proxy = try await TCPProxy.start(targetPort: port)
        var tuning = ConnectionTuning()
        tuning.initialBackoff = .milliseconds(20)
        tuning.maximumBackoff = .milliseconds(300)
        tuning.requestTimeout = .seconds(2)
        tuning.connectTimeout = .seconds(5)
        let storages = try Dictionary(
            uniqueKeysWithValues: Self.users.map { ($0, try TemporaryDirectory(prefix: "parley-chaos")) })
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
            ids[name] = try await clients[members[0]]!.createGroup(name: name, participants: Array(members.dropFirst()))
                .id
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
        var changes = 0
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
                _ = try clients[uid]!.queueMessage(
                    parts: [.text(text)], to: .conversation(conversationId), clientMessageId: text)
                changes += try Self.queueChanges(
                    after: index, by: uid, through: clients[uid]!, plan: plan[uid]!, inbox: inboxes[uid]!)
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

        // Each outbox sends in order, so its changes (queued before its last message) are stored by now; every client
        // then gets every event of its conversations, and its events fold into what the server reads for it.
        for uid in Self.users {
            let inbox = inboxes[uid]!
            for conversationId in Self.conversations.filter({ $0.members.contains(uid) }).map({ ids[$0.name]! }) {
                let history = try await server.store.messages(
                    appId: server.app.appId, conversationId: conversationId, query: .init(limit: 10_000, viewer: uid)
                )
                if inbox.lastSeq(in: conversationId) < history.lastSeq {
                    for await _ in inbox.changes where inbox.lastSeq(in: conversationId) >= history.lastSeq { break }
                }
                let folded = inbox.timeline(of: conversationId, viewer: uid)
                let serverView = Array(history.messages.reversed())
                #expect(folded.count == serverView.count, "\(uid) in \(conversationId)")
                for (mine, servers) in zip(folded, serverView) where mine != servers {
                    Issue.record("\(uid) in \(conversationId): folded \(mine), server \(servers)")
                }
            }
            // Nothing is left in the outbox but reactions to messages deleted before they arrived (their senders
            // delete their own messages meanwhile).
            for left in clients[uid]!.outgoingMessages() {
                guard case .react = left.action, case .failed(code: .messageDeleted, _) = left.state else {
                    Issue.record("\(uid)'s outbox kept \(left)")
                    continue
                }
            }
        }

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
                    // By client message id: the text may be edited or gone (a replay carries the latest version).
                    let indices = got.filter { $0.sender == sender }.compactMap { message in
                        message.clientMessageId.flatMap { Int($0.split(separator: "#").last ?? "") }
                    }
                    #expect(indices.count == got.count { $0.sender == sender })
                    #expect(indices == indices.sorted(), "\(sender)'s order in \(conversationId) as \(uid) saw it")
                }
            }
            #expect(inbox.resyncs.withLockedValue { $0 } == 0)
        }
        // The server stored each message once.
        var stored = 0
        for (name, _) in Self.conversations {
            let history = try await server.store.messages(
                appId: server.app.appId, conversationId: ids[name]!, query: .init(limit: 10_000)
            ).messages
            stored += history.count
            #expect(history.count == expected[ids[name]!])
            #expect(Set(history.compactMap(\.clientMessageId)).count == history.count)
        }
        print(
            "chaos: seed \(Self.seed), \(Self.users.count) clients, \(Self.users.count * Self.messagesPerClient) messages sent, "
                + "\(stored) stored, \(changes) edits, deletions and reactions, \(deliveries) deliveries, "
                + "\(proxy.randomCuts) connections cut, "
                + "\(proxy.acceptedConnections) connections accepted, 1 server restart, 1 app restart"
        )
        for client in clients.values { await client.shutdown() }
        try await proxy.stop()
        try await server.stop()
    }

    /// Queues the changes a client makes after queueing its message `index`: it edits its message from 5 earlier,
    /// reacts to one from 3 earlier and deletes one from 10 earlier (each by the queued id, sent or not), and reacts to
    /// and takes back a reaction to the newest message of someone else it has received. No message is both edited and
    /// deleted. Returns how many it queued.
    static func queueChanges(
        after index: Int, by uid: String, through client: ParleyClient,
        plan: [(conversationId: String, text: String)], inbox: Inbox
    ) throws -> Int {
        func queued(_ earlier: Int) -> (String, MessageRef) {
            let (conversationId, text) = plan[index - earlier]
            return (conversationId, .queued(clientMessageId: text))
        }
        var count = 0
        if index % 10 == 5 {
            let (edited, editRef) = queued(5)
            _ = try client.queueChange(.edit(editRef), in: edited, parts: [.text("\(plan[index - 5].text) edited")])
            let (reacted, reactRef) = queued(3)
            _ = try client.queueChange(.react(reactRef, key: "k\(index % 3)", add: true), in: reacted)
            count += 2
        }
        if index % 20 == 15 {
            let (deleted, deleteRef) = queued(10)
            _ = try client.queueChange(.delete(deleteRef), in: deleted)
            count += 1
        }
        if index % 10 == 7, let other = inbox.latest(in: plan[index].conversationId, notBy: uid) {
            _ = try client.queueChange(.react(.id(other.id), key: "👍", add: true), in: other.conversationId)
            count += 1
            if index % 20 == 7 {
                _ = try client.queueChange(.react(.id(other.id), key: "👍", add: false), in: other.conversationId)
                count += 1
            }
        }
        return count
    }
}
