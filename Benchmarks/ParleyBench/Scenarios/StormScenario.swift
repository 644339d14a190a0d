import ArgumentParser
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// `storm`: every client dropped at once, then all reconnecting with jittered backoff.
struct StormScenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "storm",
        abstract: "N clients dropped at once: time until all are back, failed attempts, /health latency meanwhile."
    )

    enum Drop: String, ExpressibleByArgument, Codable, Sendable {
        /// The clients' connections are reset at once (a network drop): the server stays up.
        case network
        /// The server restarts (SIGTERM, closes every socket with 1001, starts again on the same port and data).
        case restart
    }

    @Option(name: [.short, .customLong("clients")], help: "Connected clients.")
    var clients: Int = 10_000

    @Option(help: "How the clients lose their connection: network (reset at once) or restart (the server restarts).")
    var drop: Drop = .network

    @Option(help: "First backoff ceiling (ms); each failed attempt doubles it (full jitter, like the SDK).")
    var initialBackoffMs: Int = 500

    @Option(help: "Largest backoff ceiling (ms).")
    var maximumBackoffMs: Int = 30_000

    @Option(help: "Attempts after which a client gives up.")
    var maxAttempts: Int = 10

    @Option(help: "Milliseconds between two /health probes.")
    var healthIntervalMs: Int = 10

    @Option(help: "Seconds to wait for every client to be back.")
    var deadline: Double = 60

    @OptionGroup var server: ServerOptions
    @OptionGroup var client: ClientOptions

    struct Parameters: Codable, Sendable {
        var clients: Int
        var drop: Drop
        var initialBackoffMs: Int
        var maximumBackoffMs: Int
        var maxAttempts: Int
    }

    struct Figures: Codable, Sendable {
        var connectedBefore: Int
        var back: Int
        var gaveUp: Int
        var failedAttempts: Int
        var attempts: Int
        var failures: [String: Int]
        var secondsUntilAllBack: Double?
        var timeToBack: LatencySummary
        var health: LatencySummary
        var healthBefore: LatencySummary
        var healthFailures: Int
        /// Server CPU (user + system) from the drop until everyone is back.
        var serverCPUSeconds: Double?
    }

    func run() async throws {
        try await BenchRun.run(scenario: "storm", server: server, options: client) { run in
            run.note("creating \(clients) users and tokens")
            let tokens = try await run.provisioner.users(prefix: "s\(run.runID)-", count: clients)
            let storm = Storm(
                fleet: run.fleet, tokens: tokens, initial: Double(initialBackoffMs) / 1000,
                maximum: Double(maximumBackoffMs) / 1000, maxAttempts: maxAttempts
            )
            let callbacks = storm.callbacks
            run.note("connecting \(clients) clients")
            let connected = await run.fleet.connect(tokens: tokens, callbacks: callbacks)
            guard connected.connected > 0 else { throw BenchError("no client connected: \(connected.failures)") }
            storm.adopt(connected.sockets)
            run.note("\(connected.connected) connected (\(connected.failed) failed)")

            let probe = HealthProbe(run: run, interval: .milliseconds(healthIntervalMs))
            let probing = Task { await probe.run() }
            try await Task.sleep(for: .seconds(2))
            let healthBefore = probe.take()

            run.note("dropping every connection (\(drop.rawValue))")
            run.startMeasuring()
            let cpuBefore = run.server.cpuSeconds()
            let dropped = Monotonic.nanoseconds()
            storm.begin(at: dropped)
            switch drop {
            case .network:
                for socket in connected.sockets { socket?.close(abort: true) }
            case .restart:
                try await run.server.restart()
            }
            let limit = dropped + UInt64(deadline * 1e9)
            while !storm.settled(expected: connected.connected) && Monotonic.nanoseconds() < limit {
                try await Task.sleep(for: .milliseconds(20))
            }
            let health = probe.take()
            // After a restart the server is a new process: all its CPU was spent during the storm.
            let cpu =
                drop == .restart
                ? run.server.cpuSeconds() : cpuBefore.flatMap { b in run.server.cpuSeconds().map { $0 - b } }
            probing.cancel()
            await probe.stop()
            await probing.value
            let outcome = storm.end()

            let allBack =
                outcome.back == connected.connected ? outcome.lastBack.map { Double($0 &- dropped) / 1e9 } : nil
            let figures = Figures(
                connectedBefore: connected.connected, back: outcome.back, gaveUp: outcome.gaveUp,
                failedAttempts: outcome.failedAttempts, attempts: outcome.attempts, failures: outcome.failures,
                secondsUntilAllBack: allBack, timeToBack: outcome.timeToBack, health: health.latency,
                healthBefore: healthBefore.latency, healthFailures: health.failures, serverCPUSeconds: cpu
            )
            try run.report(
                line:
                    "clients=\(connected.connected) drop=\(drop.rawValue) back=\(outcome.back) gave_up=\(outcome.gaveUp) "
                    + "failed_attempts=\(outcome.failedAttempts) all_back=\(allBack.map { Format.fixed($0, 2) + "s" } ?? "never") "
                    + "back_" + outcome.timeToBack.line([("p50", \.p50), ("p99", \.p99)])
                    + " health_" + health.latency.line([("p50", \.p50), ("p99", \.p99), ("max", \.max)])
                    + " health_failures=\(health.failures)"
                    + (cpu.map { " server_cpu=\(Format.fixed($0, 1))s" } ?? ""),
                parameters: Parameters(
                    clients: clients, drop: drop, initialBackoffMs: initialBackoffMs,
                    maximumBackoffMs: maximumBackoffMs,
                    maxAttempts: maxAttempts
                ),
                figures: figures
            )
            storm.closeAll()
        }
    }
}

