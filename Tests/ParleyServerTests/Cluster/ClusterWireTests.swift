import NIOCore
import ParleyStore
import Testing

@testable import ParleyServer

/// What nodes say to each other on NATS (``ClusterWire``): every message comes back as it was sent, and bytes that
/// are not a message (another version, a cut, a lying count, bytes left over) are refused without a crash.
struct ClusterWireTests {
    static let alice = UserKey(appId: "app", uid: "alice")

    static let messages: [ClusterMessage] = [
        .heartbeat(node: "n1", seq: 42, acks: ["n2": 7, "n3": 0], presenceApps: ["app", "other"]),
        .delta(
            node: "n1", seq: 43,
            changes: [
                .online(alice), .socketsClosed(alice, at: 1_700_000_000_123), .socketsOpen(alice),
                .offline(alice, announced: false), .offline(UserKey(appId: "app", uid: "b.o@b"), announced: true),
            ]),
        .delta(node: "n1", seq: 44, changes: []),
        .goodbye(node: "n1"),
        .resync(node: "n1"),
        .snapshotRequest(node: "n2"),
        .snapshot(
            node: "n1", seq: 44, part: 1, parts: 3,
            users: [
                ClusterSnapshotUser(appId: "app", uid: "alice", closedAt: nil),
                ClusterSnapshotUser(appId: "app", uid: "bob", closedAt: 12),
            ], presenceApps: []),
        .events(
            node: "n1", appId: "app", conversationId: "c_1",
            groups: [
                ClusterEventGroup(
                    recipients: ["alice", "bob"],
                    events: ClusterWirePartsTests.kinds.enumerated().map { index, kind in
                        ClusterEvent(
                            seq: Int64(7 + index), actor: index % 2 == 0 ? "alice" : nil, kind: kind,
                            json: index == 0 ? [] : Array(#"{"a":1}"#.utf8))
                    })
            ]),
        .deliver(node: "n1", appId: "app", uids: ["bob"], presenceOf: "alice", except: ["eve"], event: [1, 2, 3]),
        .deliver(node: "n1", appId: "app", uids: [], presenceOf: nil, except: [], event: []),
        .close(
            node: "n1", appId: "app", uid: "alice", tokenIds: ["tok_1"], code: 4001, reason: "ERR_AUTH_TOKEN_INVALID"),
        .close(node: "n1", appId: "app", uid: "alice", tokenIds: nil, code: 4001, reason: ""),
    ]

    @Test(arguments: messages)
    func everyMessageComesBackAsItWasSent(_ message: ClusterMessage) {
        #expect(ClusterWire.decode(ClusterWire.encode(message)) == message)
    }

    @Test(arguments: messages)
    func everyCutOfAMessageIsRefused(_ message: ClusterMessage) {
        let bytes = ClusterWire.encode(message)
        for length in 0..<bytes.readableBytes {
            #expect(ClusterWire.decode(bytes.getSlice(at: 0, length: length)!) == nil, "cut at \(length)")
        }
        var longer = bytes
        longer.writeInteger(UInt8(0))
        #expect(ClusterWire.decode(longer) == nil, "a byte left over")
    }

    @Test func anotherVersionOrKindIsRefused() {
        var bytes = ClusterWire.encode(.goodbye(node: "n1"))
        // An earlier version (events without their facts) and a later one.
        for version in [ClusterWire.version - 1, ClusterWire.version + 1] {
            bytes.setInteger(version, at: 0)
            #expect(ClusterWire.decode(bytes) == nil, "version \(version)")
        }
        bytes.setInteger(ClusterWire.version, at: 0)
        bytes.setInteger(UInt8(200), at: 1)
        #expect(ClusterWire.decode(bytes) == nil)
    }

    @Test func aCountLargerThanTheBytesLeftIsRefusedWithoutReservingForIt() {
        var buffer = ByteBuffer()
        buffer.writeInteger(ClusterWire.version)
        buffer.writeInteger(UInt8(2))  // a delta
        buffer.writeInteger(UInt32(2))
        buffer.writeString("n1")
        buffer.writeInteger(UInt64(1))
        buffer.writeInteger(UInt32.max)  // four billion changes in no bytes
        #expect(ClusterWire.decode(buffer) == nil)
    }

    @Test func randomBytesNeverCrashTheDecoder() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            var buffer = ByteBuffer()
            buffer.writeInteger(ClusterWire.version)
            for _ in 0..<Int.random(in: 0..<64, using: &generator) {
                buffer.writeInteger(UInt8.random(in: 0...20, using: &generator))
            }
            _ = ClusterWire.decode(buffer)
        }
    }

    @Test func subjectsNameIdsThatAreNotPlainTokensInHex() {
        let subjects = ClusterSubjects(deploymentId: "d1", nodeId: "n1")
        #expect(subjects.nodes == "parley.d1.nodes")
        #expect(subjects.inbox == "parley.d1.n.n1")
        #expect(subjects.conversation(.init(appId: "app_1", conversationId: "c_AbC-9")) == "parley.d1.c.app_1.c_AbC-9")
        #expect(subjects.conversation(.init(appId: "app", conversationId: "a.b *>")) == "parley.d1.c.app.~612e62202a3e")
        #expect(ClusterSubjects.token("~x") != "~x", "a token that looks encoded is encoded too")
    }
}

/// Messages that would pass NATS's `max_payload` go in parts (``ClusterWire/runs(_:overhead:limit:size:)``): each
/// part fits, the parts together hold every item in order, and the size of an item is the bytes it adds.
struct ClusterWirePartsTests {
    static let alice = ClusterWireTests.alice
    /// Every kind of event facts.
    static let kinds: [EventFacts.Kind] = [
        .other, .messageSent, .messageRead(uid: "bob", seq: 41), .messageDeleted(sender: "alice"),
        .participantAdded(uid: "carol"), .participantRemoved(uid: "dave"), .conversationCreated,
        .conversationDeleted, .conversationUndeleted,
    ]

