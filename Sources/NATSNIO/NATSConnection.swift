import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A NATS connection that keeps itself connected: it pings, reconnects with back-off to the servers in turn,
/// subscribes again after a reconnect, and buffers publishes (bounded) while disconnected.
///
/// Run it in a task (or a service group) and use it from anywhere:
/// ```swift
/// let connection = NATSConnection(configuration: configuration)
/// try await withThrowingDiscardingTaskGroup { group in
///     group.addTask { try await connection.run() }
///     try await connection.waitUntilConnected(timeout: .seconds(5))
///     let inbox = connection.makeInbox()
///     _ = try connection.subscribe(to: "room.>", into: inbox)
///     try connection.publish(ByteBuffer(string: "hello"), to: "room.1")
///     for await message in inbox { print(message.subject) }
/// }
/// ```
public final class NATSConnection: Sendable {
    /// The version sent in CONNECT.
    public static let clientVersion = "0.1.0"
    /// The most control operations (INFO, PONG, -ERR) waiting for the driver before the connection is treated as
    /// flooded and dropped.
    static let maxPendingInputs = 4096

    /// The configuration.
    public let configuration: NATSConfiguration
    let eventLoopGroup: any EventLoopGroup
    let clock: NATSClock
    let logger: Logger
    let state: NIOLockedValueBox<SharedState>
    let eventsContinuation: AsyncStream<NATSConnectionEvent>.Continuation

    /// What happens to the connection, in order: one stream for the connection's life, finished after `.closed`.
    ///
    /// Bounded: when nobody reads it, the oldest events are dropped (``NATSConfiguration/maxBufferedEvents``).
    /// It has one consumer.
    public let events: AsyncStream<NATSConnectionEvent>

    /// Creates a connection; nothing happens until ``run()``.
    /// - Parameters:
    ///   - configuration: Servers, timing and bounds.
    ///   - eventLoopGroup: The event loops for the sockets.
    ///   - clock: The clock for pings, timeouts and back-off.
    ///   - logger: The logger.
    public init(
        configuration: NATSConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        clock: any Clock<Duration> = ContinuousClock(),
        logger: Logger = Logger(label: "nats")
    ) {
        self.configuration = configuration
        self.eventLoopGroup = eventLoopGroup
        self.clock = NATSClock(clock)
        self.logger = logger
        self.state = NIOLockedValueBox(SharedState())
        (self.events, self.eventsContinuation) = AsyncStream.makeStream(
            of: NATSConnectionEvent.self, bufferingPolicy: .bufferingNewest(max(1, configuration.maxBufferedEvents)))
    }

    // MARK: - Status

    /// The last INFO of the current (or last) server.
    public var serverInfo: NATSServerInfo? {
        self.state.withLockedValue { $0.serverInfo }
    }

    /// Whether a connection is established now.
    public var isConnected: Bool {
        self.state.withLockedValue { $0.channel != nil }
    }

    /// Counters since the connection was created.
    public var statistics: NATSStatistics {
        self.state.withLockedValue { $0.statistics }
    }

    /// The bytes waiting in the outbound buffer (bounded by ``NATSConfiguration/maxPendingBytes`` for publishes).
    public var pendingBytes: Int {
        self.state.withLockedValue { $0.outbound.readableBytes }
    }

    /// Waits until a connection is established; returns at once when one is.
    /// - Parameter timeout: How long to wait.
    /// - Throws: ``NATSError`` `timeout`, or `closed` when `run()` has ended (or ends meanwhile).
    public func waitUntilConnected(timeout: Duration) async throws {
        let waiter = NATSOneShot<Void>()
        let registration: Result<UInt64?, NATSError> = self.state.withLockedValue { state in
            if state.channel != nil { return .success(nil) }
            if state.phase == .finished { return .failure(NATSError(.closed, "the connection is closed")) }
            let id = state.nextWaiterID
            state.nextWaiterID += 1
            state.connectedWaiters[id] = waiter
            return .success(id)
        }
        guard let id = try registration.get() else { return }
        defer { _ = self.state.withLockedValue { $0.connectedWaiters.removeValue(forKey: id) } }
        try await self.clock.value(
            of: waiter, timeout: timeout, orThrow: NATSError(.timeout, "not connected within \(timeout)"))
    }