/// The clients of a storm: each reconnects on its own after losing its connection, with full-jitter backoff.
final class Storm: Sendable {
    struct Outcome: Sendable {
        var back = 0
        var gaveUp = 0
        var attempts = 0
        var failedAttempts = 0
        var failures: [String: Int] = [:]
        var lastBack: UInt64?
        var timeToBack = LatencySummary(LatencyRecorder.empty())
    }

    private struct State {
        var sockets: [BenchSocket?]
        var storming = false
        var droppedAt: UInt64 = 0
        var outcome = Outcome()
        var timeToBack = LatencyRecorder.empty()
        /// Failed attempts per client since it lost its connection.
        var failedSoFar: [Int]
    }

    private let fleet: Fleet
    private let tokens: [String]
    private let initial: Double
    private let maximum: Double
    private let maxAttempts: Int
    private let state: NIOLockedValueBox<State>

    init(fleet: Fleet, tokens: [String], initial: Double, maximum: Double, maxAttempts: Int) {
        self.fleet = fleet
        self.tokens = tokens
        self.initial = initial
        self.maximum = maximum
        self.maxAttempts = maxAttempts
        state = NIOLockedValueBox(
            State(
                sockets: Array(repeating: nil, count: tokens.count),
                failedSoFar: Array(repeating: 0, count: tokens.count))
        )
    }

    var callbacks: SocketCallbacks {
        SocketCallbacks(closed: { [weak self] socket, _ in self?.lost(socket.index) })
    }

    func adopt(_ sockets: [BenchSocket?]) {
        state.withLockedValue { $0.sockets = sockets }
    }

    func begin(at time: UInt64) {
        state.withLockedValue {
            $0.storming = true
            $0.droppedAt = time
        }
    }

    func settled(expected: Int) -> Bool {
        state.withLockedValue { $0.outcome.back + $0.outcome.gaveUp >= expected }
    }

    func end() -> Outcome {
        state.withLockedValue { state in
            state.storming = false
            var outcome = state.outcome
            outcome.timeToBack = LatencySummary(state.timeToBack)
            return outcome
        }
    }

    func closeAll() {
        for socket in state.withLockedValue({ $0.sockets }) { socket?.close(abort: true) }
    }

    private func lost(_ index: Int) {
        let storming = state.withLockedValue { state -> Bool in
            state.sockets[index] = nil
            return state.storming
        }
        guard storming else { return }
        schedule(index, attempt: 1)
    }

