import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import ParleyProtocol

/// What a message of the soak was sent for. The verification treats them alike; the counts tell them apart.
enum SoakSendKind: UInt8, Codable, Sendable {
    /// Small-group traffic (`--rate`).
    case room
    /// The large group's messages (`--fanout-interval`).
    case fanout
    /// The large messages that fill a slow consumer's queue.
    case burst
    /// A message that carries an upload.
    case attachment
}

/// A send the server acknowledged: what the stored history must hold exactly once.
struct SoakAckedSend: Sendable {
    var conversation: Int32
    var kind: SoakSendKind
    var seq: Int64
    var clientMessageId: UUID
    var messageId: String
    /// The upload an attachment message carries.
    var fileID: String?
}

/// The counts of a soak's clients, at one moment.
struct SoakCounts: Codable, Sendable {
    /// Sends written (each once, resends not counted).
    var sent = 0
    /// Sends acknowledged (`ack` with the stored message).
    var acked = 0
    /// Acks of a resent send that said `duplicate` (the first attempt had been stored).
    var duplicateAcks = 0
    var editsSent = 0
    var editsAcked = 0
    var reactionsSent = 0
    var reactionsAcked = 0
    /// Frames written again on a new connection because their answer had not come on the old one.
    var resent = 0
    /// `error` frames, by code.
    var errors: [String: Int] = [:]
    /// Messages (`conversationMessage.sent`) delivered to a member for the first time.
    var delivered = 0
    /// Durable events delivered to members, first time, all kinds.
    var events = 0
    /// Events a member never received: a sequence number skipped (live or in a replay), or a replay that ended below
    /// the position its `caughtUp` gave.
    var deliveryGaps = 0
    /// Events received twice on one connection outside the overlap the protocol allows (the live queue repeating what
    /// the replay sent, up to the `caughtUp` position).
    var deliveryDuplicates = 0
    /// Repeats the protocol allows (dropped by a client: `seq` not above its position after `caughtUp`).
    var overlap = 0
    /// `resync` frames (the replay skipped a conversation).
    var resyncs = 0
    /// Events replayed on a resumed connection before its `caughtUp`.
    var replayed = 0
    /// Connections that resumed (sent `resume`) and reached `caughtUp`: each one's replay was checked.
    var resumesChecked = 0
    /// `caughtUp` positions below what the client already had.
    var positionsBehind = 0
    /// Connections (hello received), the first ones included.
    var connections = 0
    var connectFailures = 0
    var connectFailureKinds: [String: Int] = [:]
    /// Clean closes (close frame 1000) made by the churn, completed.
    var churned = 0
    /// Connections reset by the bench (SO_LINGER 0).
    var cut = 0
    /// Connections that ended without the bench asking, by the close code the server sent (0: none seen).
    var unexpectedCloses: [String: Int] = [:]
    /// Frames of a connection no longer current (none expected).
    var staleFrames = 0
    /// Sends not made because no member of the conversation was live.
    var skipped = 0
}

/// The users of a soak, one WebSocket each, kept connected through churn, cuts and slow-consumer closes: each
/// reconnects with `resume` (its position in every conversation and in its own stream), and every durable event it
/// receives is checked against its position (docs/PROTOCOL.md, "Resume"). Sends, edits and reactions wait for their
/// answer; those a dropped connection left unanswered are written again, in order, once the next connection is
/// caught up (the SDK's outbox does the same).
final class SoakClients: Sendable {
    /// Who is in what.
    struct Setup: Sendable {
        var tokens: [String]
        var conversationIds: [String]
        /// Conversation indices of each user.
        var conversationsOf: [[Int]]
        /// Members (user indices) of each conversation.
        var members: [[Int]]
        var marker: Marker
        /// Seconds a dropped user stays away before reconnecting (uniform in the range).
        var away: ClosedRange<Double>
    }

    /// Where a user's connection stands.
    enum Phase: Equatable, Sendable {
        case away
        case connecting
        /// `hello` received; the replay is under way.
        case replaying
        /// `caughtUp` received: it sends and may be dropped.
        case live
        /// The churn closed it cleanly.
        case closing
        /// The bench reset it.
        case cutting
        /// It stopped reading (a slow consumer).
        case slow
        case stopped
    }

