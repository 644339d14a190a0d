import Logging
import NIOCore
import NIOPosix

extension NATSConnection {
    /// Everything that happens to the driver, in one stream: socket events (tagged with the transport they belong
    /// to, so events of a dropped transport are ignored), timers and the shutdown request.
    enum DriverInput: Sendable {
        case transportConnected(UInt64, any Channel)
        case transportFailed(UInt64, String)
        case info(UInt64, NATSServerInfo)
        case pong(UInt64)
        case serverError(UInt64, String)
        case protocolError(UInt64, String)
        case transportClosed(UInt64)
        case drained(UInt64)
        case timer(Duration)
        case shutdown
    }

    /// What only the driver touches.
    struct Driver {
        var machine: NATSConnectionStateMachine
        var transportID: UInt64 = 0
        var channel: (any Channel)?
        var armedDeadline: Duration?
        var finished = false
        var error: NATSError?
    }

    /// Connects and keeps the connection until the calling task is cancelled; then flushes what is buffered (up to
    /// ``NATSConfiguration/drainTimeout``) and closes: inboxes and ``events`` are finished.
    ///
    /// Pings the server, reconnects with back-off to the servers in turn, re-subscribes every live subscription
    /// before it flushes the publishes buffered while disconnected.
    /// - Throws: Only fatal errors: ``NATSError`` `authorizationViolation` (every server refused the credentials),
    ///   `maxReconnectsExceeded`, `alreadyRunning`, `invalidURL` (no servers).
    public func run() async throws {
        let (inputs, continuation) = AsyncStream.makeStream(of: DriverInput.self)
        let started: Bool = self.state.withLockedValue { state in
            guard state.phase == .notStarted else { return false }
            state.phase = .running
            state.inputs = continuation
            return true
        }
        guard started else {
            throw NATSError(.alreadyRunning, "run() was called more than once")
        }
        // The driver runs in its own task so that cancelling run() becomes an input (shutdown) instead of
        // cutting the drain short; run() awaits it, so it never outlives run().
        let driver = Task {
            try await self.drive(inputs: inputs, continuation: continuation)
        }
        try await withTaskCancellationHandler {
            try await driver.value
        } onCancel: {
            continuation.yield(.shutdown)
        }
    }

    private func drive(
        inputs: AsyncStream<DriverInput>, continuation: AsyncStream<DriverInput>.Continuation
    ) async throws {
        var driver = Driver(machine: NATSConnectionStateMachine(configuration: self.configuration, jitter: .system()))
        await withDiscardingTaskGroup { group in
            let action = driver.machine.start(now: self.clock.now())
            await self.execute(action, driver: &driver)
            if !driver.finished {
                self.armTimer(driver: &driver, group: &group, continuation: continuation)
                for await input in inputs {
                    await self.handle(input, driver: &driver)
                    if driver.finished { break }
                    self.armTimer(driver: &driver, group: &group, continuation: continuation)
                }
            }
            group.cancelAll()
        }
        continuation.finish()
        if let error = driver.error {
            throw error
        }
    }

    private func armTimer(
        driver: inout Driver, group: inout DiscardingTaskGroup, continuation: AsyncStream<DriverInput>.Continuation
    ) {
        guard !driver.finished, let deadline = driver.machine.nextDeadline else { return }
        if let armed = driver.armedDeadline, armed <= deadline { return }
        driver.armedDeadline = deadline
        let clock = self.clock
        group.addTask {
            do {
                try await clock.sleepUntil(deadline)
            } catch {
                return
            }
            continuation.yield(.timer(deadline))
        }
    }

