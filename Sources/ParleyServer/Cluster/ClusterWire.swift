import NIOCore
import ParleyStore

/// What one node says to the others on NATS, and its bytes: a version byte, a kind byte, the sending node's id, then
/// the kind's fields (integers big-endian; strings and byte strings length-prefixed). Binary, since the events of
/// every batch go through it; decoding checks every length against what is left and returns nil for anything it does
/// not understand, so a stray publisher on the deployment's subjects cannot crash a node.
enum ClusterMessage: Equatable, Sendable {
    /// Every heartbeat interval, on the deployment's subject: the node is alive; `seq` is the last number of its
    /// stream of announcements, `acks` what it has applied of the others', `presenceApps` the apps where it has
    /// connections that receive every user's presence.
    case heartbeat(node: String, seq: UInt64, acks: [String: UInt64], presenceApps: [String])
    /// A numbered announcement of changes to the node's users (empty: a mark, ``ClusterDirectory/acked(through:)``).
    case delta(node: String, seq: UInt64, changes: [ClusterDirectory.Change])
    /// The node is shutting down.
    case goodbye(node: String)
    /// What the node published may not all have arrived (it reconnected to NATS): every node reads the conversations
    /// it follows again.
    case resync(node: String)
    /// To one node: send me your users.
    case snapshotRequest(node: String)
    /// One part of a node's users as of its announcement `seq`.
    case snapshot(
        node: String, seq: UInt64, part: Int, parts: Int, users: [ClusterSnapshotUser], presenceApps: [String])
    /// Durable events of one conversation committed by the node, in order, each group with its recipients.
    case events(node: String, appId: String, conversationId: String, groups: [ClusterEventGroup])
    /// An event that is not stored (JSON) for the connections of `uids`; with `presenceOf`, also for the app's
    /// connections that receive every user's presence, but that user's and those of `except`.
    case deliver(node: String, appId: String, uids: [String], presenceOf: String?, except: [String], event: [UInt8])
    /// Close the user's connections (those opened with `tokenIds`, or all).
    case close(node: String, appId: String, uid: String, tokenIds: [String]?, code: UInt16, reason: String)

    var node: String {
        switch self {
        case .heartbeat(let node, _, _, _), .delta(let node, _, _), .goodbye(let node), .resync(let node),
            .snapshotRequest(let node), .snapshot(let node, _, _, _, _, _), .events(let node, _, _, _),
            .deliver(let node, _, _, _, _, _), .close(let node, _, _, _, _, _):
            return node
        }
    }
}

/// A user in a snapshot: `closedAt` nil while a socket of theirs is open.
struct ClusterSnapshotUser: Equatable, Sendable {
    var appId: String
    var uid: String
    var closedAt: Int64?
}

/// Events of one command (or a read of the tables) that share their recipients.
struct ClusterEventGroup: Equatable, Sendable {
    var recipients: [String]
    var events: [ClusterEvent]
}

/// A stored event as it travels: its sequence number, who made it and what it changes (``EventFacts``; the app and
/// the conversation are the message's), and its stored JSON, which the receiving node passes to sockets undecoded.
struct ClusterEvent: Equatable, Sendable {
    var seq: Int64
    var actor: String?
    var kind: EventFacts.Kind
    var json: [UInt8]

    init(seq: Int64, actor: String? = nil, kind: EventFacts.Kind = .other, json: [UInt8]) {
        self.seq = seq
        self.actor = actor
        self.kind = kind
        self.json = json
    }

    init(_ facts: EventFacts, json: [UInt8]) {
        self.init(seq: facts.seq ?? 0, actor: facts.actor, kind: facts.kind, json: json)
    }
}

enum ClusterWire {
    /// 2: events carry their facts.
    static let version: UInt8 = 2

    private enum Kind: UInt8 {
        case heartbeat = 1
        case delta
        case goodbye
        case resync
        case snapshotRequest
        case snapshot
        case events
        case deliver
        case close
    }

    private enum ChangeKind: UInt8 {
        case online = 1
        case socketsClosed
        case socketsOpen
        case offline
        case offlineAnnounced
    }

    // MARK: Parts

