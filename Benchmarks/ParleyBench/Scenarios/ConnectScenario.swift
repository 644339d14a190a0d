import ArgumentParser
import Foundation
import Histogram
import NIOCore
import NIOPosix

/// `connect`: N authenticated connections; connections per second, connect latency, and the server's resident
/// memory per idle connection.
struct ConnectScenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connect",
        abstract:
            "N authenticated WebSocket connections: connections/s, connect latency, server memory per idle connection."
    )

    @Option(name: [.short, .customLong("connections")], help: "Connections to open.")
    var connections: Int = 1000

    @Option(
        help: "Most sockets one bench process holds (ulimit -n is 20,000 here); more are spread over worker processes.")
    var perProcess: Int = 19_000

    @Option(help: "Seconds to let the server settle before its memory is read.")
    var settle: Double = 2

    @OptionGroup var server: ServerOptions
    @OptionGroup var client: ClientOptions

    struct Parameters: Codable, Sendable {
        var connections: Int
        var processes: Int
        var concurrency: Int
        var sourceAddresses: [String]
    }

    struct Figures: Codable, Sendable {
        var connected: Int
        var failed: Int
        var failures: [String: Int]
        var seconds: Double
        var connectionsPerSecond: Double
        var latency: LatencySummary
        var serverRSSBeforeBytes: Int?
        var serverRSSAfterBytes: Int?
        var serverBytesPerConnection: Double?
        var setupSeconds: Double
        /// Server CPU (user + system) while connecting, per connection.
        var serverCPUMicrosPerConnection: Double?
    }

    func run() async throws {
        try await BenchRun.run(scenario: "connect", server: server, options: client) { run in
            let setupStart = Monotonic.nanoseconds()
            run.note("creating \(connections) users and tokens")
            let tokens = try await run.provisioner.users(prefix: "c\(run.runID)-", count: connections)
            let setupSeconds = Monotonic.seconds(since: setupStart)
            run.note("users ready in \(Format.fixed(setupSeconds, 1)) s; connecting")
            // Let the allocator settle after the REST burst, then take the baseline.
            try await Task.sleep(for: .seconds(1))
            let before = run.server.residentBytes()

            run.startMeasuring()
            let cpuBefore = run.server.cpuSeconds()
            let benchBefore = ProcFS.cpuSeconds(pid: getpid())
            let processes = max(1, (connections + perProcess - 1) / perProcess)
            let outcome: ConnectTotals
            var local: [BenchSocket?] = []
            var workers: [WorkerProcess] = []
            if processes == 1 {
                let connected = await run.fleet.connect(tokens: tokens, callbacks: SocketCallbacks())
                local = connected.sockets
                outcome = ConnectTotals(connected)
            } else {
                workers = try await WorkerProcess.launchConnect(
                    run: run, tokens: tokens, processes: processes, client: client
                )
                outcome = ConnectTotals.merge(try await workers.asyncMap { try await $0.readResult() })
            }
            let cpu = cpuBefore.flatMap { b in
                run.server.cpuSeconds().map { ($0 - b) * 1e6 / Double(max(outcome.connected, 1)) }
            }
            // The bench's own CPU per connection (this process; workers are not counted).
            let benchCPU =
                processes == 1
                ? benchBefore.flatMap { b in
                    ProcFS.cpuSeconds(pid: getpid()).map { ($0 - b) * 1e6 / Double(max(outcome.connected, 1)) }
                } : nil
            run.note("connected \(outcome.connected), failed \(outcome.failed); settling \(settle) s")
            try await Task.sleep(for: .seconds(settle))
            let after = run.server.residentBytes()
            let perConnection = before.flatMap { b in
                after.map { a in Double(a - b) / Double(max(outcome.connected, 1)) }
            }

            let latency = LatencySummary(outcome.histogram)
            let rate = Double(outcome.connected) / max(outcome.seconds, 1e-9)
            var line =
                "n=\(connections) connected=\(outcome.connected) failed=\(outcome.failed) rate=\(Format.rate(rate)) "
                + latency.line([("p50", \.p50), ("p99", \.p99), ("max", \.max)])
            if let perConnection, let before, let after {
                line +=
                    " server_rss=\(Format.bytes(Double(before)))->\(Format.bytes(Double(after))) per_conn=\(Format.bytes(perConnection))"
            }
            if let cpu { line += " server_cpu/conn=\(Format.fixed(cpu, 0))us" }
            if let benchCPU { line += " bench_cpu/conn=\(Format.fixed(benchCPU, 0))us" }
            if processes > 1 { line += " processes=\(processes)" }
            try run.report(
                line: line,
                parameters: Parameters(
                    connections: connections, processes: processes, concurrency: client.concurrency,
                    sourceAddresses: client.sources
                ),
                figures: Figures(
                    connected: outcome.connected, failed: outcome.failed, failures: outcome.failures,
                    seconds: outcome.seconds, connectionsPerSecond: rate, latency: latency,
                    serverRSSBeforeBytes: before,
                    serverRSSAfterBytes: after, serverBytesPerConnection: perConnection, setupSeconds: setupSeconds,
                    serverCPUMicrosPerConnection: cpu
                )
            )
            for socket in local { socket?.close(abort: true) }
            for worker in workers { await worker.finish() }
            WorkerProcess.removeTokensFile()
        }
    }
}

/// Connection figures of one process, or of several merged.
struct ConnectTotals: Codable, Sendable {
    var connected: Int
    var failures: [String: Int]
    var started: UInt64
    var finished: UInt64
    var histogram: Histogram<UInt64>

