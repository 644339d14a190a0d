import Foundation
import Logging
import Parley
import ParleyProtocol
import ParleyStore
import ParleyStorePostgres
import ParleyTesting
import Testing

@testable import ParleyServer

/// Several `parley-server` processes on one PostgreSQL database, meeting on NATS, serve one deployment: what happens
/// on one node reaches the clients of the others, in order, once; a node that dies takes its users' presence with it,
/// and its clients resume on another node without losing anything.
@Suite(
    .enabled(
        if: PostgresTestDatabase.isConfigured && ServerProcess.isAvailable && NATSServerProcess.sharedURL != nil,
        "Multi-node tests SKIPPED: they need PARLEY_TEST_DATABASE_URL and PARLEY_TEST_NATS_URL (run scripts/test) and the parley-server binary (swift build --build-tests)."
    ),
    .serialized
)
struct MultiNodeTests {
    /// Fast node failure detection, so that the test waits seconds, not the default 5 s.
    static let nodeTimeout: Duration = .seconds(2)

    /// A node's options: the database, its data folder, the NATS servers (the run's shared one by default).
    static func nodeArguments(
        _ database: PostgresTestDatabase, dataDirectory: TemporaryDirectory, nats: String? = nil
    ) -> [String] {
        [
            "--database-url", database.url, "--data-dir", dataDirectory.url.path,
            "--nats-url", nats ?? NATSServerProcess.sharedURL ?? "", "--node-heartbeat-seconds", "0.25",
            "--node-timeout-seconds", "2",
        ]
    }

    /// Starts a node and waits until it is ready (listening and connected to NATS).
    static func startNode(
        _ label: String, app: ProvisionedApp, database: PostgresTestDatabase, directory: TemporaryDirectory,
        nats: String? = nil, extraArguments: [String] = []
    ) async throws -> ServerProcess {
        let node = try await ServerProcess.start(
            label: label, app: app,
            arguments: nodeArguments(database, dataDirectory: directory, nats: nats) + extraArguments
        )
        try await waitUntilReady(node)
        return node
    }

    /// `count` nodes on `database`, started one after the other, each in a data directory of its own.
    static func startNodes(
        _ count: Int, app: ProvisionedApp, database: PostgresTestDatabase, extraArguments: [String] = []
    ) async throws -> [ServerProcess] {
        var nodes: [ServerProcess] = []
        for index in 0..<count {
            let directory = try TemporaryDirectory(prefix: "parley-node-\(index)")
            nodes.append(
                try await startNode(
                    "\(index)", app: app, database: database, directory: directory, extraArguments: extraArguments))
        }
        return nodes
    }