    private func handle(_ input: DriverInput, driver: inout Driver) async {
        let now = self.clock.now()
        let action: NATSConnectionStateMachine.Action
        switch input {
        case .transportConnected(let id, let channel):
            guard id == driver.transportID else {
                channel.close(promise: nil)
                return
            }
            driver.channel = channel
            action = driver.machine.transportConnected(now: now)
        case .transportFailed(let id, let reason):
            guard id == driver.transportID else { return }
            action = driver.machine.transportFailed(reason: reason, now: now)
        case .info(let id, let info):
            self.consumedCountedInput()
            guard id == driver.transportID else { return }
            self.state.withLockedValue { state in
                state.serverInfo = info
                state.maxPayload = info.maxPayload
                state.headersSupported = info.headers
            }
            action = driver.machine.infoReceived(info, now: now)
        case .pong(let id):
            self.consumedCountedInput()
            guard id == driver.transportID else { return }
            action = driver.machine.pongReceived(now: now)
        case .serverError(let id, let text):
            self.consumedCountedInput()
            guard id == driver.transportID else { return }
            self.logger.warning("server error", metadata: ["nats.error": "\(text)"])
            action = driver.machine.serverErrorReceived(text, now: now)
        case .protocolError(let id, let description):
            guard id == driver.transportID else { return }
            action = driver.machine.protocolError(description, now: now)
        case .transportClosed(let id):
            guard id == driver.transportID else { return }
            action = driver.machine.transportClosed(now: now)
        case .drained(let id):
            guard id == driver.transportID else { return }
            action = driver.machine.drainCompleted(now: now)
        case .timer(let deadline):
            if driver.armedDeadline == deadline {
                driver.armedDeadline = nil
            }
            action = driver.machine.timerFired(now: now)
        case .shutdown:
            self.logger.debug("shutdown requested")
            action = driver.machine.shutdownRequested(now: now)
        }
        await self.execute(action, driver: &driver)
    }

    private func consumedCountedInput() {
        self.state.withLockedValue { $0.pendingInputs -= 1 }
    }

    private func execute(_ action: NATSConnectionStateMachine.Action, driver: inout Driver) async {
        switch action {
        case .none:
            break
        case .openTransport(let server):
            self.openTransport(to: server, driver: &driver)
        case .sendConnect(let server):
            var buffer = ByteBuffer()
            NATSProtocolEncoder.writeConnect(
                .init(configuration: self.configuration, server: server), into: &buffer)
            NATSProtocolEncoder.writePing(into: &buffer)
            driver.channel?.writeAndFlush(buffer, promise: nil)
        case .established(let server, let isReconnect, let discovered):
            self.goLive(server: server, isReconnect: isReconnect, discovered: discovered, driver: &driver)
        case .sendPing:
            let channel: (any Channel)? = self.state.withLockedValue { state in
                guard state.channel != nil else { return nil }
                NATSProtocolEncoder.writePing(into: &state.outbound)
                state.pingWaiters.append(.keepAlive)
                return state.scheduleFlush()
            }
            if let channel {
                self.kickFlush(channel)
            }
        case .report(let events):
            for event in events {
                self.emit(event)
            }
        case .disconnect(let disconnect):
            self.dropTransport(driver: &driver)
            for event in disconnect.report {
                self.emit(event)
            }
            if disconnect.wasConnected {
                self.logger.warning("disconnected", metadata: ["nats.reason": "\(disconnect.reason)"])
                self.emit(.disconnected(reason: disconnect.reason))
            } else {
                self.logger.debug("connection attempt failed", metadata: ["nats.reason": "\(disconnect.reason)"])
            }
            switch disconnect.next {
            case .connect(let server):
                self.openTransport(to: server, driver: &driver)
            case .wait(let until):
                self.logger.debug("waiting before reconnecting", metadata: ["nats.wait": "\(until - self.clock.now())"])
            case .fail(let error):
                await self.finish(error: error, driver: &driver)
            }
        case .drain:
            let channel: (any Channel)? = self.state.withLockedValue { state in
                guard state.channel != nil else { return nil }
                NATSProtocolEncoder.writePing(into: &state.outbound)
                state.pingWaiters.append(.drain)
                state.flushScheduled = true
                return state.channel
            }
            if let channel {
                self.kickFlush(channel)
            } else {
                await self.execute(driver.machine.drainCompleted(now: self.clock.now()), driver: &driver)
            }
        case .finish(let error):
            await self.finish(error: error, driver: &driver)
        }
    }