    /// `items` cut into consecutive runs, each as long as fits in a message of `limit` bytes that has `overhead` bytes
    /// besides its items (the `size(of:)` functions): a turn of tens of thousands of arrivals, a snapshot of a node's
    /// users, or a batch's events of a large group would pass NATS's `max_payload` in one message. An item that does
    /// not fit even alone is a run of its own (NATS refuses that message). No items: one empty run.
    static func runs<Item>(_ items: [Item], overhead: Int, limit: Int, size: (Item) -> Int) -> [ArraySlice<Item>] {
        var runs: [ArraySlice<Item>] = []
        var start = items.startIndex
        var bytes = overhead
        for (index, item) in items.enumerated() {
            let itemSize = size(item)
            if bytes + itemSize > limit, index > start {
                runs.append(items[start..<index])
                start = index
                bytes = overhead
            }
            bytes += itemSize
        }
        runs.append(items[start..<items.endIndex])
        return runs
    }

    /// ``runs(_:overhead:limit:size:)`` of event groups, a group too large alone cut into groups of the same
    /// recipients and fewer events (a command's events for many recipients).
    static func eventRuns(_ groups: [ClusterEventGroup], overhead: Int, limit: Int) -> [[ClusterEventGroup]] {
        let pieces = groups.flatMap { group -> [ClusterEventGroup] in
            guard overhead + size(of: group) > limit, group.events.count > 1 else { return [group] }
            let recipients = size(of: ClusterEventGroup(recipients: group.recipients, events: []))
            return runs(group.events, overhead: overhead + recipients, limit: limit, size: size(of:))
                .map { ClusterEventGroup(recipients: group.recipients, events: Array($0)) }
        }
        return runs(pieces, overhead: overhead, limit: limit, size: size(of:)).map(Array.init)
    }

    /// The bytes a change adds to a `.delta`.
    static func size(of change: ClusterDirectory.Change) -> Int {
        switch change {
        case .online(let user), .socketsOpen(let user), .offline(let user, _): 1 + size(of: user)
        case .socketsClosed(let user, _): 1 + size(of: user) + 8
        }
    }

    /// The bytes a user adds to a `.snapshot`.
    static func size(of user: ClusterSnapshotUser) -> Int {
        size(of: UserKey(appId: user.appId, uid: user.uid)) + 8
    }

    /// The bytes a group adds to an `.events`.
    static func size(of group: ClusterEventGroup) -> Int {
        group.recipients.reduce(8) { $0 + 4 + $1.utf8.count } + group.events.reduce(0) { $0 + size(of: $1) }
    }

    /// The bytes an event adds to its group.
    static func size(of event: ClusterEvent) -> Int {
        let kind: Int
        switch event.kind {
        case .messageRead(let uid, _): kind = 1 + 4 + uid.utf8.count + 8
        case .messageDeleted(let uid), .participantAdded(let uid), .participantRemoved(let uid):
            kind = 1 + 4 + uid.utf8.count
        case .messageSent, .conversationCreated, .conversationDeleted, .conversationUndeleted, .other: kind = 1
        }
        return 8 + 1 + (event.actor.map { 4 + $0.utf8.count } ?? 0) + kind + 4 + event.json.count
    }

    private static func size(of user: UserKey) -> Int { 8 + user.appId.utf8.count + user.uid.utf8.count }

    // MARK: Encoding

