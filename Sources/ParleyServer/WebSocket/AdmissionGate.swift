import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Caps how much setup work the server has in progress at once: at most `limit` slots, taken by
///
/// - accepted connections until their first request is read (an HTTP request is being served, or a WebSocket upgrade
///   answered), they close, or they turn out to wait on their peer (an incomplete head with everything sent read,
///   ``admitted(_:)``; or nothing sent ``silentGrace`` after the accept, freed by the sweep while the gate is full);
/// - WebSockets: a connection keeps its accept slot until it is live (after `caughtUp`) if its `connect` frame
///   comes at once; one that gave its slot up because its client was slow to send `connect` asks for a slot again
///   with it (``requestHandshake(at:granted:)``), first come first served, its socket unread while it waits.
///
/// While every slot is taken the listening socket is not read, so new connections wait in the kernel's backlog, and a
/// freed slot goes to a waiting handshake before it lets a new connection in. A reconnection storm then puts at most
/// `limit` setups' worth of work on the event loops at a time, and requests on established connections (`/health`,
/// sends) do not wait behind thousands of them; a connection that waits on its peer costs nothing and holds nothing,
/// so silent or slow clients cannot hold the gate shut. A slot is held at most ``maxHold``: while the gate is full, a
/// sweep on the listening socket's loop frees slots held longer, and those of connections that sent nothing.
///
/// Slots are counted under one lock, from any thread: taking and freeing one costs no hop between event loops; only
/// resuming the listening socket (when it was withheld) and granting a waiting handshake do.
final class AdmissionGate: Sendable {
    let limit: Int
    let maxHold: Duration
    /// How long a connection may have sent nothing before the sweep frees its slot
    /// (``EdgeLimits/silentConnectionGrace``).
    let silentGrace: Duration

    /// A WebSocket handshake's place: waiting, then holding a slot, then released.
    struct Ticket: Hashable, Sendable {
        let id: UInt64
    }

    private struct Waiter {
        var ticket: Ticket
        var granted: @Sendable () -> Void
    }

    private struct State {
        /// Accepted connections that are not WebSockets (those are in the `SocketRegistry`) and not closed yet.
        var open: [ObjectIdentifier: any Channel] = [:]
        /// Accepted connections holding a slot, with the time (of the listening socket's loop) they took it.
        var accepting: [ObjectIdentifier: NIODeadline] = [:]
        /// Of those, connections that have sent nothing yet.
        var unheard: Set<ObjectIdentifier> = []
        /// Graceful shutdown has begun (``quiesceEveryConnection()``).
        var quiescing = false
        /// Handshakes holding a slot, with the time they took it.
        var handshakes: [Ticket: NIODeadline] = [:]
        /// Handshakes waiting, in order (a released waiter stays in the queue and is skipped).
        var queue = FIFO<Waiter>()
        var waiting: Set<Ticket> = []
        var nextTicket: UInt64 = 0
        /// When the last handshake asked (a granted waiter's hold counts from about then).
        var lastRequest = NIODeadline.uptimeNanoseconds(0)
        /// The listening socket asked for a read that was not passed on.
        var readWithheld = false
        /// Accepted connections not closed yet (WebSockets included): each holds a file descriptor.
        var connections = 0
        /// Most connections the process's file-descriptor limit leaves room for (nil: not known yet).
        var descriptorBudget: Int?
        /// Accepting stopped at the budget and has not resumed: the log says so once per episode.
        var atDescriptorBudget = false

        var inUse: Int { accepting.count + handshakes.count }
    }

    /// What freeing a slot leads to, done outside the lock.
    private enum Freed {
        case nothing
        case grant(@Sendable () -> Void)
        case resumeAccepting
    }

    private let state = NIOLockedValueBox(State())
    private let installed = InstalledAdmission()

    init(limit: Int, maxHold: Duration = .seconds(1), silentGrace: Duration = .milliseconds(10)) {
        self.limit = limit
        self.maxHold = maxHold
        self.silentGrace = silentGrace
    }

