import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Opens many ``BenchSocket``s, a bounded number at a time, spread over several source addresses.
struct Fleet: Sendable {
    let target: SocketAddress
    let hostHeader: String
    let sources: [SocketAddress]
    let group: any EventLoopGroup
    let concurrency: Int
    let connectTimeout: TimeAmount

    init(server: ServerUnderTest, options: ClientOptions, group: any EventLoopGroup) throws {
        target = try SocketAddress(ipAddress: server.host, port: server.port)
        hostHeader = "\(server.host):\(server.port)"
        sources = try options.sources.map { try SocketAddress(ipAddress: $0, port: 0) }
        self.group = group
        concurrency = max(1, options.concurrency)
        connectTimeout = .seconds(Int64(options.connectTimeout))
    }

    /// What connecting a batch gave.
    struct Outcome: Sendable {
        /// By position in the batch; nil where the attempt failed.
        var sockets: [BenchSocket?]
        var latency: LatencyRecorder
        var failures: [String: Int]
        /// Attempts made again after a first failure.
        var retried = 0
        var started: UInt64
        var finished: UInt64

        var connected: Int { sockets.reduce(0) { $0 + ($1 == nil ? 0 : 1) } }
        var failed: Int { failures.values.reduce(0, +) }
        var seconds: Double { Double(finished &- started) / 1e9 }
    }

    /// Connects one socket per token (`indices[i]` is the socket's index given to callbacks). With `retries`,
    /// the attempts that failed are tried again (after the server has gone quiet) that many more times.
    func connect(
        tokens: [String], indices: [Int]? = nil, retries: Int = 0, callbacks: SocketCallbacks,
        beforeRetry: @Sendable () async -> Void = {}
    ) async -> Outcome {
        var outcome = await connectOnce(
            tokens: tokens, positions: Array(tokens.indices), indices: indices, callbacks: callbacks
        )
        var left = retries
        while left > 0, outcome.failed > 0 {
            left -= 1
            await beforeRetry()
            let failed = outcome.sockets.indices.filter { outcome.sockets[$0] == nil }
            let again = await connectOnce(tokens: tokens, positions: failed, indices: indices, callbacks: callbacks)
            for position in failed { outcome.sockets[position] = again.sockets[position] }
            outcome.failures = again.failures
            outcome.retried += failed.count
            outcome.latency.add(again.latency.snapshot)
            outcome.finished = again.finished
        }
        return outcome
    }

    private func connectOnce(tokens: [String], positions: [Int], indices: [Int]?, callbacks: SocketCallbacks) async
        -> Outcome
    {
        let count = positions.count
        let latency = LatencyRecorder()
        let next = NIOLockedValueBox(0)
        let started = Monotonic.nanoseconds()
        let results = await withTaskGroup(of: [(Int, Result<BenchSocket, any Error>)].self) { tasks in
            for _ in 0..<min(concurrency, max(count, 1)) {
                tasks.addTask {
                    var done: [(Int, Result<BenchSocket, any Error>)] = []
                    while true {
                        let slot = next.withLockedValue { value -> Int in
                            defer { value += 1 }
                            return value
                        }
                        guard slot < count else { break }
                        let position = positions[slot]
                        let index = indices?[position] ?? position
                        let begin = Monotonic.nanoseconds()
                        do {
                            let socket = try await attempt(index: index, token: tokens[position], callbacks: callbacks)
                            latency.record(from: begin, to: socket.connectedAt)
                            done.append((position, .success(socket)))
                        } catch {
                            done.append((position, .failure(error)))
                        }
                    }
                    return done
                }
            }
            var all: [(Int, Result<BenchSocket, any Error>)] = []
            for await part in tasks { all += part }
            return all
        }
        var sockets = [BenchSocket?](repeating: nil, count: tokens.count)
        var failures: [String: Int] = [:]
        for (position, result) in results {
            switch result {
            case .success(let socket): sockets[position] = socket
            case .failure(let error): failures[Self.describe(error), default: 0] += 1
            }
        }
        return Outcome(
            sockets: sockets, latency: latency, failures: failures, started: started, finished: Monotonic.nanoseconds()
        )
    }

    /// One connection attempt, from the source address its index picks.
    func attempt(index: Int, token: String, callbacks: SocketCallbacks) async throws -> BenchSocket {
        try await BenchSocket.connect(
            index: index, target: target, source: sources.isEmpty ? nil : sources[index % sources.count],
            hostHeader: hostHeader, token: token, group: group, timeout: connectTimeout, callbacks: callbacks
        ).get()
    }

    static func describe(_ error: any Error) -> String {
        let text = String(describing: error)
        return text.count > 120 ? String(text.prefix(120)) : text
    }
}

/// Waits until a counter stops moving (the server has finished pushing what a setup step caused).
func waitUntilQuiet(
    quietFor: Double = 0.5, deadlineSeconds: Double = 60, _ counter: @Sendable () -> Int
) async -> Bool {
    let deadline = Monotonic.nanoseconds() + UInt64(deadlineSeconds * 1e9)
    var last = counter()
    var stableSince = Monotonic.nanoseconds()
    while Monotonic.nanoseconds() < deadline {
        try? await Task.sleep(for: .milliseconds(50))
        let now = counter()
        if now != last {
            last = now
            stableSince = Monotonic.nanoseconds()
        } else if Monotonic.seconds(since: stableSince) >= quietFor {
            return true
        }
    }
    return false
}