    static func encode(_ message: ClusterMessage, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer
    {
        var buffer = allocator.buffer(capacity: 256)
        buffer.writeInteger(version)
        switch message {
        case .heartbeat(let node, let seq, let acks, let presenceApps):
            buffer.writeInteger(Kind.heartbeat.rawValue)
            buffer.writeText(node)
            buffer.writeInteger(seq)
            buffer.writeInteger(UInt32(acks.count))
            for (peer, ack) in acks.sorted(by: { $0.key < $1.key }) {
                buffer.writeText(peer)
                buffer.writeInteger(ack)
            }
            buffer.writeTexts(presenceApps)
        case .delta(let node, let seq, let changes):
            buffer.writeInteger(Kind.delta.rawValue)
            buffer.writeText(node)
            buffer.writeInteger(seq)
            buffer.writeInteger(UInt32(changes.count))
            for change in changes {
                switch change {
                case .online(let user):
                    buffer.writeInteger(ChangeKind.online.rawValue)
                    buffer.writeUser(user)
                case .socketsClosed(let user, let at):
                    buffer.writeInteger(ChangeKind.socketsClosed.rawValue)
                    buffer.writeUser(user)
                    buffer.writeInteger(at)
                case .socketsOpen(let user):
                    buffer.writeInteger(ChangeKind.socketsOpen.rawValue)
                    buffer.writeUser(user)
                case .offline(let user, let announced):
                    buffer.writeInteger((announced ? ChangeKind.offlineAnnounced : ChangeKind.offline).rawValue)
                    buffer.writeUser(user)
                }
            }
        case .goodbye(let node):
            buffer.writeInteger(Kind.goodbye.rawValue)
            buffer.writeText(node)
        case .resync(let node):
            buffer.writeInteger(Kind.resync.rawValue)
            buffer.writeText(node)
        case .snapshotRequest(let node):
            buffer.writeInteger(Kind.snapshotRequest.rawValue)
            buffer.writeText(node)
        case .snapshot(let node, let seq, let part, let parts, let users, let presenceApps):
            buffer.writeInteger(Kind.snapshot.rawValue)
            buffer.writeText(node)
            buffer.writeInteger(seq)
            buffer.writeInteger(UInt32(part))
            buffer.writeInteger(UInt32(parts))
            buffer.writeInteger(UInt32(users.count))
            for user in users {
                buffer.writeText(user.appId)
                buffer.writeText(user.uid)
                buffer.writeInteger(user.closedAt ?? -1)
            }
            buffer.writeTexts(presenceApps)
        case .events(let node, let appId, let conversationId, let groups):
            buffer.writeInteger(Kind.events.rawValue)
            buffer.writeText(node)
            buffer.writeText(appId)
            buffer.writeText(conversationId)
            buffer.writeInteger(UInt32(groups.count))
            for group in groups {
                buffer.writeTexts(group.recipients)
                buffer.writeInteger(UInt32(group.events.count))
                for event in group.events {
                    buffer.writeInteger(event.seq)
                    buffer.writeOptionalText(event.actor)
                    buffer.writeKind(event.kind)
                    buffer.writeBytesWithLength(event.json)
                }
            }
        case .deliver(let node, let appId, let uids, let presenceOf, let except, let event):
            buffer.writeInteger(Kind.deliver.rawValue)
            buffer.writeText(node)
            buffer.writeText(appId)
            buffer.writeTexts(uids)
            buffer.writeOptionalText(presenceOf)
            buffer.writeTexts(except)
            buffer.writeBytesWithLength(event)
        case .close(let node, let appId, let uid, let tokenIds, let code, let reason):
            buffer.writeInteger(Kind.close.rawValue)
            buffer.writeText(node)
            buffer.writeText(appId)
            buffer.writeText(uid)
            buffer.writeInteger(UInt8(tokenIds == nil ? 0 : 1))
            buffer.writeTexts(tokenIds ?? [])
            buffer.writeInteger(code)
            buffer.writeText(reason)
        }
        return buffer
    }

    // MARK: Decoding

    /// The message in `buffer`, or nil when it is not one (another version, a bad length, bytes left over).
    static func decode(_ buffer: ByteBuffer) -> ClusterMessage? {
        var buffer = buffer
        guard buffer.readInteger(as: UInt8.self) == version, let kindByte = buffer.readInteger(as: UInt8.self),
            let kind = Kind(rawValue: kindByte), let node = buffer.readText()
        else { return nil }
        let message: ClusterMessage?
        switch kind {
        case .heartbeat:
            message = decodeHeartbeat(&buffer, node: node)
        case .delta:
            message = decodeDelta(&buffer, node: node)
        case .goodbye:
            message = .goodbye(node: node)
        case .resync:
            message = .resync(node: node)
        case .snapshotRequest:
            message = .snapshotRequest(node: node)
        case .snapshot:
            message = decodeSnapshot(&buffer, node: node)
        case .events:
            message = decodeEvents(&buffer, node: node)
        case .deliver:
            guard let appId = buffer.readText(), let uids = buffer.readTexts(),
                let presenceOf = buffer.readOptionalText(), let except = buffer.readTexts(),
                let event = buffer.readBytesWithLength()
            else { return nil }
            message = .deliver(
                node: node, appId: appId, uids: uids, presenceOf: presenceOf, except: except, event: event)
        case .close:
            guard let appId = buffer.readText(), let uid = buffer.readText(),
                let hasTokens = buffer.readInteger(as: UInt8.self), hasTokens <= 1, let tokenIds = buffer.readTexts(),
                let code = buffer.readInteger(as: UInt16.self), let reason = buffer.readText()
            else { return nil }
            message = .close(
                node: node, appId: appId, uid: uid, tokenIds: hasTokens == 1 ? tokenIds : nil, code: code,
                reason: reason)
        }
        return buffer.readableBytes == 0 ? message : nil
    }

    private static func decodeHeartbeat(_ buffer: inout ByteBuffer, node: String) -> ClusterMessage? {
        guard let seq = buffer.readInteger(as: UInt64.self), let count = buffer.readCount(minimumBytesEach: 10)
        else { return nil }
        var acks: [String: UInt64] = [:]
        for _ in 0..<count {
            guard let peer = buffer.readText(), let ack = buffer.readInteger(as: UInt64.self) else { return nil }
            acks[peer] = ack
        }
        guard let apps = buffer.readTexts() else { return nil }
        return .heartbeat(node: node, seq: seq, acks: acks, presenceApps: apps)
    }

    private static func decodeDelta(_ buffer: inout ByteBuffer, node: String) -> ClusterMessage? {
        guard let seq = buffer.readInteger(as: UInt64.self), let count = buffer.readCount(minimumBytesEach: 5)
        else { return nil }
        var changes: [ClusterDirectory.Change] = []
        changes.reserveCapacity(count)
        for _ in 0..<count {
            guard let kindByte = buffer.readInteger(as: UInt8.self), let kind = ChangeKind(rawValue: kindByte),
                let user = buffer.readUser()
            else { return nil }
            switch kind {
            case .online: changes.append(.online(user))
            case .socketsOpen: changes.append(.socketsOpen(user))
            case .offline: changes.append(.offline(user, announced: false))
            case .offlineAnnounced: changes.append(.offline(user, announced: true))
            case .socketsClosed:
                guard let at = buffer.readInteger(as: Int64.self) else { return nil }
                changes.append(.socketsClosed(user, at: at))
            }
        }
        return .delta(node: node, seq: seq, changes: changes)
    }

    private static func decodeSnapshot(_ buffer: inout ByteBuffer, node: String) -> ClusterMessage? {
        guard let seq = buffer.readInteger(as: UInt64.self), let part = buffer.readInteger(as: UInt32.self),
            let parts = buffer.readInteger(as: UInt32.self), part < parts,
            let count = buffer.readCount(minimumBytesEach: 12)
        else { return nil }
        var users: [ClusterSnapshotUser] = []
        users.reserveCapacity(count)
        for _ in 0..<count {
            guard let appId = buffer.readText(), let uid = buffer.readText(),
                let closedAt = buffer.readInteger(as: Int64.self)
            else { return nil }
            users.append(ClusterSnapshotUser(appId: appId, uid: uid, closedAt: closedAt < 0 ? nil : closedAt))
        }
        guard let apps = buffer.readTexts() else { return nil }
        return .snapshot(node: node, seq: seq, part: Int(part), parts: Int(parts), users: users, presenceApps: apps)
    }

    private static func decodeEvents(_ buffer: inout ByteBuffer, node: String) -> ClusterMessage? {
        guard let appId = buffer.readText(), let conversationId = buffer.readText(),
            let count = buffer.readCount(minimumBytesEach: 8)
        else { return nil }
        var groups: [ClusterEventGroup] = []
        groups.reserveCapacity(count)
        for _ in 0..<count {
            guard let recipients = buffer.readTexts(), let eventCount = buffer.readCount(minimumBytesEach: 14)
            else { return nil }
            var events: [ClusterEvent] = []
            events.reserveCapacity(eventCount)
            for _ in 0..<eventCount {
                guard let seq = buffer.readInteger(as: Int64.self), let actor = buffer.readOptionalText(),
                    let kind = buffer.readKind(), let json = buffer.readBytesWithLength()
                else { return nil }
                events.append(ClusterEvent(seq: seq, actor: actor, kind: kind, json: json))
            }
            groups.append(ClusterEventGroup(recipients: recipients, events: events))
        }
        return .events(node: node, appId: appId, conversationId: conversationId, groups: groups)
    }
}

extension ByteBuffer {
    fileprivate mutating func writeText(_ text: String) {
        let lengthIndex = writerIndex
        writeInteger(UInt32(0))
        let written = writeString(text)
        setInteger(UInt32(written), at: lengthIndex)
    }