    private struct User {
        var phase = Phase.away
        var socket: BenchSocket?
        var positions: [Int: Int64] = [:]
        var userSeq: Int64?
        /// The current connection's `caughtUp` positions (nil before it).
        var caughtUp: [Int: Int64]?
        /// Refs of frames not answered yet, in the order they were written.
        var pending: [Int] = []
        var failedAttempts = 0
        /// The current connection sent `resume`.
        var resumed = false
    }

    private struct Pending {
        enum Kind {
            case send(SoakSendKind, UUID, fileID: String?)
            case edit(messageId: String, number: Int)
            case reaction(messageId: String, key: String)
        }
        var kind: Kind
        var user: Int
        var conversation: Int
        var frame: String
        var sentAt: UInt64
        var resent = false
    }

    /// A recently acked message, for edits and reactions.
    private struct Recent {
        var conversation: Int
        var messageId: String
        var sender: Int
    }

    private struct State {
        var users: [User]
        var pending: [Int: Pending] = [:]
        var nextRef = 0
        var nextEdit = 0
        var acked: [SoakAckedSend] = []
        var recent: [Recent] = []
        var recentNext = 0
        var lastEdit: [String: Int] = [:]
        var reactions: [String: [String: Set<Int>]] = [:]
        var counts = SoakCounts()
        /// The first refusals and anomalies, for the report.
        var notes: [String] = []
        var stopped = false
    }