    var failed: Int { failures.values.reduce(0, +) }
    var seconds: Double { Double(finished &- started) / 1e9 }

    init(_ outcome: Fleet.Outcome) {
        connected = outcome.connected
        failures = outcome.failures
        started = outcome.started
        finished = outcome.finished
        histogram = outcome.latency.snapshot
    }

    /// Several processes that connected at the same time: the rate is over the whole span.
    static func merge(_ parts: [ConnectTotals]) -> ConnectTotals {
        var total = parts[0]
        for part in parts.dropFirst() {
            total.connected += part.connected
            total.failures.merge(part.failures, uniquingKeysWith: +)
            total.started = min(total.started, part.started)
            total.finished = max(total.finished, part.finished)
            total.histogram.add(part.histogram)
        }
        return total
    }
}

/// `connect-worker` (internal): a slice of the `connect` scenario's sockets in a process of its own, for runs
/// past one process's open-file limit. Reads its tokens from a file, prints its figures as one JSON line, then
/// holds its connections until its standard input closes.
struct ConnectWorker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "connect-worker", shouldDisplay: false)

    @Option var host: String
    @Option var port: Int
    @Option var tokensFile: String
    @Option var first: Int
    @Option var count: Int
    @OptionGroup var client: ClientOptions

    func run() async throws {
        Limits.raiseOpenFiles()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, client.threads))
        let lines = try String(contentsOfFile: tokensFile, encoding: .utf8).split(separator: "\n").map(String.init)
        let tokens = Array(lines[first..<min(lines.count, first + count)])
        let fleet = try Fleet(
            target: SocketAddress(ipAddress: host, port: port), hostHeader: "\(host):\(port)",
            sources: client.sources.map { try SocketAddress(ipAddress: $0, port: 0) }, group: group,
            concurrency: client.concurrency, connectTimeout: .seconds(Int64(client.connectTimeout))
        )
        let outcome = await fleet.connect(
            tokens: tokens, indices: Array(first..<(first + tokens.count)), callbacks: SocketCallbacks())
        let data = try JSONEncoder().encode(ConnectTotals(outcome))
        FileHandle.standardOutput.write(data + Data("\n".utf8))
        // Hold the connections until the coordinator is done measuring.
        _ = FileHandle.standardInput.readDataToEndOfFile()
        for socket in outcome.sockets { socket?.close(abort: true) }
        try await Task.sleep(for: .milliseconds(200))
        try await group.shutdownGracefully()
    }
}

extension Fleet {
    init(
        target: SocketAddress, hostHeader: String, sources: [SocketAddress], group: any EventLoopGroup,
        concurrency: Int, connectTimeout: TimeAmount
    ) {
        self.targets = [Target(address: target, hostHeader: hostHeader)]
        self.sources = sources
        self.group = group
        self.concurrency = concurrency
        self.connectTimeout = connectTimeout
    }
}

/// A `parley-bench` worker process.
final class WorkerProcess: Sendable {
    let process: Process
    let output: Pipe
    let input: Pipe

    init(process: Process, output: Pipe, input: Pipe) {
        self.process = process
        self.output = output
        self.input = input
    }

    static func launchConnect(run: BenchRun, tokens: [String], processes: Int, client: ClientOptions) async throws
        -> [WorkerProcess]
    {
        let file = tokensFile
        try tokens.joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let slice = (tokens.count + processes - 1) / processes
        let me = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        var workers: [WorkerProcess] = []
        for index in 0..<processes {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: me)
            process.arguments = [
                "connect-worker", "--host", run.server.host, "--port", String(run.server.port), "--tokens-file", file,
                "--first", String(index * slice), "--count", String(slice),
                "--source-addresses", client.sourceAddresses, "--threads", String(client.threads),
                "--concurrency", String(max(1, client.concurrency / processes)),
                "--connect-timeout", String(client.connectTimeout), "--timeout", String(client.timeout),
            ]
            let output = Pipe()
            let input = Pipe()
            process.standardOutput = output
            process.standardInput = input
            try process.run()
            ChildProcesses.shared.add(process.processIdentifier)
            workers.append(WorkerProcess(process: process, output: output, input: input))
        }
        return workers
    }

    private static var tokensFile: String {
        FileManager.default.temporaryDirectory.appendingPathComponent("parley-bench-tokens-\(getpid())").path
    }

    static func removeTokensFile() {
        try? FileManager.default.removeItem(atPath: tokensFile)
    }

    /// The worker's figures (its first line of output).
    func readResult() async throws -> ConnectTotals {
        let handle = output.fileHandleForReading
        let line: Data = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                var data = Data()
                while !data.contains(UInt8(ascii: "\n")) {
                    let chunk = handle.availableData
                    if chunk.isEmpty { break }
                    data += chunk
                }
                continuation.resume(returning: data)
            }
        }
        guard let end = line.firstIndex(of: UInt8(ascii: "\n")) else {
            throw BenchError("a connect worker exited without figures")
        }
        return try JSONDecoder().decode(ConnectTotals.self, from: line[..<end])
    }

    /// Tells the worker to close its connections and waits for it to exit.
    func finish() async {
        try? input.fileHandleForWriting.close()
        let deadline = Monotonic.nanoseconds() + 20_000_000_000
        while process.isRunning && Monotonic.nanoseconds() < deadline { try? await Task.sleep(for: .milliseconds(50)) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        ChildProcesses.shared.remove(process.processIdentifier)
    }
}

extension Array where Element: Sendable {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