    // MARK: - Publishing

    /// Publishes a message: validates, then appends PUB (HPUB with headers) to the outbound buffer.
    ///
    /// Synchronous and cheap: one write and flush per event-loop tick carries everything appended meanwhile.
    /// While disconnected (or while the socket is not writable) publishes accumulate up to
    /// ``NATSConfiguration/maxPendingBytes`` and go out after the subscriptions at the next connection.
    /// - Parameters:
    ///   - payload: The payload.
    ///   - subject: The subject: non-empty tokens, no whitespace, no wildcards.
    ///   - replyTo: A reply subject, if any.
    ///   - headers: Headers; sends HPUB when given.
    /// - Throws: ``NATSError`` `invalidSubject`, `invalidHeaders`, `payloadTooLarge` (over the server's
    ///   `max_payload`, 1 MiB before the first INFO), `outboundBufferFull`, `headersNotSupported`, `closed`.
    public func publish(
        _ payload: ByteBuffer, to subject: String, replyTo: String? = nil, headers: NATSHeaders? = nil
    ) throws(NATSError) {
        try NATSSubject.validatePublish(subject)
        if let replyTo {
            try NATSSubject.validatePublish(replyTo)
        }
        var headerLength = 0
        if let headers {
            try headers.validate()
            headerLength = headers.encodedLength
        }
        let size = payload.readableBytes + headerLength
        let maxPending = self.configuration.maxPendingBytes
        let outcome: PublishOutcome = self.state.withLockedValue { state in
            if state.phase == .finished {
                return .failed(NATSError(.closed, "the connection is closed"))
            }
            if headers != nil, !state.headersSupported {
                return .failed(NATSError(.headersNotSupported, "the server does not support headers"))
            }
            if size > state.maxPayload {
                return .failed(
                    NATSError(
                        .payloadTooLarge, "payload of \(size) bytes over the server's max_payload \(state.maxPayload)"))
            }
            let before = state.outbound.writerIndex
            NATSProtocolEncoder.writePublish(
                subject: subject, replyTo: replyTo, headers: headers, headerLength: headerLength, payload: payload,
                into: &state.outbound)
            if state.outbound.readableBytes > maxPending {
                state.outbound.moveWriterIndex(to: before)
                return .failed(
                    NATSError(.outboundBufferFull, "outbound buffer full (maxPendingBytes \(maxPending))"))
            }
            state.statistics.messagesOut += 1
            state.statistics.bytesOut += payload.readableBytes
            return .accepted(state.scheduleFlush())
        }
        switch outcome {
        case .failed(let error):
            throw error
        case .accepted(let channel):
            if let channel {
                self.kickFlush(channel)
            }
        }
    }

    /// Publishes bytes; see ``publish(_:to:replyTo:headers:)``.
    /// - Parameters:
    ///   - payload: The payload bytes.
    ///   - subject: The subject.
    ///   - replyTo: A reply subject, if any.
    ///   - headers: Headers, if any.
    /// - Throws: As ``publish(_:to:replyTo:headers:)``.
    public func publish(
        _ payload: some Collection<UInt8>, to subject: String, replyTo: String? = nil, headers: NATSHeaders? = nil
    ) throws(NATSError) {
        var buffer = ByteBuffer()
        buffer.writeBytes(payload)
        try self.publish(buffer, to: subject, replyTo: replyTo, headers: headers)
    }

    private enum PublishOutcome {
        case accepted((any Channel)?)
        case failed(NATSError)
    }

    // MARK: - Subscribing

