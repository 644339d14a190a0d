import NIOCore
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
                    events: [ClusterEvent(seq: 7, json: Array(#"{"a":1}"#.utf8)), ClusterEvent(seq: 8, json: [])])
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
        bytes.setInteger(UInt8(2), at: 0)
        #expect(ClusterWire.decode(bytes) == nil)
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