    /// Full jitter: uniform in 0...min(maximum, initial * 2^(attempt-1)), as the SDK does.
    private func schedule(_ index: Int, attempt: Int) {
        let ceiling = min(maximum, initial * Double(1 << min(attempt - 1, 20)))
        let delay = TimeAmount.nanoseconds(Int64(Double.random(in: 0...ceiling) * 1e9))
        let eventLoop = fleet.group.next()
        eventLoop.scheduleTask(in: delay) { self.attempt(index, attempt: attempt) }
    }

    private func attempt(_ index: Int, attempt: Int) {
        let storming = state.withLockedValue { state -> Bool in
            if state.storming { state.outcome.attempts += 1 }
            return state.storming
        }
        guard storming else { return }
        BenchSocket.connect(
            index: index, target: fleet.target,
            source: fleet.sources.isEmpty ? nil : fleet.sources[index % fleet.sources.count],
            hostHeader: fleet.hostHeader, token: tokens[index], group: fleet.group, timeout: fleet.connectTimeout,
            callbacks: callbacks
        ).whenComplete { result in
            switch result {
            case .success(let socket):
                let now = Monotonic.nanoseconds()
                self.state.withLockedValue { state in
                    state.sockets[index] = socket
                    guard state.storming else { return }
                    state.outcome.back += 1
                    state.outcome.lastBack = max(state.outcome.lastBack ?? 0, now)
                    _ = state.timeToBack.record(min((now &- state.droppedAt) / 1000, 600_000_000))
                    state.failedSoFar[index] = 0
                }
            case .failure(let error):
                let retry = self.state.withLockedValue { state -> Bool in
                    guard state.storming else { return false }
                    state.outcome.failedAttempts += 1
                    state.outcome.failures[Fleet.describe(error), default: 0] += 1
                    state.failedSoFar[index] += 1
                    if state.failedSoFar[index] >= self.maxAttempts {
                        state.outcome.gaveUp += 1
                        return false
                    }
                    return true
                }
                if retry { self.schedule(index, attempt: attempt + 1) }
            }
        }
    }
}

/// `GET /health` every few milliseconds on a keep-alive connection: how responsive the server stays.
///
/// The probe has an event loop of its own and times each request on it (from the write to the end of the answer), so
/// that the bench's own load (thousands of clients reconnecting on its other loops) does not show up as server latency.
final class HealthProbe: Sendable {
    struct Window: Sendable {
        var latency: LatencySummary
        var failures: Int
    }

    private let bench: BenchRun
    private let interval: Duration
    private let recorder = LatencyRecorder()
    private let failures = Counter()
    private let taken = NIOLockedValueBox(0)
    private let connection = NIOLockedValueBox<HTTPConnection?>(nil)

    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)

    init(run: BenchRun, interval: Duration) {
        self.bench = run
        self.interval = interval
    }

    func run() async {
        while !Task.isCancelled {
            do {
                let http: HTTPConnection
                if let open = connection.withLockedValue({ $0 }) {
                    http = open
                } else {
                    http = try await HTTPConnection.connect(
                        to: bench.provisioner.target, host: bench.provisioner.hostHeader, group: group
                    )
                    connection.withLockedValue { $0 = http }
                }
                let timeout = http.channel.eventLoop.scheduleTask(in: .seconds(5)) { http.channel.close(promise: nil) }
                let answer = try await http.request(.GET, "/health")
                timeout.cancel()
                if answer.status == 200 {
                    recorder.record(micros: answer.wireNanoseconds / 1_000)
                } else {
                    failures.add()
                }
            } catch {
                failures.add()
                if let broken = connection.withLockedValue({ state -> HTTPConnection? in
                    defer { state = nil }
                    return state
                }) {
                    await broken.close()
                }
            }
            try? await Task.sleep(for: interval)
        }
    }

    /// The latencies and failures since the last call.
    func take() -> Window {
        let summary = recorder.summary
        recorder.reset()
        let failed = failures.count
        let before = taken.withLockedValue { value -> Int in
            defer { value = failed }
            return value
        }
        return Window(latency: summary, failures: failed - before)
    }

    func stop() async {
        if let open = connection.withLockedValue({ $0 }) { await open.close() }
        try? await group.shutdownGracefully()
    }
}