    fileprivate mutating func writeOptionalText(_ text: String?) {
        writeInteger(UInt8(text == nil ? 0 : 1))
        if let text { writeText(text) }
    }

    fileprivate mutating func writeTexts(_ texts: [String]) {
        writeInteger(UInt32(texts.count))
        for text in texts { writeText(text) }
    }

    fileprivate mutating func writeBytesWithLength(_ bytes: [UInt8]) {
        writeInteger(UInt32(bytes.count))
        writeBytes(bytes)
    }

    fileprivate mutating func writeUser(_ user: UserKey) {
        writeText(user.appId)
        writeText(user.uid)
    }

    fileprivate mutating func readText() -> String? {
        guard let length = readInteger(as: UInt32.self), Int(length) <= readableBytes else { return nil }
        return readString(length: Int(length))
    }

    fileprivate mutating func readOptionalText() -> String?? {
        guard let flag = readInteger(as: UInt8.self), flag <= 1 else { return nil }
        guard flag == 1 else { return .some(nil) }
        guard let text = readText() else { return nil }
        return .some(text)
    }

    fileprivate mutating func readTexts() -> [String]? {
        guard let count = readCount(minimumBytesEach: 4) else { return nil }
        var texts: [String] = []
        texts.reserveCapacity(count)
        for _ in 0..<count {
            guard let text = readText() else { return nil }
            texts.append(text)
        }
        return texts
    }