    /// Makes a bounded queue that subscriptions deliver into; see ``NATSInbox``.
    /// - Parameters:
    ///   - maxMessages: The most messages queued; more are dropped (slow consumer).
    ///   - maxBytes: The most bytes queued; more are dropped (slow consumer).
    /// - Returns: The inbox; finished when `run()` ends.
    public func makeInbox(maxMessages: Int = 65_536, maxBytes: Int = 64 << 20) -> NATSInbox {
        let (id, finished) = self.state.withLockedValue { state in
            state.nextInboxID += 1
            return (state.nextInboxID, state.phase == .finished)
        }
        let inbox = NATSInbox(id: id, maxMessages: maxMessages, maxBytes: maxBytes) {
            [weak self] id, new, total, episode in
            self?.inboxDropped(inbox: id, newlyDropped: new, total: total, newEpisode: episode)
        }
        if finished {
            inbox.finish()
        } else {
            self.state.withLockedValue { state in
                if state.inboxes.count >= 2 * state.liveInboxesAtLastPrune + 16 {
                    state.inboxes.removeAll { $0.inbox == nil }
                    state.liveInboxesAtLastPrune = state.inboxes.count
                }
                state.inboxes.append(WeakInbox(inbox: inbox))
            }
        }
        return inbox
    }

    /// Subscribes: sends SUB now when connected, else at the next connection, and again after every reconnect.
    /// - Parameters:
    ///   - subject: The subject; `*` matches one token, `>` (last) the rest.
    ///   - queueGroup: A queue group: each message goes to one subscriber of the group.
    ///   - inbox: Where the messages go.
    /// - Returns: The handle for ``unsubscribe(_:)``.
    /// - Throws: ``NATSError`` `invalidSubject`, `closed`.
    public func subscribe(
        to subject: String, queueGroup: String? = nil, into inbox: NATSInbox
    ) throws(NATSError) -> NATSSubscription {
        try NATSSubject.validateSubscribe(subject)
        if let queueGroup {
            try NATSSubject.validateQueueGroup(queueGroup)
        }
        let result: Result<(NATSSubscription, (any Channel)?), NATSError> = self.state.withLockedValue { state in
            guard state.phase != .finished else {
                return .failure(NATSError(.closed, "the connection is closed"))
            }
            let subscription = NATSSubscription(sid: state.nextSID, subject: subject, queueGroup: queueGroup)
            state.nextSID += 1
            inbox.activate(sid: subscription.sid)
            state.subscriptions[subscription.sid] = SubscriptionEntry(subscription: subscription, target: .inbox(inbox))
            guard state.channel != nil else { return .success((subscription, nil)) }
            NATSProtocolEncoder.writeSubscribe(subscription, into: &state.outbound)
            return .success((subscription, state.scheduleFlush()))
        }
        let (subscription, channel) = try result.get()
        if let channel {
            self.kickFlush(channel)
        }
        return subscription
    }

    /// Ends a subscription: sends UNSUB when connected; no message of it reaches its inbox after this returns.
    /// - Parameter subscription: The handle from ``subscribe(to:queueGroup:into:)``.
    public func unsubscribe(_ subscription: NATSSubscription) {
        let channel: (any Channel)? = self.state.withLockedValue { state in
            guard let entry = state.subscriptions.removeValue(forKey: subscription.sid) else { return nil }
            if case .inbox(let inbox) = entry.target {
                inbox.deactivate(sid: subscription.sid)
            }
            guard state.channel != nil else { return nil }
            NATSProtocolEncoder.writeUnsubscribe(sid: subscription.sid, into: &state.outbound)
            return state.scheduleFlush()
        }
        if let channel {
            self.kickFlush(channel)
        }
    }

    // MARK: - Flush and request

    /// Sends PING after everything sent before and waits for its PONG: the server has processed it all.
    /// - Parameter timeout: How long to wait.
    /// - Throws: ``NATSError`` `notConnected` (also when the connection is lost meanwhile), `timeout`, `closed`.
    public func flush(timeout: Duration) async throws {
        let waiter = NATSOneShot<Void>()
        let registration: Result<(any Channel)?, NATSError> = self.state.withLockedValue { state in
            if state.phase == .finished { return .failure(NATSError(.closed, "the connection is closed")) }
            guard state.channel != nil else { return .failure(NATSError(.notConnected, "not connected")) }
            NATSProtocolEncoder.writePing(into: &state.outbound)
            state.pingWaiters.append(.flush(waiter))
            return .success(state.scheduleFlush())
        }
        if let channel = try registration.get() {
            self.kickFlush(channel)
        }
        try await self.clock.value(
            of: waiter, timeout: timeout, orThrow: NATSError(.timeout, "flush timed out after \(timeout)"))
    }