    private func openTransport(to server: NATSServerAddress, driver: inout Driver) {
        driver.transportID += 1
        let id = driver.transportID
        self.logger.debug("connecting", metadata: ["nats.server": "\(server)"])
        let bootstrap = ClientBootstrap(group: self.eventLoopGroup)
            .connectTimeout(TimeAmount(self.configuration.connectTimeout))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(NATSProtocolDecoder()))
                    try channel.pipeline.syncOperations.addHandler(
                        NATSChannelHandler(connection: self, transportID: id))
                }
            }
        bootstrap.connect(host: server.host, port: server.port).whenFailure { error in
            self.yieldInput(.transportFailed(id, "\(error)"), counted: false)
        }
    }

    private func goLive(
        server: NATSServerAddress, isReconnect: Bool, discovered: [NATSServerAddress], driver: inout Driver
    ) {
        guard let channel = driver.channel else { return }
        let waiters: [NATSOneShot<Void>] = self.state.withLockedValue { state in
            var buffer = ByteBuffer()
            for entry in state.subscriptions.values.sorted(by: { $0.subscription.sid < $1.subscription.sid }) {
                NATSProtocolEncoder.writeSubscribe(entry.subscription, into: &buffer)
            }
            buffer.writeBuffer(&state.outbound)
            state.outbound = buffer
            state.channel = channel
            state.writable = channel.isWritable
            state.pingWaiters.removeAll()
            state.flushScheduled = true
            if isReconnect {
                state.statistics.reconnects += 1
            }
            let waiters = Array(state.connectedWaiters.values)
            state.connectedWaiters.removeAll()
            return waiters
        }
        self.kickFlush(channel)
        self.logger.info(
            isReconnect ? "reconnected" : "connected",
            metadata: ["nats.server": "\(server)", "nats.server_id": "\(self.serverInfo?.serverID ?? "")"])
        self.emit(isReconnect ? .reconnected(server) : .connected(server))
        if !discovered.isEmpty {
            self.emit(.serversDiscovered(discovered))
        }
        for waiter in waiters {
            waiter.complete(.success(()))
        }
    }

    /// Forgets the current transport: closes it, keeps only the publishes of the outbound buffer (SUB, UNSUB and
    /// PING belonged to it), fails the flushes waiting for its PONGs.
    private func dropTransport(driver: inout Driver) {
        let channel = driver.channel
        driver.channel = nil
        driver.transportID += 1
        let waiters: CircularBuffer<PingWaiter> = self.state.withLockedValue { state in
            guard state.channel != nil else { return [] }
            state.channel = nil
            state.flushScheduled = false
            state.writable = true
            state.outbound = NATSProtocolEncoder.publishesOnly(state.outbound)
            defer { state.pingWaiters.removeAll() }
            return state.pingWaiters
        }
        for waiter in waiters {
            if case .flush(let oneShot) = waiter {
                oneShot.complete(.failure(NATSError(.notConnected, "connection lost before the server answered")))
            }
        }
        channel?.close(promise: nil)
    }

    private func finish(error: NATSError?, driver: inout Driver) async {
        let channel = driver.channel
        self.dropTransport(driver: &driver)
        driver.finished = true
        driver.error = error
        if let channel {
            try? await channel.closeFuture.get()
        }
        let (pingWaiters, requests, connectedWaiters, inboxes) = self.state.withLockedValue { state in
            state.phase = .finished
            state.inputs = nil
            state.outbound = ByteBuffer()
            let pingWaiters = state.pingWaiters
            state.pingWaiters.removeAll()
            let requests = Array(state.requests.values)
            state.requests.removeAll()
            let connectedWaiters = Array(state.connectedWaiters.values)
            state.connectedWaiters.removeAll()
            let inboxes = state.inboxes.compactMap(\.inbox)
            state.inboxes.removeAll()
            return (pingWaiters, requests, connectedWaiters, inboxes)
        }
        let closed = NATSError(
            .closed, error.map { "the connection is closed: \($0.message)" } ?? "the connection is closed")
        for waiter in pingWaiters {
            if case .flush(let oneShot) = waiter {
                oneShot.complete(.failure(closed))
            }
        }
        for request in requests {
            request.complete(.failure(closed))
        }
        for waiter in connectedWaiters {
            waiter.complete(.failure(closed))
        }
        for inbox in inboxes {
            inbox.finish()
        }
        if let error {
            self.logger.error("connection closed", metadata: ["nats.error": "\(error)"])
        } else {
            self.logger.info("connection closed")
        }
        self.emit(.closed)
        self.eventsContinuation.finish()
    }
}