    fileprivate mutating func readBytesWithLength() -> [UInt8]? {
        guard let length = readInteger(as: UInt32.self), Int(length) <= readableBytes else { return nil }
        return readBytes(length: Int(length))
    }

    fileprivate mutating func writeKind(_ kind: EventFacts.Kind) {
        switch kind {
        case .other: writeInteger(UInt8(0))
        case .messageSent: writeInteger(UInt8(1))
        case .messageRead(let uid, let seq):
            writeInteger(UInt8(2))
            writeText(uid)
            writeInteger(seq)
        case .messageDeleted(let sender):
            writeInteger(UInt8(3))
            writeText(sender)
        case .participantAdded(let uid):
            writeInteger(UInt8(4))
            writeText(uid)
        case .participantRemoved(let uid):
            writeInteger(UInt8(5))
            writeText(uid)
        case .conversationCreated: writeInteger(UInt8(6))
        case .conversationDeleted: writeInteger(UInt8(7))
        case .conversationUndeleted: writeInteger(UInt8(8))
        }
    }

    fileprivate mutating func readKind() -> EventFacts.Kind? {
        switch readInteger(as: UInt8.self) {
        case 0: return .other
        case 1: return .messageSent
        case 2:
            guard let uid = readText(), let seq = readInteger(as: Int64.self) else { return nil }
            return .messageRead(uid: uid, seq: seq)
        case 3: return readText().map { .messageDeleted(sender: $0) }
        case 4: return readText().map { .participantAdded(uid: $0) }
        case 5: return readText().map { .participantRemoved(uid: $0) }
        case 6: return .conversationCreated
        case 7: return .conversationDeleted
        case 8: return .conversationUndeleted
        default: return nil
        }
    }

    fileprivate mutating func readUser() -> UserKey? {
        guard let appId = readText(), let uid = readText() else { return nil }
        return UserKey(appId: appId, uid: uid)
    }

    /// A count of elements that take at least `minimumBytesEach` bytes: nil when what is left cannot hold them (a
    /// hostile count never reserves memory).
    fileprivate mutating func readCount(minimumBytesEach: Int) -> Int? {
        guard let count = readInteger(as: UInt32.self), Int(count) <= readableBytes / max(1, minimumBytesEach) else {
            return nil
        }
        return Int(count)
    }
}