    /// Publishes a request with a private reply subject (`_INBOX.<random>.<n>`) and waits for the first reply.
    /// - Parameters:
    ///   - payload: The request payload.
    ///   - subject: The subject.
    ///   - headers: Headers, if any.
    ///   - timeout: How long to wait for the reply.
    /// - Returns: The reply.
    /// - Throws: As ``publish(_:to:replyTo:headers:)``, and ``NATSError`` `timeout`, or `noResponders` when the
    ///   server reports that nobody subscribes to the subject.
    public func request(
        _ payload: ByteBuffer, to subject: String, headers: NATSHeaders? = nil, timeout: Duration
    ) async throws -> NATSMessage {
        try NATSSubject.validatePublish(subject)
        let waiter = NATSOneShot<NATSMessage>()
        let registration: Result<(String, String, (any Channel)?), NATSError> = self.state.withLockedValue { state in
            if state.phase == .finished { return .failure(NATSError(.closed, "the connection is closed")) }
            var channel: (any Channel)?
            if state.responsePrefix == nil {
                let prefix = "_INBOX.\(Self.randomToken())."
                state.responsePrefix = prefix
                let subscription = NATSSubscription(sid: state.nextSID, subject: prefix + "*", queueGroup: nil)
                state.nextSID += 1
                state.subscriptions[subscription.sid] = SubscriptionEntry(
                    subscription: subscription, target: .responses)
                if state.channel != nil {
                    NATSProtocolEncoder.writeSubscribe(subscription, into: &state.outbound)
                    channel = state.scheduleFlush()
                }
            }
            state.nextRequestToken += 1
            let token = String(state.nextRequestToken)
            state.requests[token] = waiter
            return .success((token, state.responsePrefix! + token, channel))
        }
        let (token, replyTo, channel) = try registration.get()
        defer { _ = self.state.withLockedValue { $0.requests.removeValue(forKey: token) } }
        if let channel {
            self.kickFlush(channel)
        }
        try self.publish(payload, to: subject, replyTo: replyTo, headers: headers)
        let reply = try await self.clock.value(
            of: waiter, timeout: timeout, orThrow: NATSError(.timeout, "no reply on '\(subject)' within \(timeout)"))
        if reply.headers?.status == 503 {
            throw NATSError(.noResponders, "no responders for '\(subject)'")
        }
        return reply
    }

    // MARK: - Internals shared with the channel handler and the driver

    /// Runs the flush task on the channel's event loop (scheduled once per tick by ``SharedState/scheduleFlush()``).
    func kickFlush(_ channel: any Channel) {
        // Also on the event loop: run after the current work of the loop, so one write carries the whole tick.
        channel.eventLoop.execute { self.flushOutbound(channel) }
    }

    /// Writes and flushes everything buffered, when the channel is live and writable. On the event loop.
    func flushOutbound(_ channel: any Channel) {
        let buffer: ByteBuffer? = self.state.withLockedValue { state in
            guard let live = state.channel, live === channel else { return nil }
            state.flushScheduled = false
            guard state.writable, state.outbound.readableBytes > 0 else { return nil }
            let buffer = state.outbound
            state.outbound = ByteBuffer()
            state.outbound.reserveCapacity(min(buffer.readableBytes, 256 << 10))
            return buffer
        }
        if let buffer {
            channel.writeAndFlush(buffer, promise: nil)
        }
    }

