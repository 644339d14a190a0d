import Testing

@testable import ParleyServer

/// The directory of who is online on which node, kept from the nodes' announcements (``ClusterDirectory``): pure, so
/// each rule is an input and the exact actions and answers that follow, in virtual time.
struct ClusterDirectoryTests {
    static let alice = UserKey(appId: "app", uid: "alice")
    static let bob = UserKey(appId: "app", uid: "bob")

    static func directory(_ me: String = "n1") -> ClusterDirectory {
        ClusterDirectory(me: me, timeout: .seconds(5), leaveGrace: .seconds(3), snapshotRetry: .seconds(2))
    }

    @Test func aNodesAnnouncementsInOrderTellWhoIsOnlineThere() {
        var directory = Self.directory()
        #expect(directory.delta(from: "n2", seq: 1, changes: [.online(Self.alice)], now: .zero) == [.nodeJoined("n2")])
        #expect(directory.isOnline(Self.alice))
        #expect(directory.hasSocket(Self.alice, since: 0))
        #expect(directory.nodes(appId: "app", uids: ["alice", "bob"]) == ["n2"])
        #expect(directory.delta(from: "n2", seq: 2, changes: [.socketsClosed(Self.alice, at: 1_000)], now: .zero) == [])
        #expect(directory.isOnline(Self.alice), "online for the grace")
        #expect(directory.hasSocket(Self.alice, since: 1_000), "the socket was open at its closing time")
        #expect(!directory.hasSocket(Self.alice, since: 1_001), "and not after")
        #expect(directory.delta(from: "n2", seq: 3, changes: [.socketsOpen(Self.alice)], now: .zero) == [])
        #expect(directory.hasSocket(Self.alice, since: 5_000))
        // Announced offline by n2: nothing for this node to do.
        #expect(directory.delta(from: "n2", seq: 4, changes: [.offline(Self.alice, announced: true)], now: .zero) == [])
        #expect(!directory.isOnline(Self.alice))
        #expect(directory.nodes(appId: "app", uids: ["alice"]).isEmpty)
    }