    /// Puts the gate in front of the listening socket (call once, when the server runs), with a log line when
    /// accepting fails (the file-descriptor limit).
    func install(on serverChannel: any Channel, logger: Logger) async throws {
        let handler = try await serverChannel.eventLoop.submit {
            let pipeline = serverChannel.pipeline.syncOperations
            let handler = AdmissionHandler(gate: self, logger: logger)
            // Just before NIO's accept handler: it sees every connection accepted and every read asked for.
            if let accept = try? pipeline.context(name: "AcceptHandler") {
                try pipeline.addHandler(handler, position: .before(accept.handler))
            } else {
                try pipeline.addHandler(handler)
            }
            // When accept fails anyway (the descriptors ran out before the budget said so): a pause, and the budget
            // learnt again from the limit now.
            try pipeline.addHandler(
                AcceptFailureLogger(logger: logger) { [weak self] in self?.descriptorsRanOut() }, position: .first
            )
            return NIOLoopBound(handler, eventLoop: serverChannel.eventLoop)
        }.get()
        installed.set(handler, eventLoop: serverChannel.eventLoop)
    }

    // MARK: Accepted connections

    /// A connection was accepted: it holds a slot.
    fileprivate func accepted(_ channel: any Channel, at now: NIODeadline) {
        let id = ObjectIdentifier(channel)
        state.withLockedValue { state in
            state.accepting[id] = now
            state.unheard.insert(id)
            state.open[id] = channel
            state.connections += 1
        }
    }

    /// The connection's first bytes were read. Any thread.
    func heard(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        state.withLockedValue { _ = $0.unheard.remove(id) }
    }

    /// The connection was upgraded to a WebSocket: the `SocketRegistry` knows it from now on. It keeps its slot until
    /// its handler gives it up (live, or its client is slow to send `connect`).
    func becameWebSocket(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        state.withLockedValue { state in
            state.open[id] = nil
        }
    }

    /// The connection closed: it no longer holds a slot, nor counts as open.
    fileprivate func closed(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        let freed = state.withLockedValue { state -> Freed in
            // A closed channel's identifier may be reused by a new one: only this channel's entry goes.
            if let open = state.open[id], open === channel { state.open[id] = nil }
            state.connections -= 1
            // Whether or not it held a slot, a descriptor is free: accepting may resume.
            state.accepting[id] = nil
            state.unheard.remove(id)
            return Self.freed(&state, limit: limit)
        }
        perform(freed)
    }

    /// The connection's first request is read, it waits on its peer, or it is gone: it no longer holds a slot.
    /// Idempotent; any thread.
    func admitted(_ channel: any Channel) {
        let freed = state.withLockedValue { state -> Freed in
            state.unheard.remove(ObjectIdentifier(channel))
            guard state.accepting.removeValue(forKey: ObjectIdentifier(channel)) != nil else { return .nothing }
            return Self.freed(&state, limit: limit)
        }
        perform(freed)
    }

    /// Whether the listening socket may accept now; if not, the read is withheld until a slot (or a descriptor) is
    /// free. The second value is true when accepting just stopped at the descriptor budget (to be logged).
    fileprivate func mayAccept() -> (Bool, reachedBudget: Bool) {
        state.withLockedValue { state in
            if let budget = state.descriptorBudget, state.connections >= budget {
                state.readWithheld = true
                defer { state.atDescriptorBudget = true }
                return (false, !state.atDescriptorBudget)
            }
            state.atDescriptorBudget = false
            guard state.inUse >= limit else { return (true, false) }
            state.readWithheld = true
            return (false, false)
        }
    }

    /// Sets how many connections the process's file-descriptor limit leaves room for.
    fileprivate func setDescriptorBudget(_ budget: Int) {
        state.withLockedValue { $0.descriptorBudget = budget }
    }

    /// Accepting failed for want of descriptors (the limit may have been lowered since the server started listening):
    /// every descriptor is taken, so the connections held now are as many as the limit allows; the budget becomes
    /// that, less the headroom kept for the server's own needs. (Nothing is counted in `/proc/self/fd`: listing it
    /// needs a descriptor, and there is none.)
    func descriptorsRanOut() {
        state.withLockedValue { state in
            state.descriptorBudget = max(1, state.connections - AdmissionHandler.descriptorHeadroom)
        }
    }

    // MARK: Handshakes

    /// Asks for a slot for a handshake. Returns the ticket and whether the slot is held now; if not, `granted` is
    /// called (on the thread that frees a slot) when it is.
    func requestHandshake(at now: NIODeadline, granted: @escaping @Sendable () -> Void) -> (Ticket, holding: Bool) {
        state.withLockedValue { state in
            state.nextTicket += 1
            state.lastRequest = now
            let ticket = Ticket(id: state.nextTicket)
            if state.inUse < limit, state.waiting.isEmpty {
                state.handshakes[ticket] = now
                return (ticket, true)
            }
            state.waiting.insert(ticket)
            state.queue.append(Waiter(ticket: ticket, granted: granted))
            return (ticket, false)
        }
    }