    static let reactionKeys = ["+1", "heart", "laugh", "wow", "sad", "fire", "eyes", "tada"]
    private static let recentCapacity = 256
    private static let ackTag = Array(#""type":"ack""#.utf8)
    private static let errorTag = Array(#""type":"error""#.utf8)
    private static let caughtUpTag = Array(#""type":"caughtUp""#.utf8)
    private static let resyncTag = Array(#""type":"resync""#.utf8)
    private static let sentName = "conversationMessage.sent"

    let setup: Setup
    private let fleet: Fleet
    private let conversationIndex: [String: Int]
    private let state: NIOLockedValueBox<State>
    /// Send to ack, first attempts only.
    let ackLatency = LatencyRecorder()
    /// Send to live delivery (the marker's time), first deliveries after `caughtUp` only.
    let deliveryLatency = LatencyRecorder()
    /// The same two since the last sample (``takeIntervalLatency()``).
    private let intervalAck = LatencyRecorder()
    private let intervalDelivery = LatencyRecorder()

    init(setup: Setup, fleet: Fleet) {
        self.setup = setup
        self.fleet = fleet
        conversationIndex = Dictionary(
            uniqueKeysWithValues: setup.conversationIds.enumerated().map { ($0.element, $0.offset) })
        state = NIOLockedValueBox(State(users: Array(repeating: User(), count: setup.tokens.count)))
    }

    var userCount: Int { setup.tokens.count }

    // MARK: Connections

    private var callbacks: SocketCallbacks {
        SocketCallbacks(
            text: { [weak self] socket, frame, receivedAt in self?.received(socket, frame, receivedAt) },
            closed: { [weak self] socket, code in self?.closed(socket, code: code) }
        )
    }

    /// Connects `user` (with `resume` once it has positions); a failed attempt is tried again with backoff.
    func connect(_ user: Int) {
        // The attempt starts on the event loop its channel will use, and its completion is registered there before
        // the loop can read anything: registered from another thread, it could come after `hello` and `caughtUp` had
        // been read (a thread of the concurrency pool preempted for a millisecond is enough on loopback), and the
        // `caughtUp` of a connection the state did not know yet would be lost.
        let loop = fleet.group.next()
        loop.execute { self.start(user, on: loop) }
    }

    private func start(_ user: Int, on loop: any EventLoop) {
        let frame: String?? = state.withLockedValue { state in
            guard !state.stopped, state.users[user].phase == .away else { return .none }
            state.users[user].phase = .connecting
            state.users[user].resumed = !state.users[user].positions.isEmpty
            return .some(connectFrame(state.users[user]))
        }
        guard case .some(let firstFrame) = frame else { return }
        let target = fleet.targets[0]
        BenchSocket.connect(
            index: user, target: target.address,
            source: fleet.sources.isEmpty ? nil : fleet.sources[user % fleet.sources.count],
            hostHeader: target.hostHeader, token: setup.tokens[user], group: loop,
            timeout: fleet.connectTimeout, callbacks: callbacks, connectFrame: firstFrame
        ).whenComplete { result in
            switch result {
            case .success(let socket):
                // Runs on the socket's loop as `hello` is read, before the frames after it.
                let keep = self.state.withLockedValue { state -> Bool in
                    guard !state.stopped else { return false }
                    state.users[user].socket = socket
                    state.users[user].phase = .replaying
                    state.users[user].caughtUp = nil
                    state.users[user].failedAttempts = 0
                    state.counts.connections += 1
                    return true
                }
                if !keep { socket.close(abort: true) }
            case .failure(let error):
                let attempts = self.state.withLockedValue { state -> Int? in
                    state.counts.connectFailures += 1
                    state.counts.connectFailureKinds[Fleet.describe(error), default: 0] += 1
                    guard !state.stopped else { return nil }
                    state.users[user].phase = .away
                    state.users[user].failedAttempts += 1
                    return state.users[user].failedAttempts
                }
                if let attempts {
                    // Full jitter, 0.25 s doubling to 5 s.
                    let ceiling = min(5.0, 0.25 * Double(1 << min(attempts, 10)))
                    self.reconnect(user, after: Double.random(in: 0.05...ceiling))
                }
            }
        }
    }

    private func reconnect(_ user: Int, after seconds: Double) {
        fleet.group.next().scheduleTask(in: .nanoseconds(Int64(seconds * 1e9))) { self.connect(user) }
    }

    /// The `connect` frame: with `resume` once the user has positions (nil: the plain one).
    private func connectFrame(_ user: User) -> String? {
        guard !user.positions.isEmpty else { return nil }
        let conversations = user.positions.sorted { $0.key < $1.key }
            .map { "\"\(setup.conversationIds[$0.key])\":\($0.value)" }.joined(separator: ",")
        return
            #"{"type":"connect","protocolVersion":1,"resume":{"userSeq":\#(user.userSeq ?? 0),"conversations":{\#(conversations)}}}"#
    }

    /// Whether every user is live and every frame answered.
    func settled() -> (live: Int, pending: Int) {
        state.withLockedValue { state in
            (state.users.reduce(0) { $0 + ($1.phase == .live ? 1 : 0) }, state.pending.count)
        }
    }

    /// Users that are not live, with their phase (for a failed setup's message).
    func notLive() -> [String] {
        state.withLockedValue { state in
            state.users.indices.filter { state.users[$0].phase != .live }.map { "\($0): \(state.users[$0].phase)" }
        }
    }

    /// Closes every connection for good (no reconnection).
    func stop() {
        let sockets = state.withLockedValue { state -> [BenchSocket] in
            state.stopped = true
            var sockets: [BenchSocket] = []
            for index in state.users.indices {
                if let socket = state.users[index].socket { sockets.append(socket) }
                state.users[index].phase = .stopped
            }
            return sockets
        }
        for socket in sockets { socket.close(abort: true) }
    }

    // MARK: Drops

    /// Closes one random live user's connection cleanly (close frame 1000); it reconnects with `resume` after
    /// ``Setup/away``. Returns whether one was found.
    @discardableResult
    func churnOne() -> Bool {
        guard let socket = takeRandomLive(setting: .closing) else { return false }
        socket.closeCleanly()
        return true
    }

    /// Resets one random live user's connection (SO_LINGER 0, no close handshake); it reconnects with `resume`.
    @discardableResult
    func cutOne() -> Bool {
        guard let socket = takeRandomLive(setting: .cutting) else { return false }
        socket.close(abort: true)
        return true
    }

    private func takeRandomLive(setting phase: Phase, excluding: Set<Int> = []) -> BenchSocket? {
        state.withLockedValue { state -> BenchSocket? in
            for _ in 0..<16 {
                let user = Int.random(in: 0..<state.users.count)
                guard !excluding.contains(user), state.users[user].phase == .live, let socket = state.users[user].socket
                else { continue }
                state.users[user].phase = phase
                if phase == .cutting { state.counts.cut += 1 }
                return socket
            }
            return nil
        }
    }

    /// A random live member of `conversation` other than `excluding`.
    func liveMember(of conversation: Int, excluding: Int? = nil) -> Int? {
        state.withLockedValue { liveMember(of: conversation, excluding: excluding, in: $0) }
    }

    private func liveMember(of conversation: Int, excluding: Int?, in state: State) -> Int? {
        let members = setup.members[conversation]
        guard !members.isEmpty else { return nil }
        let start = Int.random(in: 0..<members.count)
        for offset in 0..<members.count {
            let member = members[(start + offset) % members.count]
            if member != excluding && state.users[member].phase == .live { return member }
        }
        return nil
    }

    /// Stops reading `user`'s socket (a slow consumer): its receive buffer made small, `autoRead` off. Nil when the
    /// user is not live.
    func makeSlow(_ user: Int) -> BenchSocket? {
        let socket = state.withLockedValue { state -> BenchSocket? in
            guard state.users[user].phase == .live, let socket = state.users[user].socket else { return nil }
            state.users[user].phase = .slow
            return socket
        }
        guard let socket else { return nil }
        let channel = socket.channel
        channel.eventLoop.execute {
            _ = channel.setOption(.socketOption(.so_rcvbuf), value: 4096)
            _ = channel.setOption(.autoRead, value: false)
        }
        return socket
    }

    /// Whether `user`'s connection is still `socket`.
    func isCurrent(_ user: Int, _ socket: BenchSocket) -> Bool {
        state.withLockedValue { $0.users[user].socket === socket }
    }

    // MARK: Sends, edits, reactions

    /// Sends a message in `conversation` from `user` (a random live member when nil): a new `clientMessageId`, the
    /// marker, `padding` bytes, and the upload `fileID` when given. With `queueIfAway` a user who is not live gets the
    /// frame when its next connection is caught up. Returns whether a frame was queued.
    @discardableResult
    func send(
        conversation: Int, from user: Int? = nil, kind: SoakSendKind, number: Int, padding: Int,
        fileID: String? = nil, queueIfAway: Bool = false
    ) -> Bool {
        let clientMessageId = TimeOrderedUUID.make()
        let now = Monotonic.nanoseconds()
        let text = setup.marker.text(number: number, sentAt: now, padding: padding)
        let file = fileID.map { #",{"type":"file","file":{"id":"\#($0)"}}"# } ?? ""
        let conversationId = setup.conversationIds[conversation]
        let target = state.withLockedValue { state -> (BenchSocket?, String)? in
            guard !state.stopped,
                let sender = user ?? liveMember(of: conversation, excluding: nil, in: state),
                state.users[sender].phase == .live || queueIfAway
            else {
                state.counts.skipped += 1
                return nil
            }
            let ref = state.nextRef
            state.nextRef += 1
            let frame =
                #"{"type":"send","ref":"\#(ref)","conversationId":"\#(conversationId)","clientMessageId":"\#(clientMessageId.uuidString)","parts":[{"type":"text","text":"\#(text)"}\#(file)]}"#
            state.pending[ref] = Pending(
                kind: .send(kind, clientMessageId, fileID: fileID), user: sender, conversation: conversation,
                frame: frame, sentAt: now)
            state.users[sender].pending.append(ref)
            state.counts.sent += 1
            return (state.users[sender].phase == .live ? state.users[sender].socket : nil, frame)
        }
        guard let target else { return false }
        target.0?.send(text: target.1)
        return true
    }

    /// Edits a recently acked message from its live sender (`soak edit <n>`). Returns whether one was sent.
    @discardableResult
    func editOne() -> Bool {
        let target = state.withLockedValue { state -> (BenchSocket, String)? in
            guard !state.stopped, !state.recent.isEmpty else { return nil }
            for _ in 0..<8 {
                let recent = state.recent[Int.random(in: 0..<state.recent.count)]
                guard state.users[recent.sender].phase == .live, let socket = state.users[recent.sender].socket
                else { continue }
                let ref = state.nextRef
                state.nextRef += 1
                let number = state.nextEdit
                state.nextEdit += 1
                let frame =
                    #"{"type":"edit","ref":"\#(ref)","conversationId":"\#(setup.conversationIds[recent.conversation])","messageId":"\#(recent.messageId)","parts":[{"type":"text","text":"\#(Self.editText(number))"}]}"#
                state.pending[ref] = Pending(
                    kind: .edit(messageId: recent.messageId, number: number), user: recent.sender,
                    conversation: recent.conversation, frame: frame, sentAt: Monotonic.nanoseconds())
                state.users[recent.sender].pending.append(ref)
                state.counts.editsSent += 1
                return (socket, frame)
            }
            return nil
        }
        guard let target else { return false }
        target.0.send(text: target.1)
        return true
    }

    static func editText(_ number: Int) -> String { "soak edit \(number)" }

    /// Adds a reaction (one of ``reactionKeys``) to a recently acked message, from a random live member of its
    /// conversation. Returns whether one was sent.
    @discardableResult
    func reactOne() -> Bool {
        let target = state.withLockedValue { state -> (BenchSocket, String)? in
            guard !state.stopped, !state.recent.isEmpty else { return nil }
            for _ in 0..<8 {
                let recent = state.recent[Int.random(in: 0..<state.recent.count)]
                guard let member = liveMember(of: recent.conversation, excluding: nil, in: state),
                    let socket = state.users[member].socket
                else { continue }
                let key = Self.reactionKeys.randomElement()!
                let ref = state.nextRef
                state.nextRef += 1
                let frame =
                    #"{"type":"reaction","ref":"\#(ref)","conversationId":"\#(setup.conversationIds[recent.conversation])","messageId":"\#(recent.messageId)","key":"\#(key)"}"#
                state.pending[ref] = Pending(
                    kind: .reaction(messageId: recent.messageId, key: key), user: member,
                    conversation: recent.conversation, frame: frame, sentAt: Monotonic.nanoseconds())
                state.users[member].pending.append(ref)
                state.counts.reactionsSent += 1
                return (socket, frame)
            }
            return nil
        }
        guard let target else { return false }
        target.0.send(text: target.1)
        return true
    }

    // MARK: Frames

    private func received(_ socket: BenchSocket, _ frame: ByteBuffer, _ receivedAt: UInt64) {
        if FrameKind.isEvent(frame) {
            event(socket, frame, receivedAt)
        } else if FrameKind.contains(frame, Self.ackTag) {
            ack(socket, frame, receivedAt)
        } else if FrameKind.contains(frame, Self.errorTag) {
            error(socket, frame)
        } else if FrameKind.contains(frame, Self.caughtUpTag) {
            caughtUp(socket, frame)
        } else if FrameKind.contains(frame, Self.resyncTag) {
            resync(socket, frame)
        }
    }

    private static func decode<T: Decodable>(_ type: T.Type, _ frame: ByteBuffer) -> T? {
        try? JSONDecoder().decode(type, from: Data(frame.readableBytesView))
    }

    private func event(_ socket: BenchSocket, _ frame: ByteBuffer, _ receivedAt: UInt64) {
        // Ephemeral events (presence, typing, unread, receipts) have no `seq`.
        guard let envelope = Self.decode(EventEnvelope.self, frame), let seq = envelope.event.seq,
            let id = envelope.event.conversationId, let conversation = conversationIndex[id]
        else { return }
        let user = socket.index
        let isMessage = envelope.event.name == Self.sentName
        let measure = state.withLockedValue { state -> Bool in
            guard state.users[user].socket === socket else {
                state.counts.staleFrames += 1
                return false
            }
            let caughtUp = state.users[user].caughtUp
            guard let position = state.users[user].positions[conversation] else {
                // A conversation the first connection had no position in yet: its replay starts here.
                state.users[user].positions[conversation] = seq
                state.counts.events += 1
                if isMessage { state.counts.delivered += 1 }
                return false
            }
            if seq == position + 1 {
                state.users[user].positions[conversation] = seq
            } else if seq > position + 1 {
                state.counts.deliveryGaps += Int(seq - position - 1)
                note(
                    &state,
                    "gap: user \(user) conversation \(id) had \(position), received \(seq)"
                        + (caughtUp == nil ? " (replay)" : ""))
                state.users[user].positions[conversation] = seq
            } else {
                if let caughtUp, seq <= caughtUp[conversation] ?? 0 {
                    state.counts.overlap += 1
                } else {
                    state.counts.deliveryDuplicates += 1
                    note(
                        &state,
                        "duplicate: user \(user) conversation \(id) at \(position) received \(seq) again"
                            + (caughtUp == nil ? " (replay)" : ""))
                }
                return false
            }
            state.counts.events += 1
            if caughtUp == nil, state.users[user].resumed { state.counts.replayed += 1 }
            if isMessage { state.counts.delivered += 1 }
            return isMessage && caughtUp != nil
        }
        if measure, let found = setup.marker.find(in: frame) {
            deliveryLatency.record(from: found.sentAt, to: receivedAt)
            intervalDelivery.record(from: found.sentAt, to: receivedAt)
        }
    }

    private func ack(_ socket: BenchSocket, _ frame: ByteBuffer, _ receivedAt: UInt64) {
        guard let ack = Self.decode(AckEnvelope.self, frame), let ref = Int(ack.ref) else {
            state.withLockedValue { note(&$0, "undecodable ack: \(String(buffer: frame).prefix(200))") }
            return
        }
        let measured = state.withLockedValue { state -> UInt64? in
            guard let pending = state.pending.removeValue(forKey: ref) else {
                note(&state, "ack of an unknown ref \(ref)")
                return nil
            }
            state.users[pending.user].pending.removeAll { $0 == ref }
            switch pending.kind {
            case .send(let kind, let clientMessageId, let fileID):
                guard let message = ack.message else {
                    state.counts.errors["ack without a message", default: 0] += 1
                    return nil
                }
                state.counts.acked += 1
                if ack.duplicate == true { state.counts.duplicateAcks += 1 }
                if message.clientMessageId?.uppercased() != clientMessageId.uuidString {
                    state.counts.errors["ack of another clientMessageId", default: 0] += 1
                }
                state.acked.append(
                    SoakAckedSend(
                        conversation: Int32(pending.conversation), kind: kind, seq: message.seq,
                        clientMessageId: clientMessageId, messageId: message.id, fileID: fileID))
                if kind == .room || kind == .fanout {
                    let recent = Recent(conversation: pending.conversation, messageId: message.id, sender: pending.user)
                    if state.recent.count < Self.recentCapacity {
                        state.recent.append(recent)
                    } else {
                        state.recent[state.recentNext] = recent
                        state.recentNext = (state.recentNext + 1) % Self.recentCapacity
                    }
                }
            case .edit(let messageId, let number):
                state.counts.editsAcked += 1
                state.lastEdit[messageId] = max(state.lastEdit[messageId] ?? -1, number)
            case .reaction(let messageId, let key):
                state.counts.reactionsAcked += 1
                state.reactions[messageId, default: [:]][key, default: []].insert(pending.user)
            }
            return pending.resent ? nil : pending.sentAt
        }
        if let measured {
            ackLatency.record(from: measured, to: receivedAt)
            intervalAck.record(from: measured, to: receivedAt)
        }
    }

    private func error(_ socket: BenchSocket, _ frame: ByteBuffer) {
        let refused = Self.decode(ErrorEnvelope.self, frame)
        state.withLockedValue { state in
            let code = refused?.code ?? "undecodable error"
            state.counts.errors[code, default: 0] += 1
            var what = "error \(code) \(refused?.message ?? "")"
            if let ref = refused?.ref.flatMap({ Int($0) }), let pending = state.pending.removeValue(forKey: ref) {
                state.users[pending.user].pending.removeAll { $0 == ref }
                what += " for \(pending.frame.prefix(160))"
            }
            note(&state, what)
        }
    }

    private func caughtUp(_ socket: BenchSocket, _ frame: ByteBuffer) {
        guard let caughtUp = Self.decode(CaughtUpEnvelope.self, frame) else { return }
        let user = socket.index
        let resend = state.withLockedValue { state -> [String] in
            guard state.users[user].socket === socket, !state.stopped else { return [] }
            var positions: [Int: Int64] = [:]
            for (id, seq) in caughtUp.conversations {
                if let conversation = conversationIndex[id] { positions[conversation] = seq }
            }
            for conversation in setup.conversationsOf[user] {
                guard let end = positions[conversation] else {
                    note(&state, "caughtUp of user \(user) without conversation \(setup.conversationIds[conversation])")
                    continue
                }
                if let position = state.users[user].positions[conversation] {
                    if end > position {
                        state.counts.deliveryGaps += Int(end - position)
                        note(&state, "replay of user \(user) ended at \(position), caughtUp says \(end)")
                        state.users[user].positions[conversation] = end
                    } else if end < position {
                        state.counts.positionsBehind += 1
                    }
                } else {
                    state.users[user].positions[conversation] = end
                }
            }
            state.users[user].userSeq = caughtUp.userSeq
            state.users[user].caughtUp = positions
            if state.users[user].resumed { state.counts.resumesChecked += 1 }
            if state.users[user].phase == .replaying { state.users[user].phase = .live }
            // What the last connection left unanswered, in order, before anything new (this runs on the socket's
            // loop: frames other threads write now queue behind these).
            var frames: [String] = []
            for ref in state.users[user].pending {
                guard var pending = state.pending[ref] else { continue }
                pending.resent = true
                state.pending[ref] = pending
                frames.append(pending.frame)
            }
            state.counts.resent += frames.count
            return frames
        }
        for frame in resend { socket.send(text: frame) }
    }

    private func resync(_ socket: BenchSocket, _ frame: ByteBuffer) {
        guard let resync = Self.decode(ResyncEnvelope.self, frame),
            let conversation = conversationIndex[resync.conversationId]
        else { return }
        state.withLockedValue { state in
            let user = socket.index
            guard state.users[user].socket === socket else { return }
            state.counts.resyncs += 1
            note(&state, "resync \(resync.reason) for user \(user) in \(resync.conversationId) at \(resync.lastSeq)")
            state.users[user].positions[conversation] = resync.lastSeq
        }
    }

    private func closed(_ socket: BenchSocket, code: UInt16?) {
        let user = socket.index
        let delay = state.withLockedValue { state -> Double? in
            guard state.users[user].socket === socket else { return nil }
            state.users[user].socket = nil
            state.users[user].caughtUp = nil
            let previous = state.users[user].phase
            switch previous {
            case .stopped: return nil
            case .closing: state.counts.churned += 1
            case .cutting: break
            case .away, .connecting, .replaying, .live, .slow:
                state.counts.unexpectedCloses[code.map(String.init) ?? "none", default: 0] += 1
            }
            guard !state.stopped else { return nil }
            state.users[user].phase = .away
            return previous == .closing || previous == .cutting
                ? Double.random(in: setup.away) : Double.random(in: 0.5...1.5)
        }
        if let delay { reconnect(user, after: delay) }
    }

    /// Ends a slow consumer's episode: its socket, if still open, is reset, and the user reconnects with `resume`.
    func endSlow(_ user: Int, _ socket: BenchSocket) {
        let current = state.withLockedValue { state -> Bool in
            guard state.users[user].socket === socket, state.users[user].phase == .slow else { return false }
            state.users[user].phase = .cutting
            return true
        }
        if current { socket.close(abort: true) }
    }

    private func note(_ state: inout State, _ text: String) {
        if state.notes.count < 40 { state.notes.append(text) }
    }

    // MARK: Results

    var counts: SoakCounts { state.withLockedValue { $0.counts } }

    /// The ack and delivery latency since the last call (for the samples), then cleared.
    func takeIntervalLatency() -> (ack: LatencySummary, delivery: LatencySummary) {
        let ack = intervalAck.summary
        let delivery = intervalDelivery.summary
        intervalAck.reset()
        intervalDelivery.reset()
        return (ack, delivery)
    }

    /// What the verification needs, once the load has stopped and the clients settled.
    struct Outcome: Sendable {
        var acked: [SoakAckedSend]
        /// The latest acked edit number of each edited message.
        var lastEdit: [String: Int]
        /// Who added each reaction key of each message.
        var reactions: [String: [String: Int]]
        /// Each user's position in each of its conversations.
        var positions: [[Int: Int64]]
        var unanswered: Int
        var counts: SoakCounts
        var notes: [String]
    }

    func outcome() -> Outcome {
        state.withLockedValue { state in
            Outcome(
                acked: state.acked, lastEdit: state.lastEdit,
                reactions: state.reactions.mapValues { $0.mapValues(\.count) },
                positions: state.users.map(\.positions), unanswered: state.pending.count, counts: state.counts,
                notes: state.notes)
        }
    }
}

// The parts of server frames the soak reads (the rest of each frame is skipped by the decoder).

private struct EventEnvelope: Decodable {
    struct Head: Decodable {
        var name: String
        var conversationId: String?
        var seq: Int64?
    }
    var event: Head
}

private struct AckEnvelope: Decodable {
    struct Stored: Decodable {
        var id: String
        var conversationId: String
        var seq: Int64
        var clientMessageId: String?
    }
    var ref: String
    var message: Stored?
    var duplicate: Bool?
}

private struct ErrorEnvelope: Decodable {
    var ref: String?
    var code: String
    var message: String?
}

private struct CaughtUpEnvelope: Decodable {
    var userSeq: Int64
    var conversations: [String: Int64]
}

private struct ResyncEnvelope: Decodable {
    var conversationId: String
    var reason: String
    var lastSeq: Int64
}
