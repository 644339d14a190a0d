import NIOConcurrencyHelpers
import NIOCore
import ParleyProtocol

/// Every live connection of this server, by user, and delivery of encoded frames to them.
///
/// Delivery never waits: a frame is pushed onto each connection's bounded queue. The same `ByteBuffer` goes to
/// every recipient, so an event is encoded once however many receive it, and the writers of the recipients' sockets
/// are woken with one task per event loop (``WakeUps``). The registry is split into shards, each
/// behind its own lock, so that connects, disconnects and deliveries for different users rarely contend.
final class Hub: Sendable {
    private let shards: [NIOLockedValueBox<[UserKey: [ServerConnection]]>]
    /// Connections that receive every user's presence, by app.
    private let presenceSubscriptions = NIOLockedValueBox([String: [ObjectIdentifier: ServerConnection]]())

    init(shardCount: Int = 64) {
        shards = (0..<shardCount).map { _ in NIOLockedValueBox([:]) }
    }

    private func shard(_ key: UserKey) -> NIOLockedValueBox<[UserKey: [ServerConnection]]> {
        shards[Int(UInt(bitPattern: key.hashValue) % UInt(shards.count))]
    }

    func register(_ connection: ServerConnection) {
        let key = UserKey(appId: connection.principal.appId, uid: connection.principal.uid)
        shard(key).withLockedValue { $0[key, default: []].append(connection) }
        if connection.subscribesToAllPresence {
            presenceSubscriptions.withLockedValue {
                $0[key.appId, default: [:]][ObjectIdentifier(connection)] = connection
            }
        }
    }

    func unregister(_ connection: ServerConnection) {
        let key = UserKey(appId: connection.principal.appId, uid: connection.principal.uid)
        shard(key).withLockedValue { users in
            users[key]?.removeAll { $0 === connection }
            if users[key]?.isEmpty == true { users[key] = nil }
        }
        if connection.subscribesToAllPresence {
            presenceSubscriptions.withLockedValue { $0[key.appId]?[ObjectIdentifier(connection)] = nil }
        }
    }

    /// The connections of an app that receive every user's presence.
    /// The apps with a connection here that receives every user's presence (other nodes route presence here).
    var appsWithPresenceSubscribers: [String] {
        presenceSubscriptions.withLockedValue { $0.filter { !$0.value.isEmpty }.keys.sorted() }
    }

    func presenceSubscribers(appId: String) -> [ServerConnection] {
        presenceSubscriptions.withLockedValue { $0[appId].map { Array($0.values) } ?? [] }
    }

    /// The live connections of a user.
    func connections(appId: String, uid: String) -> [ServerConnection] {
        connections(UserKey(appId: appId, uid: uid))
    }

    /// The live connections of a user (a key made once is hashed once, however often it is looked up).
    func connections(_ key: UserKey) -> [ServerConnection] {
        shard(key).withLockedValue { $0[key] ?? [] }
    }

    /// Whether a user has a live connection here.
    func hasConnections(_ key: UserKey) -> Bool {
        shard(key).withLockedValue { $0[key] != nil }
    }

    /// Queues `frame` on every connection of every user in `uids`.
    func deliver(_ frame: ByteBuffer, appId: String, to uids: some Sequence<String>) {
        deliver(CollectionOfOne(frame), appId: appId, to: uids)
    }

    /// Queues `frames`, in order, on every connection of every user in `uids`. The users are looked up once for all
    /// the frames: a command whose events all go to the same recipients (1,000 `participantAdded` to a group of 1,001)
    /// costs one lookup per recipient, not one per recipient and event.
    func deliver(_ frames: some Collection<ByteBuffer>, appId: String, to uids: some Sequence<String>) {
        var wakeUps = WakeUps()
        deliver(frames, appId: appId, to: uids, into: &wakeUps)
        wakeUps.run()
    }

    /// ``deliver(_:appId:to:)``, leaving the writers to wake in `wakeUps` (a batch's, woken once it is all out).
    func deliver(
        _ frames: some Collection<ByteBuffer>, appId: String, to uids: some Sequence<String>,
        into wakeUps: inout WakeUps
    ) {
        guard !frames.isEmpty else { return }
        var targets: [ServerConnection] = []
        for uid in uids { targets += connections(appId: appId, uid: uid) }
        for frame in frames {
            for connection in targets { wakeUps.push(frame, on: connection) }
        }
    }

    /// Queues `frame` on every connection of the user `key`, leaving the writers to wake in `wakeUps`.
    func deliver(_ frame: ByteBuffer, to key: UserKey, into wakeUps: inout WakeUps) {
        for connection in connections(key) { wakeUps.push(frame, on: connection) }
    }

    /// Closes the connections of a user, or only those opened with one token.
    func close(appId: String, uid: String, tokenIds: Set<String>? = nil, code: UInt16, reason: ErrorCode) {
        for connection in connections(appId: appId, uid: uid)
        where tokenIds.map({ $0.contains(connection.principal.tokenId) }) ?? true {
            connection.requestClose(code: code, reason: reason)
        }
    }

    /// Closes every registered connection (the node must resynchronise).
    func closeAll(code: UInt16, reason: ErrorCode) {
        for shard in shards {
            for connection in shard.withLockedValue({ $0.values.flatMap { $0 } }) {
                connection.requestClose(code: code, reason: reason)
            }
        }
    }

    /// Live connections of one app's users, and how many users they belong to (a walk of every shard: for the
    /// operator's figures, not a hot path).
    func counts(appId: String) -> (connections: Int, users: Int) {
        var connections = 0
        var users = 0
        for shard in shards {
            shard.withLockedValue { map in
                for (key, list) in map where key.appId == appId && !list.isEmpty {
                    connections += list.count
                    users += 1
                }
            }
        }
        return (connections, users)
    }

    /// Bytes of events waiting in every live connection's queue, and how many users have a live connection (a walk of
    /// every shard: for `/metrics`, not a hot path).
    var queuedBytesAndUsers: (bytes: Int, users: Int) {
        var bytes = 0
        var users = 0
        for shard in shards {
            shard.withLockedValue { map in
                for list in map.values where !list.isEmpty {
                    users += 1
                    for connection in list { bytes += connection.outbound.queuedBytes }
                }
            }
        }
        return (bytes, users)
    }

    /// Number of live connections.
    var connectionCount: Int {
        shards.reduce(0) { total, shard in total + shard.withLockedValue { $0.values.reduce(0) { $0 + $1.count } } }
    }
}
