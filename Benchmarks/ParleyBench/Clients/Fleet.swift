import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Opens many ``BenchSocket``s, a bounded number at a time, spread over several source addresses (and, with several
/// nodes, over the nodes).
struct Fleet: Sendable {
    /// Where a socket connects: one per node.
    struct Target: Sendable {
        var address: SocketAddress
        var hostHeader: String
    }

    /// The server's nodes; a socket goes to the first unless ``connect(tokens:indices:retries:node:callbacks:beforeRetry:)``
    /// says otherwise.
    let targets: [Target]
    /// The first node's address and Host header (the only ones with one node).
    var target: SocketAddress { targets[0].address }
    var hostHeader: String { targets[0].hostHeader }
    let sources: [SocketAddress]
    let group: any EventLoopGroup
    let concurrency: Int
    let connectTimeout: TimeAmount

    init(server: ServerUnderTest, options: ClientOptions, group: any EventLoopGroup) throws {
        targets = try server.nodes.map {
            Target(address: try SocketAddress(ipAddress: $0.host, port: $0.port), hostHeader: "\($0.host):\($0.port)")
        }
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

    /// Connects one socket per token (`indices[i]` is the socket's index given to callbacks) to the node of
    /// ``targets`` that `node` gives for that index (the first by default). With `retries`, the attempts that failed
    /// are tried again (after the server has gone quiet) that many more times.
    func connect(
        tokens: [String], indices: [Int]? = nil, retries: Int = 0, node: @escaping @Sendable (Int) -> Int = { _ in 0 },
        callbacks: SocketCallbacks, beforeRetry: @Sendable () async -> Void = {}
    ) async -> Outcome {
        var outcome = await connectOnce(
            tokens: tokens, positions: Array(tokens.indices), indices: indices, node: node, callbacks: callbacks
        )
        var left = retries
        while left > 0, outcome.failed > 0 {
            left -= 1
            await beforeRetry()
            let failed = outcome.sockets.indices.filter { outcome.sockets[$0] == nil }
            let again = await connectOnce(
                tokens: tokens, positions: failed, indices: indices, node: node, callbacks: callbacks
            )
            for position in failed { outcome.sockets[position] = again.sockets[position] }
            outcome.failures = again.failures
            outcome.retried += failed.count
            outcome.latency.add(again.latency.snapshot)
            outcome.finished = again.finished
        }
        return outcome
    }

    /// Connects `positions`, at most ``concurrency`` attempts at a time. The attempts follow one another on the event
    /// loops: the callback that ends one starts the next, with no task in between (a task per attempt chain, woken for
    /// each result on a thread of the concurrency runtime, was a sixth of the tool's CPU in `connect`).
    private func connectOnce(
        tokens: [String], positions: [Int], indices: [Int]?, node: @escaping @Sendable (Int) -> Int,
        callbacks: SocketCallbacks
    ) async -> Outcome {
        let count = positions.count
        let latency = LatencyRecorder()
        let next = NIOLockedValueBox(0)
        let results = NIOLockedValueBox([(Int, Result<BenchSocket, any Error>)]())
        let started = Monotonic.nanoseconds()
        if count > 0 {
            await withCheckedContinuation { (finished: CheckedContinuation<Void, Never>) in
                let left = NIOLockedValueBox(count)
                @Sendable func startNext() {
                    let slot = next.withLockedValue { value -> Int in
                        defer { value += 1 }
                        return value
                    }
                    guard slot < count else { return }
                    let position = positions[slot]
                    let index = indices?[position] ?? position
                    let target = targets[node(index) % targets.count]
                    let begin = Monotonic.nanoseconds()
                    let attempt = BenchSocket.connect(
                        index: index, target: target.address,
                        source: sources.isEmpty ? nil : sources[index % sources.count], hostHeader: target.hostHeader,
                        token: tokens[position], group: group, timeout: connectTimeout, callbacks: callbacks
                    )
                    attempt.whenComplete { result in
                        if case .success(let socket) = result { latency.record(from: begin, to: socket.connectedAt) }
                        results.withLockedValue { $0.append((position, result)) }
                        let remaining = left.withLockedValue { value -> Int in
                            value -= 1
                            return value
                        }
                        if remaining == 0 {
                            finished.resume()
                        } else {
                            // Not from inside this callback: an attempt that fails at once would nest the next.
                            attempt.eventLoop.execute { startNext() }
                        }
                    }
                }
                for _ in 0..<min(concurrency, count) { startNext() }
            }
        }
        var sockets = [BenchSocket?](repeating: nil, count: tokens.count)
        var failures: [String: Int] = [:]
        for (position, result) in results.withLockedValue({ $0 }) {
            switch result {
            case .success(let socket): sockets[position] = socket
            case .failure(let error): failures[Self.describe(error), default: 0] += 1
            }
        }
        return Outcome(
            sockets: sockets, latency: latency, failures: failures, started: started, finished: Monotonic.nanoseconds()
        )
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