    /// Gives the handshake's slot back, or leaves the queue. Idempotent; any thread.
    func release(_ ticket: Ticket) {
        let freed = state.withLockedValue { state -> Freed in
            if state.waiting.remove(ticket) != nil { return .nothing }
            guard state.handshakes.removeValue(forKey: ticket) != nil else { return .nothing }
            return Self.freed(&state, limit: limit)
        }
        perform(freed)
    }

    // MARK: Freeing slots

    /// A slot was freed: it goes to the first waiting handshake, else lets the listening socket read again.
    private static func freed(_ state: inout State, limit: Int) -> Freed {
        while state.queue.count > 0, state.inUse < limit {
            let waiter = state.queue.removeFirst()
            guard state.waiting.remove(waiter.ticket) != nil else { continue }
            // Its hold is counted from when it waited: a sweep frees it a second after that at most.
            state.handshakes[waiter.ticket] = state.lastRequest
            return .grant(waiter.granted)
        }
        if let budget = state.descriptorBudget, state.connections >= budget { return .nothing }
        guard state.readWithheld, state.inUse < limit else { return .nothing }
        state.readWithheld = false
        return .resumeAccepting
    }

    private func perform(_ freed: Freed) {
        switch freed {
        case .nothing:
            return
        case .grant(let granted):
            granted()
        case .resumeAccepting:
            guard let (handler, loop) = installed.get() else { return }
            loop.execute { handler.value.resume() }
        }
    }

    /// Frees the slots held longer than ``maxHold``, and those of connections that have sent nothing since
    /// `silentBefore` (the sweep while the gate is full; nil when its timer fired late: a busy loop may not have read
    /// what arrived); true when one is free now.
    fileprivate func sweep(now: NIODeadline, silentBefore: NIODeadline?) -> Bool {
        let maxHold = self.maxHold.timeAmount
        var grants: [@Sendable () -> Void] = []
        let free = state.withLockedValue { state -> Bool in
            let unheard = state.unheard
            state.accepting = state.accepting.filter { id, since in
                if let silentBefore, since <= silentBefore, unheard.contains(id) { return false }
                return now - since < maxHold
            }
            state.handshakes = state.handshakes.filter { now - $0.value < maxHold }
            while case .grant(let granted) = Self.freed(&state, limit: limit) { grants.append(granted) }
            if let budget = state.descriptorBudget, state.connections >= budget { return false }
            guard state.inUse < limit else { return false }
            state.readWithheld = false
            return true
        }
        for granted in grants { granted() }
        return free
    }

    // MARK: Counts and shutdown

    /// Slots held by connections being accepted, and by handshakes; handshakes waiting.
    var counts: (accepting: Int, handshakes: Int, waiting: Int) {
        state.withLockedValue { ($0.accepting.count, $0.handshakes.count, $0.waiting.count) }
    }

    /// Closes, after `delay`, every connection that is not a WebSocket still open then (the end of a graceful
    /// shutdown: whatever a connection is doing, the server does not wait for it longer; the `SocketRegistry` closes
    /// the WebSockets).
    func closeEveryConnection(after delay: TimeAmount) {
        guard let (_, loop) = installed.get() else { return }
        loop.scheduleTask(in: delay) {
            for channel in self.state.withLockedValue({ Array($0.open.values) }) { channel.close(promise: nil) }
        }
    }

    /// Asks every connection that is not a WebSocket to finish (the start of a graceful shutdown, once the listening
    /// socket is closed): one between requests, or still sending its first, closes at once; one being served closes
    /// after its response (`ChannelShouldQuiesceEvent`, which the sniffer and Hummingbird's HTTP/1 handlers act on).
    /// A connection accepted but not set up yet has no handler to hear it: its setup asks ``isQuiescing``.
    func quiesceEveryConnection() {
        let channels = state.withLockedValue { state in
            state.quiescing = true
            return Array(state.open.values)
        }
        for channel in channels {
            channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        }
    }

    /// Whether graceful shutdown has begun: a connection set up from then on is asked to quiesce at once.
    var isQuiescing: Bool { state.withLockedValue { $0.quiescing } }

    /// Connections accepted, not closed yet, and not WebSockets.
    var openConnections: Int { state.withLockedValue { $0.open.count } }
}