    @Test func aMissingAnnouncementAsksForASnapshotAndIgnoresChangesUntilItComes() {
        var directory = Self.directory()
        _ = directory.delta(from: "n2", seq: 1, changes: [.online(Self.alice)], now: .zero)
        // Number 2 was lost: 3 is not applied, a snapshot is asked for once.
        #expect(
            directory.delta(from: "n2", seq: 3, changes: [.online(Self.bob)], now: .zero) == [.requestSnapshot("n2")])
        #expect(!directory.isOnline(Self.bob))
        #expect(directory.delta(from: "n2", seq: 4, changes: [], now: .seconds(1)) == [])
        // The snapshot (as of 4) replaces what was known: alice left meanwhile, bob is there.
        _ = directory.snapshot(from: "n2", seq: 4, users: [Self.bob: .open], presenceApps: ["app"], now: .seconds(1))
        #expect(!directory.isOnline(Self.alice))
        #expect(directory.isOnline(Self.bob))
        #expect(directory.nodes(appId: "app", uids: [], presenceSubscribers: true) == ["n2"])
        // The stream goes on from the snapshot's number.
        _ = directory.delta(from: "n2", seq: 5, changes: [.online(Self.alice)], now: .seconds(1))
        #expect(directory.isOnline(Self.alice))
    }

    @Test func aHeartbeatAheadOfTheStreamAsksForASnapshotAgainUntilAnswered() {
        var directory = Self.directory()
        // A node heard for the first time in the middle of its stream.
        #expect(
            directory.heartbeat(from: "n2", seq: 7, acks: [:], presenceApps: [], now: .zero)
                == [.nodeJoined("n2"), .requestSnapshot("n2")])
        #expect(directory.heartbeat(from: "n2", seq: 7, acks: [:], presenceApps: [], now: .seconds(1)) == [])
        #expect(directory.tick(now: .seconds(1)) == [])
        #expect(directory.tick(now: .seconds(2)) == [.requestSnapshot("n2")], "asked again after the retry time")
        _ = directory.snapshot(from: "n2", seq: 7, users: [:], presenceApps: [], now: .seconds(2))
        #expect(directory.heartbeat(from: "n2", seq: 7, acks: [:], presenceApps: [], now: .seconds(3)) == [])
    }

    @Test func aSilentNodeIsDeadAfterTheTimeoutAndTheSmallestLiveIdAnnouncesItsUsers() {
        var n1 = Self.directory("n1")
        var n3 = Self.directory("n3")
        _ = n1.delta(from: "n2", seq: 1, changes: [.online(Self.alice), .online(Self.bob)], now: .zero)
        _ = n3.delta(from: "n2", seq: 1, changes: [.online(Self.alice), .online(Self.bob)], now: .zero)
        _ = n1.heartbeat(from: "n3", seq: 0, acks: [:], presenceApps: [], now: .zero)
        _ = n3.heartbeat(from: "n1", seq: 0, acks: [:], presenceApps: [], now: .zero)
        for second in 1...5 {
            _ = n1.heartbeat(from: "n3", seq: 0, acks: [:], presenceApps: [], now: .seconds(second))
            _ = n3.heartbeat(from: "n1", seq: 0, acks: [:], presenceApps: [], now: .seconds(second))
            #expect(n1.tick(now: .seconds(second)) == [])
        }
        let gone = [Self.alice, Self.bob]
        #expect(
            n1.tick(now: .milliseconds(5_001)) == [.nodeLost("n2", died: true), .usersGone(gone, announce: true)])
        #expect(
            n3.tick(now: .milliseconds(5_001)) == [.nodeLost("n2", died: true), .usersGone(gone, announce: false)])
        #expect(!n1.isOnline(Self.alice))
    }

    @Test func nobodyDiesWhileThisNodeIsDisconnectedAndEveryoneIsAskedAgainAfter() {
        var directory = Self.directory()
        _ = directory.delta(from: "n2", seq: 1, changes: [.online(Self.alice)], now: .zero)
        directory.disconnected()
        #expect(directory.tick(now: .seconds(60)) == [])
        #expect(directory.reconnected(now: .seconds(60)) == [.requestSnapshot("n2")])
        #expect(directory.tick(now: .seconds(64)) == [.requestSnapshot("n2")])
        #expect(directory.isOnline(Self.alice))
        #expect(directory.tick(now: .milliseconds(65_001)).first == .nodeLost("n2", died: true))
    }

    @Test func aNodeThatSaysGoodbyeKeepsItsUsersForTheGrace() {
        var directory = Self.directory()
        _ = directory.delta(from: "n2", seq: 1, changes: [.online(Self.alice), .online(Self.bob)], now: .zero)
        _ = directory.goodbye(from: "n2", now: .seconds(1))
        #expect(directory.acked(through: 99), "a leaving node is not waited for")
        // alice reconnected on a third node meanwhile.
        _ = directory.delta(from: "n3", seq: 1, changes: [.online(Self.alice)], now: .seconds(2))
        #expect(directory.tick(now: .seconds(2)) == [])
        #expect(directory.isOnline(Self.bob))
        #expect(
            directory.tick(now: .seconds(4)) == [.nodeLost("n2", died: false), .usersGone([Self.bob], announce: true)])
        #expect(directory.isOnline(Self.alice))
    }

    @Test func twoNodesLeftAtOnceAnnounceOfflineExactlyOnceBetweenThem() {
        // alice is on n1 and n2; both see her grace end at the same moment, each still seeing the other.
        var n1 = Self.directory("n1")
        var n2 = Self.directory("n2")
        _ = n1.delta(from: "n2", seq: 1, changes: [.online(Self.alice)], now: .zero)
        _ = n2.delta(from: "n1", seq: 1, changes: [.online(Self.alice)], now: .zero)
        let n1Announces = n1.localOffline(Self.alice)
        let n2Announces = n2.localOffline(Self.alice)
        #expect(!n1Announces, "n2 has her: n1 does not announce")
        #expect(!n2Announces, "n1 has her: n2 does not announce")
        // Each hears the other's departure, which says it was not announced.
        let atN1 = n1.delta(from: "n2", seq: 2, changes: [.offline(Self.alice, announced: false)], now: .zero)
        let atN2 = n2.delta(from: "n1", seq: 2, changes: [.offline(Self.alice, announced: false)], now: .zero)
        #expect(atN1 == [.usersGone([Self.alice], announce: true)], "n1, the smaller id, announces")
        #expect(atN2 == [.usersGone([Self.alice], announce: false)])
    }

    @Test func aDepartureAnnouncedElsewhereIsNotAnnouncedAgain() {
        var n1 = Self.directory("n1")
        _ = n1.delta(from: "n2", seq: 1, changes: [.online(Self.alice)], now: .zero)
        let announces = n1.localOffline(Self.alice)
        #expect(!announces)
        // n2 left later and saw nobody else: it announced.
        #expect(n1.delta(from: "n2", seq: 2, changes: [.offline(Self.alice, announced: true)], now: .zero) == [])
        // Back online here: new to the deployment.
        let isNew = n1.localOnline(Self.alice)
        #expect(isNew)
    }

    @Test func aMarkIsSettledOnceEveryLiveNodeAcknowledgedIt() {
        var directory = Self.directory("n1")
        #expect(directory.acked(through: 3), "alone: nobody to wait for")
        _ = directory.heartbeat(from: "n2", seq: 0, acks: ["n1": 2], presenceApps: [], now: .zero)
        _ = directory.heartbeat(from: "n3", seq: 0, acks: ["n1": 3], presenceApps: [], now: .zero)
        #expect(!directory.acked(through: 3))
        _ = directory.heartbeat(from: "n2", seq: 0, acks: ["n1": 3], presenceApps: [], now: .seconds(1))
        #expect(directory.acked(through: 3))
        #expect(directory.acks == ["n2": 0, "n3": 0])
    }

    @Test func aSnapshotOfAnOlderNumberThanAppliedIsIgnoredUnlessAskedFor() {
        var directory = Self.directory()
        _ = directory.delta(from: "n2", seq: 1, changes: [.online(Self.alice)], now: .zero)
        _ = directory.snapshot(from: "n2", seq: 0, users: [:], presenceApps: [], now: .zero)
        #expect(directory.isOnline(Self.alice))
    }
}