    @Test func anItemsSizeIsTheBytesItAddsToItsMessage() {
        let changes: [ClusterDirectory.Change] = [
            .online(Self.alice), .socketsClosed(Self.alice, at: 1), .socketsOpen(UserKey(appId: "app", uid: "ü")),
            .offline(Self.alice, announced: true),
        ]
        let emptyDelta = ClusterWire.encode(.delta(node: "n1", seq: 1, changes: [])).readableBytes
        for change in changes {
            let bytes = ClusterWire.encode(.delta(node: "n1", seq: 1, changes: [change])).readableBytes
            #expect(bytes - emptyDelta == ClusterWire.size(of: change), "\(change)")
        }
        let users = [
            ClusterSnapshotUser(appId: "app", uid: "alice", closedAt: nil),
            ClusterSnapshotUser(appId: "another", uid: "bob", closedAt: 5),
        ]
        func snapshot(_ users: [ClusterSnapshotUser]) -> Int {
            ClusterWire.encode(.snapshot(node: "n1", seq: 1, part: 0, parts: 1, users: users, presenceApps: ["app"]))
                .readableBytes
        }
        for user in users { #expect(snapshot([user]) - snapshot([]) == ClusterWire.size(of: user)) }
        let groups =
            [
                ClusterEventGroup(recipients: [], events: []),
                ClusterEventGroup(
                    recipients: ["alice", "bøb"],
                    events: [ClusterEvent(seq: 1, json: Array("{}".utf8)), ClusterEvent(seq: 2, json: [])]),
            ]
            + Self.kinds.map { kind in
                ClusterEventGroup(
                    recipients: ["carol"], events: [ClusterEvent(seq: 3, actor: "dåve", kind: kind, json: [1, 2])])
            }
        func events(_ groups: [ClusterEventGroup]) -> Int {
            ClusterWire.encode(.events(node: "n1", appId: "app", conversationId: "c", groups: groups)).readableBytes
        }
        for group in groups { #expect(events([group]) - events([]) == ClusterWire.size(of: group)) }
    }

    @Test(arguments: [0, 1, 7, 100, 2_000])
    func everyPartFitsAndThePartsHoldEveryItemInOrder(count: Int) {
        let changes = (0..<count).map { index -> ClusterDirectory.Change in
            let user = UserKey(appId: "app", uid: "user-\(index)-" + String(repeating: "x", count: index % 90))
            return index % 3 == 0 ? .socketsClosed(user, at: Int64(index)) : .online(user)
        }
        let limit = 4_096
        let overhead = ClusterWire.encode(.delta(node: "n1", seq: 9, changes: [])).readableBytes
        let parts = ClusterWire.runs(changes, overhead: overhead, limit: limit, size: ClusterWire.size(of:))
        #expect(parts.flatMap { $0 } == changes)
        #expect(parts.count >= 1)
        for part in parts {
            let bytes = ClusterWire.encode(.delta(node: "n1", seq: 9, changes: Array(part))).readableBytes
            #expect(bytes <= limit)
            // As long as fits: with the next change it would not have.
            if part.endIndex < changes.endIndex {
                let longer = Array(changes[part.startIndex...part.endIndex])
                #expect(ClusterWire.encode(.delta(node: "n1", seq: 9, changes: longer)).readableBytes > limit)
            }
        }
        let total = ClusterWire.encode(.delta(node: "n1", seq: 9, changes: changes)).readableBytes
        #expect(parts.count == 1 || total > limit)
    }

    @Test func anItemTooLargeAloneIsAPartOfItsOwn() {
        let sizes = [10, 500, 10, 10]
        let parts = ClusterWire.runs(sizes, overhead: 20, limit: 100, size: { $0 })
        #expect(parts.map(Array.init) == [[10], [500], [10, 10]])
        #expect(ClusterWire.runs([Int](), overhead: 20, limit: 100, size: { $0 }).map(Array.init) == [[]])
    }
}

extension ClusterWirePartsTests {
    /// A command's events too many for one message: groups of the same recipients, the events in order.
    @Test func aGroupTooLargeAloneIsCutByItsEvents() {
        let recipients = (0..<20).map { "member-\($0)" }
        let events = (1...30).map {
            ClusterEvent(seq: Int64($0), json: Array(repeating: UInt8(ascii: "x"), count: 300))
        }
        let groups = [
            ClusterEventGroup(recipients: ["a"], events: [ClusterEvent(seq: 0, json: [1])]),
            ClusterEventGroup(recipients: recipients, events: events),
        ]
        func message(_ groups: [ClusterEventGroup]) -> ByteBuffer {
            ClusterWire.encode(.events(node: "n1", appId: "app", conversationId: "c", groups: groups))
        }
        let limit = 2_048
        let parts = ClusterWire.eventRuns(groups, overhead: message([]).readableBytes, limit: limit)
        #expect(parts.count > 1)
        for part in parts { #expect(message(part).readableBytes <= limit) }
        let flattened = parts.joined().flatMap { group in group.events.map { (group.recipients, $0) } }
        #expect(flattened.map(\.1) == groups.flatMap(\.events))
        #expect(flattened.map(\.0) == [["a"]] + Array(repeating: recipients, count: events.count))
        // Under the limit: as it was.
        #expect(ClusterWire.eventRuns(groups, overhead: message([]).readableBytes, limit: 1 << 20) == [groups])
    }
}