/// Holds the installed handler (set once, from the server's start).
private final class InstalledAdmission: Sendable {
    private let box = NIOLockedValueBox<(NIOLoopBound<AdmissionHandler>, any EventLoop)?>(nil)

    func set(_ handler: NIOLoopBound<AdmissionHandler>, eventLoop: any EventLoop) {
        box.withLockedValue { $0 = (handler, eventLoop) }
    }

    func get() -> (NIOLoopBound<AdmissionHandler>, any EventLoop)? {
        box.withLockedValue { $0 }
    }
}

/// On the listening socket: gives each accepted connection a slot of the gate and withholds `read` (accepting) while
/// every slot is taken.
final class AdmissionHandler: ChannelDuplexHandler {
    typealias InboundIn = any Channel
    typealias InboundOut = any Channel
    typealias OutboundIn = Never
    typealias OutboundOut = Never

    private let gate: AdmissionGate
    private var context: ChannelHandlerContext?
    private var sweeping = false
    /// How often the gate is swept while it is full.
    static let sweepInterval = TimeAmount.milliseconds(10)

    private let logger: Logger

    init(gate: AdmissionGate, logger: Logger) {
        self.gate = gate
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        gate.setDescriptorBudget(Self.descriptorBudget())
    }

    /// Descriptors the process keeps for everything but connections: the database and its readers, the event loops,
    /// PostgreSQL's and APNs' connections, log files, the accept reserve.
    static let descriptorHeadroom = 64

    /// How many connections the file-descriptor limit (`ulimit -n`) leaves room for: the limit, less the descriptors
    /// open now (when the server starts listening) and the headroom.
    static func descriptorBudget() -> Int {
        guard let limit = ProcessResources.maxFileDescriptors() else { return Int.max }
        let open = ProcessResources.openFileDescriptors() ?? 64
        return max(1, limit - open - descriptorHeadroom)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let child = unwrapInboundIn(data)
        gate.accepted(child, at: context.eventLoop.now)
        // A connection that closes frees its slot (if it still held one) and leaves the list of open ones.
        let gate = self.gate
        child.closeFuture.whenComplete { _ in gate.closed(child) }
        context.fireChannelRead(data)
    }

    func read(context: ChannelHandlerContext) {
        let (may, reachedBudget) = gate.mayAccept()
        if reachedBudget {
            logger.warning(
                "Not accepting new connections: the file-descriptor limit (ulimit -n) leaves room for no more; accepting again when connections close. Raise the limit or shed load."
            )
        }
        guard may else {
            startSweeping()
            return
        }
        Self.read(context)
    }

    /// A slot is free again: the withheld read goes through.
    func resume() {
        if let context { Self.read(context) }
    }

    /// Lets a read through; after a pause for want of descriptors (``AcceptFailureLogger`` turned `autoRead` off),
    /// turns `autoRead` on again instead, which reads and keeps reading.
    private static func read(_ context: ChannelHandlerContext) {
        if let options = context.channel.syncOptions, (try? options.getOption(.autoRead)) == false {
            try? options.setOption(.autoRead, value: true)
        } else {
            context.read()
        }
    }

    /// While the gate is full, every ``sweepInterval``: frees the slots held too long, and those of connections that
    /// have sent nothing ``AdmissionGate/silentGrace`` after their accept (a TCP health check, a port scan, a client connecting ahead
    /// of need: a thousand of them held the gate shut a second per 128, and a REST client waited 7 s behind them).
    /// Done here, by one timer while the gate is full, not by a timer per connection: that version (10 ms after each
    /// accept) raised storm's /health p99 from 28-79 ms to 67-220 ms.
    private func startSweeping() {
        guard !sweeping, let context else { return }
        sweeping = true
        let due = context.eventLoop.now + Self.sweepInterval
        context.eventLoop.assumeIsolated().scheduleTask(deadline: due) { [self] in
            sweeping = false
            guard let context = self.context else { return }
            let now = context.eventLoop.now
            // A late timer means a busy loop, whose connections may have bytes waiting unread: only slots held too
            // long are freed then.
            let grace = gate.silentGrace.timeAmount
            let onTime = now - due <= .nanoseconds(grace.nanoseconds / 2)
            if gate.sweep(now: now, silentBefore: onTime ? now - grace : nil) {
                resume()
            } else {
                startSweeping()
            }
        }
    }

}