    /// Waits until `GET /health/ready` answers 200 (a node is ready once it is connected to NATS).
    static func waitUntilReady(_ node: ServerProcess, timeout: Duration = .seconds(30)) async throws {
        let deadline = ContinuousClock.now + timeout
        while (try? await node.request("GET", "/health/ready").status) != 200 {
            guard ContinuousClock.now < deadline else {
                throw NATSServerError("Node \(node.label) was not ready within \(timeout):\n\(node.log.suffix(3_000))")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// A database with one app in it, provisioned before the nodes start (so the test knows its keys).
    static func provisionedDatabase() async throws -> (PostgresTestDatabase, ProvisionedApp) {
        let database = try await PostgresTestDatabase.create(prefix: "parley_nodes")
        let store = try await PostgresStore.connect(
            url: database.url, logger: .init(label: "test"), timeout: .seconds(60))
        let app = try await AppProvisioning.createApp(in: store, name: "Multi-node")
        try await store.close()
        return (database, app)
    }

    /// Two nodes on a provisioned database.
    struct TwoNodes {
        let database: PostgresTestDatabase
        let app: ProvisionedApp
        let a: ServerProcess
        let b: ServerProcess
        /// The nodes' data folders, kept as long as the nodes run.
        let directories: [TemporaryDirectory]

        func stop() async throws {
            await a.stop()
            await b.stop()
            try await database.drop()
        }
    }

    /// Two nodes on a new provisioned database, on `nats` (the run's shared server by default), node B on `natsB`
    /// when given.
    static func twoNodes(extraArguments: [String] = [], nats: String? = nil, natsB: String? = nil) async throws
        -> TwoNodes
    {
        let (database, app) = try await provisionedDatabase()
        let directories = try ["a", "b"].map { try TemporaryDirectory(prefix: "parley-node-\($0)") }
        let a = try await startNode(
            "A", app: app, database: database, directory: directories[0], nats: nats, extraArguments: extraArguments)
        let b = try await startNode(
            "B", app: app, database: database, directory: directories[1], nats: natsB ?? nats,
            extraArguments: extraArguments)
        return TwoNodes(database: database, app: app, a: a, b: b, directories: directories)
    }

    static var tuning: ConnectionTuning {
        var tuning = ConnectionTuning()
        tuning.initialBackoff = .milliseconds(50)
        tuning.maximumBackoff = .milliseconds(500)
        tuning.requestTimeout = .seconds(5)
        tuning.connectTimeout = .seconds(5)
        return tuning
    }

    /// A logged-in, connected SDK client of the node (or proxy) at `url`.
    static func client(_ uid: String, url: URL, app: ProvisionedApp, recorder: RecordingListener) async throws
        -> ParleyClient
    {
        let settings = AppSettings.Builder()
            .serverURL(url)
            .storageDirectory(try TemporaryDirectory(prefix: "parley-nodes").url)
            .connectionTuning(tuning)
            .appLifecycle(nil)
            .networkReachability(nil)
            .build()
        let client = try ParleyClient(appId: app.appId, settings: settings)
        client.addEventListener("recorder", recorder)
        try await client.start()
        try await client.login(uid: uid, authKey: app.authKey)
        await client.waitUntilConnected()
        return client
    }

    /// The messages of a conversation a recorder received, as (seq, text), in arrival order.
    static func messages(_ recorder: RecordingListener, in conversationId: String) -> [(seq: Int64, text: String)] {
        recorder.receivedEvents.compactMap { event in
            guard event.conversationId == conversationId, case .messageSent(let message) = event.payload else {
                return nil
            }
            return (event.seq ?? -1, message.text)
        }
    }

    /// Waits until `recorder` has `count` messages in the conversation.
    static func waitForMessages(_ recorder: RecordingListener, count: Int, in conversationId: String) async {
        while messages(recorder, in: conversationId).count < count {
            _ = await recorder.next(where: { $0.conversationId == conversationId && $0.name == .messageSent })
        }
    }

    /// Every message once, in strictly increasing sequence order.
    static func expectInOrderOnce(_ received: [(seq: Int64, text: String)], _ who: String) {
        let seqs = received.map(\.seq)
        #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count, "\(who): out of order or twice: \(seqs)")
    }

    @Test(.timeLimit(.minutes(3)))
    func twoNodesChatAsOneAndADeadNodesClientsResumeOnTheOther() async throws {
        let nodes = try await Self.twoNodes()
        let (app, nodeA, nodeB) = (nodes.app, nodes.a, nodes.b)
        // Bob reaches the deployment through a load balancer: node B now, node A once B is gone.
        let balancer = try await TCPProxy.start(targetPort: nodeB.port)
        let aliceEvents = RecordingListener()
        let bobEvents = RecordingListener()
        var clients: [ParleyClient] = []
        do {
            let alice = try await Self.client("alice", url: nodeA.baseURL, app: app, recorder: aliceEvents)
            clients.append(alice)
            let bob = try await Self.client(
                "bob", url: URL(string: "http://127.0.0.1:\(balancer.port)")!, app: app, recorder: bobEvents
            )
            clients.append(bob)

            // Made on A; bob learns of it on B, with the same sequence numbers.
            let group = try await alice.createGroup(name: "nodes", participants: ["bob"])
            let added = await bobEvents.next(where: { $0.conversationId == group.id && $0.name == .participantAdded })
            #expect(added?.seq != nil)
            #expect(try await alice.presence(of: "bob").online, "bob, on node B, is online as seen from node A")

            // Both write at once, each through their own node.
            async let fromAlice: Void = {
                for index in 0..<15 { _ = try await alice.sendTextMessage("a\(index)", to: .conversation(group.id)) }
            }()
            async let fromBob: Void = {
                for index in 0..<15 { _ = try await bob.sendTextMessage("b\(index)", to: .conversation(group.id)) }
            }()
            _ = try await (fromAlice, fromBob)
            await Self.waitForMessages(aliceEvents, count: 30, in: group.id)
            await Self.waitForMessages(bobEvents, count: 30, in: group.id)
            let seenByAlice = Self.messages(aliceEvents, in: group.id)
            let seenByBob = Self.messages(bobEvents, in: group.id)
            Self.expectInOrderOnce(seenByAlice, "alice")
            Self.expectInOrderOnce(seenByBob, "bob")
            #expect(seenByAlice.map(\.seq) == seenByBob.map(\.seq))
            #expect(seenByAlice.map(\.text) == seenByBob.map(\.text))
            // Each sender's order is kept.
            #expect(seenByBob.map(\.text).filter { $0.hasPrefix("a") } == (0..<15).map { "a\($0)" })
            #expect(seenByBob.map(\.text).filter { $0.hasPrefix("b") } == (0..<15).map { "b\($0)" })

            // A read mark on B reaches A (of alice's latest message: a sender has read their own); typing on A
            // reaches B.
            let latest = try await alice.sendTextMessage("read me", to: .conversation(group.id))
            await Self.waitForMessages(bobEvents, count: 31, in: group.id)
            let last = latest.seq
            try await bob.markRead(upTo: last, in: group.id)
            let read = await aliceEvents.next(where: { $0.name == .messageRead && $0.conversationId == group.id })
            guard case .messageRead(let receipt) = read?.payload else {
                Issue.record("no read receipt crossed from B to A")
                return
            }
            #expect(receipt.uid == "bob" && receipt.seq == last)
            #expect(await alice.startTyping(in: group.id))
            let typing = await bobEvents.next(where: { $0.name == .participantTyping && $0.conversationId == group.id })
            #expect(typing?.context.createdBy == "alice")

            // Node B dies: bob goes offline for alice within the node timeout (plus a heartbeat or two).
            let killedAt = ContinuousClock.now
            nodeB.kill()
            let offline = await aliceEvents.next(where: { event in
                if case .presenceUpdated(let presence) = event.payload {
                    return presence.uid == "bob" && !presence.online
                }
                return false
            })
            let detection = ContinuousClock.now - killedAt
            #expect(offline != nil)
            #expect(try await alice.presence(of: "bob").online == false)
            print(
                "multi-node: node B killed; bob offline on node A after \(detection) (node timeout \(Self.nodeTimeout))"
            )

            // Meanwhile alice writes; bob's client resumes on node A and gets exactly what it missed.
            for index in 0..<5 { _ = try await alice.sendTextMessage("missed\(index)", to: .conversation(group.id)) }
            balancer.retarget(nodeA.port)
            await Self.waitForMessages(bobEvents, count: 36, in: group.id)
            let afterResume = Self.messages(bobEvents, in: group.id)
            Self.expectInOrderOnce(afterResume, "bob after resuming on node A")
            #expect(afterResume.suffix(5).map(\.text) == (0..<5).map { "missed\($0)" })
            #expect(afterResume.map(\.seq) == Self.messages(aliceEvents, in: group.id).map(\.seq))
            let online = await aliceEvents.next(where: { event in
                if case .presenceUpdated(let presence) = event.payload {
                    return presence.uid == "bob" && presence.online
                }
                return false
            })
            #expect(online != nil, "bob, back on node A, is online again")
        } catch {
            Issue.record("node A log:\n\(nodeA.log.suffix(3_000))\nnode B log:\n\(nodeB.log.suffix(3_000))")
            throw error
        }
        for client in clients { await client.shutdown() }
        try await balancer.stop()
        try await nodes.stop()
    }

    /// Two nodes, alice connected to node A and bob to node B (each with a recorder of what they receive), for `body`;
    /// the nodes' logs are recorded when it throws; then everything stops.
    static func withAliceOnABobOnB(
        _ body: (TwoNodes, ParleyClient, RecordingListener, ParleyClient, RecordingListener) async throws -> Void
    ) async throws {
        let nodes = try await Self.twoNodes()
        let aliceEvents = RecordingListener()
        let bobEvents = RecordingListener()
        let alice = try await Self.client("alice", url: nodes.a.baseURL, app: nodes.app, recorder: aliceEvents)
        let bob = try await Self.client("bob", url: nodes.b.baseURL, app: nodes.app, recorder: bobEvents)
        do {
            try await body(nodes, alice, aliceEvents, bob, bobEvents)
        } catch {
            Issue.record("node A log:\n\(nodes.a.log.suffix(3_000))\nnode B log:\n\(nodes.b.log.suffix(3_000))")
            throw error
        }
        for client in [alice, bob] { await client.shutdown() }
        try await nodes.stop()
    }

    /// Edits, deletions, reactions, replies and mentions made through one node reach the other node's clients as they
    /// reach their own: each user's ``MessageList`` ends equal to what either node reads for that user.
    @Test(.timeLimit(.minutes(3)))
    func aMessagesLifecycleCrossesNodes() async throws {
        try await Self.withAliceOnABobOnB { nodes, alice, aliceEvents, bob, bobEvents in
            let group = try await alice.createGroup(name: "nodes", participants: ["bob"])
            let first = try await alice.sendTextMessage("frist", to: .conversation(group.id))
            let second = try await alice.sendTextMessage("to delete", to: .conversation(group.id))
            let alicesList = try await alice.messageList(conversationId: group.id)
            let bobsList = try await bob.messageList(conversationId: group.id)
            let thread = try await alice.messageList(conversationId: group.id, thread: first.id)

            let edited = try await alice.editTextMessage(first.id, in: group.id, text: "first")
            let reaction = try await bob.addReaction("👍", to: .id(first.id), in: group.id)
            let reply = try await bob.sendTextMessage(
                "@alice see", to: .conversation(group.id), replyTo: first.id, mentions: ["alice"]
            )
            let tombstone = try await alice.deleteMessage(second.id, in: group.id)
            let fence = try await bob.sendTextMessage("fence", to: .conversation(group.id))

            // Each client got each change once, whichever node it was made through.
            let edit = await bobEvents.next(where: { $0.name == .messageUpdate && $0.conversationId == group.id })
            #expect(edit?.payload == .messageUpdated(edited) && edit?.seq == group.lastSeq + 3)
            let reacted = await aliceEvents.next(where: { $0.name == .reactionAdded && $0.conversationId == group.id })
            #expect(
                reacted?.payload
                    == .reactionAdded(
                        MessageReaction(messageId: first.id, messageSeq: first.seq, key: "👍", uid: "bob", count: 1)))
            let deleted = await bobEvents.next(where: { $0.name == .messageDelete && $0.conversationId == group.id })
            #expect(deleted?.payload == .messageDeleted(tombstone))
            #expect(reaction.reactions == [ReactionSummary(key: "👍", count: 1, reacted: true)])

            for (uid, client, list) in [("alice", alice, alicesList), ("bob", bob, bobsList)] {
                let live = try await MessageLifecycleTests.settled(list, through: fence.id)
                #expect(live == (try await client.fetchMessages(conversationId: group.id).messages), "\(uid)")
                for node in [nodes.a, nodes.b] {
                    let page = try await node.request(
                        "GET", "/v1/conversations/\(group.id)/messages", token: try await node.login(uid)
                    ).decode(MessagePage.self)
                    #expect(live == page.messages, "\(uid) through \(node.baseURL)")
                }
                #expect(live.map(\.text) == ["first", "", "@alice see", "fence"], "\(uid)")
                #expect(live[0].replyCount == 1 && live[0].reactions?.first?.count == 1 && live[1].isDeleted, "\(uid)")
            }
            #expect(try await MessageLifecycleTests.settled(thread) { $0.count == 1 }.map(\.id) == [reply.id])
            // The mention is listed for alice through either node until she reads it.
            #expect(try await alice.fetchUnreadMentions().messages.map(\.id) == [reply.id])
            for list in [alicesList, bobsList, thread] { list.close() }
        }
    }

    /// The unread counts a node pushes follow messages, receipts, edits and deletions made through another node (the
    /// node moves its totals by the events it receives on NATS and reads only what they cannot tell), and agree with
    /// the counts read through either node.
    @Test(.timeLimit(.minutes(3)))
    func unreadCountsFollowWhatIsDoneOnAnotherNode() async throws {
        try await Self.withAliceOnABobOnB { nodes, alice, aliceEvents, bob, bobEvents in
            let group = try await alice.createGroup(name: "nodes", participants: ["bob"])
            /// After `action`: bob is pushed `total`, and both nodes read it.
            func expectTotal(_ total: Int, _ step: String, after action: () async throws -> Void) async throws {
                try await action()
                let pushed = await bobEvents.next(where: { event in
                    guard case .unreadUpdated(let summary) = event.payload else { return false }
                    return summary.total == total
                })
                #expect(pushed != nil, "\(step): no push of \(total)")
                for node in [nodes.a, nodes.b] {
                    let read = try await node.request("GET", "/v1/me/unread", token: try await node.login("bob"))
                        .decode(UnreadSummary.self)
                    #expect(read.total == total, "\(step) through \(node.baseURL)")
                }
            }
            var sent: [Message] = []
            try await expectTotal(1, "first message") {
                sent.append(try await alice.sendTextMessage("one", to: .conversation(group.id)))
            }
            try await expectTotal(3, "two more") {
                for text in ["two", "three"] {
                    sent.append(try await alice.sendTextMessage(text, to: .conversation(group.id)))
                }
            }
            try await expectTotal(0, "read on node B") { try await bob.markRead(upTo: sent[2].seq, in: group.id) }
            try await expectTotal(1, "an edit, then a message") {
                _ = try await alice.editTextMessage(sent[0].id, in: group.id, text: "uno")
                sent.append(try await alice.sendTextMessage("four", to: .conversation(group.id)))
            }
            try await expectTotal(0, "deleted on node A") {
                _ = try await alice.deleteMessage(sent[3].id, in: group.id)
            }
            try await expectTotal(1, "after the deletion") {
                sent.append(try await alice.sendTextMessage("five", to: .conversation(group.id)))
            }
        }
    }

    /// A block made through one node holds on the other at once: sends refused there, typing kept from the blocker.
    @Test(.timeLimit(.minutes(3)))
    func aBlockMadeOnOneNodeHoldsOnTheOther() async throws {
        let nodes = try await Self.twoNodes()
        let alice = try await nodes.a.login("alice")
        let bob = try await nodes.b.login("bob")
        _ = try await nodes.a.login("carol")
        let direct = try await nodes.a.createConversation(token: alice, type: .direct, with: ["bob"])
        let group = try await nodes.a.createConversation(token: alice, with: ["bob", "carol"])
        #expect(try await nodes.a.request("PUT", "/v1/me/blocks/bob", token: alice).status == 200)

        let refused = try await nodes.b.request(
            "POST", "/v1/conversations/\(direct.id)/messages", token: bob, body: SendMessageRequest(parts: [.text("x")])
        )
        #expect(refused.status == 403 && refused.errorCode == .blocked)
        // alice's socket on node A gets no typing of bob's through node B; carol's does.
        let alicesSocket = WebSocketProbe(url: nodes.a.webSocketURL, token: alice)
        let carolsSocket = WebSocketProbe(url: nodes.a.webSocketURL, token: try await nodes.a.login("carol"))
        let bobsSocket = WebSocketProbe(url: nodes.b.webSocketURL, token: bob)
        for socket in [alicesSocket, carolsSocket, bobsSocket] {
            guard case .hello = try await socket.nextFrame() else {
                Issue.record("no hello")
                return
            }
        }
        /// The next event on `socket` that `matches`.
        func nextEvent(_ socket: WebSocketProbe, _ matches: @escaping @Sendable (Event) -> Bool) async throws -> Event?
        {
            let frame = try await socket.nextFrame { frame in
                if case .event(let event) = frame { return matches(event.event) }
                return false
            }
            guard case .event(let event) = frame else { return nil }
            return event.event
        }
        try await bobsSocket.send(.typing(TypingFrame(conversationId: group.id, isTyping: true)))
        let carolSaw = try await nextEvent(carolsSocket) { $0.name == .participantTyping }
        #expect(carolSaw?.context.createdBy == "bob")
        // A message of carol's after it: alice's next event is that message, not bob's typing.
        _ = try await nodes.b.request(
            "POST", "/v1/conversations/\(group.id)/messages", token: try await nodes.b.login("carol"),
            body: SendMessageRequest(parts: [.text("after")])
        )
        let aliceSaw = try await nextEvent(alicesSocket) { $0.name != .presenceUpdate && $0.name != .unreadUpdate }
        #expect(aliceSaw?.name == .messageSent)
        for socket in [alicesSocket, carolsSocket, bobsSocket] { await socket.close() }
        try await nodes.stop()
    }

    @Test(.timeLimit(.minutes(3)))
    func aBanMadeOnOneNodeReachesTheBannedUserOnTheOther() async throws {
        let nodes = try await Self.twoNodes()
        let alice = try await nodes.a.login("alice")
        let bob = try await nodes.b.login("bob")
        let erin = try await nodes.b.login("erin")
        let group = try await nodes.a.createConversation(token: alice, with: ["bob"], isPublic: true)
        let bobsSocket = WebSocketProbe(url: nodes.b.webSocketURL, token: bob)
        let erinsSocket = WebSocketProbe(url: nodes.b.webSocketURL, token: erin)
        for socket in [bobsSocket, erinsSocket] { _ = try await socket.nextFrame() }
        /// The conversation events `socket` receives up to the first named `last`.
        func events(_ socket: WebSocketProbe, until last: EventName) async throws -> [EventName] {
            var names: [EventName] = []
            while names.last != last {
                if case .event(let frame) = try await socket.nextFrame(), frame.event.conversationId == group.id {
                    names.append(frame.event.name)
                }
            }
            return names
        }

        // Banned through node A: bob, on node B, is told he was removed and then banned, though he is no longer a
        // participant; so is erin, banned beforehand, who never was one.
        let path = "/v1/conversations/\(group.id)/bans"
        #expect(try await nodes.a.request("PUT", path + "/bob", token: alice, body: BanRequest()).status == 200)
        #expect(try await events(bobsSocket, until: .participantBanned) == [.participantRemoved, .participantBanned])
        #expect(try await nodes.a.request("PUT", path + "/erin", token: alice, body: BanRequest()).status == 200)
        #expect(try await events(erinsSocket, until: .participantBanned) == [.participantBanned])
        // Node B refuses bob's join; the app's server lifts the ban through node A, and bob hears of it on node B.
        let join = "/v1/conversations/\(group.id)/join"
        #expect(try await nodes.b.request("POST", join, token: bob).errorCode == .banned)
        let lifted = try await nodes.a.request("DELETE", path + "/bob", apiKey: nodes.app.restAPIKey)
        #expect(lifted.status == 200)
        #expect(try await events(bobsSocket, until: .participantUnbanned) == [.participantUnbanned])
        #expect(try await nodes.b.request("POST", join, token: bob).status == 200)
        for socket in [bobsSocket, erinsSocket] { await socket.close() }
        try await nodes.stop()
    }

    @Test(.timeLimit(.minutes(3)))
    func nodesStartingTogetherOnAnEmptyDatabaseCreateOneDefaultApp() async throws {
        let database = try await PostgresTestDatabase.create(prefix: "parley_nodes")
        let placeholder = ProvisionedApp(appId: "", name: "", authKey: "", restAPIKey: "")
        let directories = try (0..<3).map { _ in try TemporaryDirectory(prefix: "parley-node") }
        let nodes = try await withThrowingTaskGroup(of: ServerProcess.self) { group in
            for (index, directory) in directories.enumerated() {
                group.addTask {
                    try await ServerProcess.start(
                        label: "\(index)", app: placeholder,
                        arguments: Self.nodeArguments(database, dataDirectory: directory)
                    )
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let store = try await PostgresStore.connect(
            url: database.url, logger: .init(label: "test"), timeout: .seconds(60))
        let apps = try await store.apps()
        try await store.close()
        #expect(apps.count == 1, "one default app, not one per node: \(apps.map(\.id))")
        for node in nodes { await node.stop() }
        try await database.drop()
    }

    @Test(.timeLimit(.minutes(3)))
    func aTokenRevokedThroughOneNodeClosesItsSocketsOnEveryNode() async throws {
        let nodes = try await Self.twoNodes()
        let (app, nodeA, nodeB) = (nodes.app, nodes.a, nodes.b)
        let token = try await nodeB.login("mallory")
        let socket = WebSocketProbe(url: nodeB.webSocketURL, token: token)
        guard case .hello = try await socket.nextFrame() else {
            Issue.record("no hello from node B")
            return
        }
        // The operator revokes every token of the user through node A.
        let answer = try await nodeA.request("DELETE", "/v1/users/mallory/auth-tokens", apiKey: app.restAPIKey)
        #expect(answer.status == 204)
        let ending = await socket.closure()
        #expect(ending.code == WebSocketCloseCode.authenticationFailed)
        #expect(ending.reason == ErrorCode.authTokenInvalid.rawValue)
        try await nodes.stop()
    }

    /// A signal goes to the nodes where its recipients are connected, however large (a profile update of 10 KB here).
    @Test(.timeLimit(.minutes(3)))
    func aLargeProfileUpdateCrossesToTheNodesOfTheContacts() async throws {
        let nodes = try await Self.twoNodes()
        let alice = try await nodes.a.login("alice")
        let bob = try await nodes.b.login("bob")
        _ = try await nodes.a.createConversation(token: alice, with: ["bob"])
        let socket = WebSocketProbe(url: nodes.a.webSocketURL, token: alice)
        guard case .hello = try await socket.nextFrame() else {
            Issue.record("no hello from node A")
            return
        }
        // Node B learns that alice is on node A: the signal is routed there.
        try await Self.waitUntilKnown(uid: "alice", online: true, on: nodes.b, app: nodes.app)
        let bio = String(repeating: "long profile ", count: 800)
        let answer = try await nodes.b.request(
            "PATCH", "/v1/users/bob", token: bob, body: UpdateUserRequest(metadata: .object(["bio": .string(bio)]))
        )
        #expect(answer.status == 200)
        let frame = try await socket.nextFrame { frame in
            if case .event(let event) = frame, case .profileUpdated = event.event.payload { return true }
            return false
        }
        guard case .event(let event) = frame, case .profileUpdated(let user) = event.event.payload else { return }
        #expect(user.uid == "bob" && user.metadata == .object(["bio": .string(bio)]))
        await socket.close()
        try await nodes.stop()
    }

    /// Waits until `node` sees `uid` online (or offline) through its REST API (its presence directory).
    static func waitUntilKnown(
        uid: String, online: Bool, on node: ServerProcess, app: ProvisionedApp, timeout: Duration = .seconds(30)
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            let presence: Presence = try await node.request(
                "GET", "/v1/users/\(uid)/presence", apiKey: app.restAPIKey
            ).decode()
            if presence.online == online { return }
            guard ContinuousClock.now < deadline else {
                throw NATSServerError("node \(node.label) never saw \(uid) \(online ? "online" : "offline")")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// A database that keeps presence announcements waiting (the contacts' table locked, as a pool busy with a
    /// connection storm kept them) delays what contacts are told, never the presence other nodes answer from.
    @Test(.timeLimit(.minutes(3)))
    func presenceCrossesNodesWhileItsAnnouncementsWaitForTheDatabase() async throws {
        let nodes = try await Self.twoNodes()
        let alice = try await nodes.a.login("alice")
        let carol = try await nodes.a.login("carol")
        let bob = try await nodes.b.login("bob")
        _ = try await nodes.a.createConversation(token: alice, with: ["bob", "carol"])
        let bobsSocket = WebSocketProbe(url: nodes.b.webSocketURL, token: bob)
        guard case .hello = try await bobsSocket.nextFrame() else {
            Issue.record("no hello from node B")
            return
        }
        let sockets = try await nodes.database.withTableLocked("blocks") {
            // alice's announcement to her contacts waits for the table; the directory has her all the same, and
            // carol, who connects after her, is decided and crosses too.
            var sockets: [WebSocketProbe] = []
            for (uid, token) in [("alice", alice), ("carol", carol)] {
                let socket = WebSocketProbe(url: nodes.a.webSocketURL, token: token)
                sockets.append(socket)
                guard case .hello = try await socket.nextFrame() else {
                    Issue.record("no hello for \(uid) from node A")
                    return sockets
                }
                try await Self.waitUntilKnown(
                    uid: uid, online: true, on: nodes.b, app: nodes.app, timeout: .seconds(10))
            }
            return sockets
        }
        // The table free again: bob hears both, in the order they came.
        var heard: [String] = []
        while heard.count < 2 {
            let frame = try await bobsSocket.nextFrame { frame in
                guard case .event(let event) = frame, case .presenceUpdated(let presence) = event.event.payload else {
                    return false
                }
                return presence.online
            }
            if case .event(let event) = frame, case .presenceUpdated(let presence) = event.event.payload {
                heard.append(presence.uid)
            }
        }
        #expect(heard == ["alice", "carol"])
        for socket in sockets + [bobsSocket] { await socket.close() }
        try await nodes.stop()
    }

    /// NATS takes messages up to its `max_payload`: the arrivals of a turn, a node's snapshot of its users and a
    /// command's events for many recipients that pass it go in parts that fit, and nothing is dropped.
    @Test(.timeLimit(.minutes(3)))
    func whatPassesNATSsLargestMessageGoesInParts() async throws {
        var options = NATSServerProcess.Options()
        options.maxPayload = 4_096
        let nats = try await NATSServerProcess.start(options)
        let (database, app) = try await Self.provisionedDatabase()
        let directories = try ["a", "b"].map { try TemporaryDirectory(prefix: "parley-node-\($0)") }
        let a = try await Self.startNode(
            "A", app: app, database: database, directory: directories[0], nats: nats.url,
            extraArguments: ["--logins-per-second-per-address", "0"])
        // About 110 bytes each in an announcement: 40 of them pass 4 KiB.
        let uids = (0..<80).map { "user-\($0)-" + String(repeating: "x", count: 90) }
        var tokens: [String: String] = [:]
        for uid in uids { tokens[uid] = try await a.login(uid) }
        /// Sockets of `uids` on `node`, opened together (their arrivals share the tracker's turns).
        func connect(_ uids: ArraySlice<String>, to node: ServerProcess) async throws -> [WebSocketProbe] {
            let sockets = uids.map { WebSocketProbe(url: node.webSocketURL, token: tokens[$0]!) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for socket in sockets {
                    group.addTask {
                        guard case .hello = try await socket.nextFrame() else { throw NATSServerError("no hello") }
                    }
                }
                try await group.waitForAll()
            }
            return sockets
        }
        var sockets = try await connect(uids[..<40], to: a)
        // Node B starts after them: it learns them from node A's snapshot.
        let b = try await Self.startNode("B", app: app, database: database, directory: directories[1], nats: nats.url)
        for uid in uids[..<40] { try await Self.waitUntilKnown(uid: uid, online: true, on: b, app: app) }
        // Then from node A's announcements.
        sockets += try await connect(uids[40...], to: a)
        for uid in uids[40...] { try await Self.waitUntilKnown(uid: uid, online: true, on: b, app: app) }

        // A group of 21 made on node A: 21 `participantAdded` for 21 recipients, about 6 KiB; bob on node B gets
        // every one, in order.
        let members = (1..<20).map { "member\($0)" }
        for member in members { _ = try await a.login(member) }
        let bob = try await b.login("bob")
        let bobsSocket = WebSocketProbe(url: b.webSocketURL, token: bob)
        guard case .hello = try await bobsSocket.nextFrame() else {
            Issue.record("no hello from node B")
            return
        }
        try await Self.waitUntilKnown(uid: "bob", online: true, on: a, app: app)
        let group = try await a.createConversation(token: try await a.login("member0"), with: ["bob"] + members)
        var added: [(seq: Int64, uid: String)] = []
        while added.count < 21 {
            let frame = try await bobsSocket.nextFrame { frame in
                guard case .event(let event) = frame else { return false }
                return event.event.name == .participantAdded
            }
            if case .event(let event) = frame, case .participantAdded(let participant) = event.event.payload {
                #expect(event.event.conversationId == group.id)
                added.append((event.event.seq ?? 0, participant.uid))
            }
        }
        let first = added.first?.seq ?? 0
        #expect(added.map(\.seq) == Array(first..<first + 21))
        #expect(Set(added.map(\.uid)) == Set(["bob", "member0"] + members))
        for node in [a, b] {
            let dropped = node.log.split(separator: "\n").filter { $0.contains("publications to NATS are dropped") }
            #expect(dropped.isEmpty, "node \(node.label)")
        }
        for socket in sockets + [bobsSocket] { await socket.close() }
        await a.stop()
        await b.stop()
        try await database.drop()
        nats.stop()
    }

    @Test(.timeLimit(.minutes(3)))
    func aPushGoesOutOnceWhenTheRecipientHasNoSocketOnAnyNode() async throws {
        let standIn = try await APNsStandIn.start()
        let nodes = try await Self.twoNodes(extraArguments: Self.apnsArguments(standIn))
        let (nodeA, nodeB) = (nodes.a, nodes.b)
        let (alice, bob, group) = try await Self.aliceAndBobWithAPhone(a: nodeA, b: nodeB)
        let aliceSocket = WebSocketProbe(url: nodeA.webSocketURL, token: alice)
        guard case .hello = try await aliceSocket.nextFrame() else {
            Issue.record("no hello from node A")
            return
        }
        let bobSocket = WebSocketProbe(url: nodeB.webSocketURL, token: bob)
        guard case .hello = try await bobSocket.nextFrame() else {
            Issue.record("no hello from node B")
            return
        }
        func presence(of uid: String, online: Bool) async throws {
            _ = try await aliceSocket.nextFrame { frame in
                guard case .event(let event) = frame, case .presenceUpdated(let presence) = event.event.payload else {
                    return false
                }
                return presence.uid == uid && presence.online == online
            }
        }
        // Node B recorded bob online (alice on node A hears it): whichever node handles the push sees his socket.
        try await presence(of: "bob", online: true)
        func send(_ text: String) async throws -> Message {
            try await nodeA.request(
                "POST", "/v1/conversations/\(group.id)/messages", token: alice,
                body: SendMessageRequest(parts: [.text(text)])
            ).decode()
        }
        _ = try await send("bob is online on node B")
        await bobSocket.close()
        try await presence(of: "bob", online: false)
        let offline = try await send("bob has no socket anywhere")
        let pushes = await standIn.waitForRequests(1)
        #expect(pushes.map(\.headers["apns-collapse-id"]) == [offline.id])
        #expect(pushes.map(\.status) == [200])

        await nodeA.stop()
        await nodeB.stop()
        let store = try await PostgresStore.connect(
            url: nodes.database.url, logger: .init(label: "test"), timeout: .seconds(60))
        // Both nodes looked at the outbox; the entry yielded one job, sent once.
        #expect(try await store.pushQueueDepth() == PushQueueDepth(outbox: 0, jobs: 0))
        try await store.close()
        #expect(standIn.requests.count == 1)
        try await nodes.database.drop()
        try await standIn.stop()
    }

    /// alice logged in on node A, bob on node B with an iPhone registered, and their conversation.
    static func aliceAndBobWithAPhone(a nodeA: ServerProcess, b nodeB: ServerProcess) async throws
        -> (alice: String, bob: String, group: Conversation)
    {
        let alice = try await nodeA.login("alice")
        let bob = try await nodeB.login("bob")
        let device = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
        let registered = try await nodeA.request(
            "PUT", "/v1/me/devices/phone", token: bob, body: RegisterDeviceRequest(token: device, environment: .sandbox)
        )
        #expect(registered.status == 200 || registered.status == 201)
        return (alice, bob, try await nodeA.createConversation(token: alice, with: ["bob"]))
    }

    /// The options that send a node's pushes to `standIn`.
    static func apnsArguments(_ standIn: APNsStandIn) -> [String] {
        [
            "--apns-key-file", standIn.keyFile, "--apns-key-id", standIn.keyId, "--apns-team-id", standIn.teamId,
            "--apns-topic", standIn.topic, "--apns-endpoint", standIn.endpoint.absoluteString,
            "--apns-ca-file", standIn.trustRootsFile,
        ]
    }

    /// A user whose last socket closed on node B stays online there for B's presence grace (5 s), with no socket: a
    /// message sent then gets its push, also when node A makes the pushes. Node B announces the closed socket on NATS,
    /// and node A's push looks at sockets, not at B's presence.
    @Test(.timeLimit(.minutes(3)))
    func aPushGoesOutDuringAnotherNodesPresenceGrace() async throws {
        let standIn = try await APNsStandIn.start()
        let (database, app) = try await Self.provisionedDatabase()
        let directories = try ["a", "b"].map { try TemporaryDirectory(prefix: "parley-node-\($0)") }
        let observer = try await ClusterObserver.start(url: NATSServerProcess.sharedURL!)
        // Only node A has an APNs key, so node A makes every push.
        let nodeA = try await Self.startNode(
            "A", app: app, database: database, directory: directories[0],
            extraArguments: Self.apnsArguments(standIn))
        let nodeB = try await Self.startNode("B", app: app, database: database, directory: directories[1])
        let idA = try #require(ClusterObserver.nodeId(in: nodeA.log))
        let (alice, bob, group) = try await Self.aliceAndBobWithAPhone(a: nodeA, b: nodeB)
        let bobKey = UserKey(appId: app.appId, uid: "bob")
        let bobSocket = WebSocketProbe(url: nodeB.webSocketURL, token: bob)
        guard case .hello = try await bobSocket.nextFrame() else {
            Issue.record("no hello from node B")
            return
        }
        #expect(
            await observer.waitUntilApplied(by: [idA], change: { $0 == .online(bobKey) }),
            "node B announced bob online and node A applied it")
        await bobSocket.close()
        // Node B announces the closed socket at once; bob stays online there for its grace.
        #expect(
            await observer.waitUntilApplied(by: [idA]) { change in
                if case .socketsClosed(bobKey, _) = change { return true }
                return false
            }, "node B announced bob's closed socket and node A applied it")
        #expect(
            try await nodeA.request("GET", "/v1/users/bob/presence", apiKey: app.restAPIKey).decode(
                Presence.self
            ).online, "bob is still online, within node B's grace")
        let message: Message = try await nodeA.request(
            "POST", "/v1/conversations/\(group.id)/messages", token: alice,
            body: SendMessageRequest(parts: [.text("bob left node B a moment ago")])
        ).decode()
        let pushes = await standIn.waitForRequests(1, timeout: .seconds(30))
        #expect(pushes.map(\.headers["apns-collapse-id"]) == [message.id])
        // Back within the grace: announced open again.
        let again = WebSocketProbe(url: nodeB.webSocketURL, token: bob)
        guard case .hello = try await again.nextFrame() else {
            Issue.record("no hello from node B")
            return
        }
        #expect(
            await observer.waitUntilApplied(by: [idA], change: { $0 == .socketsOpen(bobKey) }),
            "node B announced bob's socket open again")
        await again.close()

        await observer.stop()
        await nodeA.stop()
        await nodeB.stop()
        try await database.drop()
        try await standIn.stop()
    }
}