    /// The channel's writability changed. On the event loop.
    func writabilityChanged(_ channel: any Channel, isWritable: Bool) {
        let flush: Bool = self.state.withLockedValue { state in
            guard let live = state.channel, live === channel else { return false }
            state.writable = isWritable
            guard isWritable, !state.flushScheduled, state.outbound.readableBytes > 0 else { return false }
            state.flushScheduled = true
            return true
        }
        if flush {
            self.flushOutbound(channel)
        }
    }

    /// Delivers the messages of one read to their inboxes (or waiting requests), in order.
    func deliver(_ messages: [NATSMessage]) {
        guard !messages.isEmpty else { return }
        var groups: [(NATSInbox, [NATSMessage])] = []
        var replies: [(NATSOneShot<NATSMessage>, NATSMessage)] = []
        self.state.withLockedValue { state in
            state.statistics.messagesIn += messages.count
            var lastInbox: ObjectIdentifier?
            for message in messages {
                state.statistics.bytesIn += message.payload.readableBytes
                switch state.subscriptions[message.sid]?.target {
                case .inbox(let inbox):
                    let id = ObjectIdentifier(inbox)
                    if lastInbox == id {
                        groups[groups.count - 1].1.append(message)
                    } else if let index = groups.firstIndex(where: { $0.0 === inbox }) {
                        groups[index].1.append(message)
                        lastInbox = nil
                    } else {
                        groups.append((inbox, [message]))
                        lastInbox = id
                    }
                case .responses:
                    if let prefix = state.responsePrefix, message.subject.hasPrefix(prefix) {
                        let token = String(message.subject.dropFirst(prefix.utf8.count))
                        if let waiter = state.requests.removeValue(forKey: token) {
                            replies.append((waiter, message))
                        }
                    }
                case nil:
                    break  // unsubscribed: late messages are dropped
                }
            }
        }
        for (inbox, batch) in groups {
            inbox.deliver(batch)
        }
        for (waiter, message) in replies {
            waiter.complete(.success(message))
        }
    }

    /// A PONG arrived on `channel`: answers the oldest PING when the connection is live, then tells the driver.
    func pongReceived(on channel: any Channel, transportID: UInt64) -> Bool {
        let waiter: PingWaiter? = self.state.withLockedValue { state in
            guard let live = state.channel, live === channel else { return nil }
            return state.pingWaiters.popFirst()
        }
        switch waiter {
        case .flush(let oneShot):
            oneShot.complete(.success(()))
        case .drain:
            _ = self.yieldInput(.drained(transportID), counted: false)
        case .keepAlive, nil:
            break
        }
        return self.yieldInput(.pong(transportID), counted: true)
    }

    /// Hands an input to the driver. Counted inputs (INFO, PONG, -ERR: what a server could flood) are bounded:
    /// returns `false` when too many are waiting, and the caller drops the connection.
    @discardableResult
    func yieldInput(_ input: DriverInput, counted: Bool) -> Bool {
        let (continuation, accepted): (AsyncStream<DriverInput>.Continuation?, Bool) = self.state.withLockedValue {
            state in
            guard let continuation = state.inputs else { return (nil, true) }
            if counted {
                guard state.pendingInputs < Self.maxPendingInputs else { return (nil, false) }
                state.pendingInputs += 1
            }
            return (continuation, true)
        }
        continuation?.yield(input)
        return accepted
    }

    func emit(_ event: NATSConnectionEvent) {
        self.eventsContinuation.yield(event)
    }

    private func inboxDropped(inbox: UInt64, newlyDropped: Int, total: Int, newEpisode: Bool) {
        self.state.withLockedValue { $0.statistics.droppedMessages += newlyDropped }
        if newEpisode {
            self.logger.warning(
                "slow consumer: inbox over its limits, dropping messages",
                metadata: ["nats.inbox": "\(inbox)", "nats.dropped": "\(total)"])
            self.emit(.slowConsumer(inbox: inbox, dropped: total))
        }
    }

    static func randomToken() -> String {
        let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)
        var generator = SystemRandomNumberGenerator()
        return String(
            decoding: (0..<22).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] },
            as: UTF8.self)
    }
}
