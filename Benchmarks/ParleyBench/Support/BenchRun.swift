import Dispatch
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// What every scenario shares: the event loops of the clients, the server under test, a watchdog that bounds the
/// run, and the report (one line on stdout, optionally JSON).
final class BenchRun: Sendable {
    let scenario: String
    let server: ServerUnderTest
    let group: MultiThreadedEventLoopGroup
    let options: ClientOptions
    let provisioner: Provisioner
    let fleet: Fleet
    /// A prefix that keeps this run's uids apart from earlier runs' on an attached server.
    let runID: String
    /// The machine's CPU ticks when the measured phase began (``startMeasuring()``), or when the run began.
    private let measuredFrom: NIOLockedValueBox<(total: UInt64, steal: UInt64)?>

    private init(scenario: String, server: ServerUnderTest, group: MultiThreadedEventLoopGroup, options: ClientOptions)
        throws
    {
        self.scenario = scenario
        self.server = server
        self.group = group
        self.options = options
        self.provisioner = Provisioner(server: server, group: group)
        self.fleet = try Fleet(server: server, options: options, group: group)
        self.runID = String(UInt32.random(in: 0...UInt32.max), radix: 36)
        self.measuredFrom = NIOLockedValueBox(ProcFS.machineCPUTicks())
    }

    /// Marks the start of the measured phase, for the share of CPU the hypervisor took from this machine meanwhile.
    func startMeasuring() {
        measuredFrom.withLockedValue { $0 = ProcFS.machineCPUTicks() }
    }

    /// The share of the machine's CPU time that went to other virtual machines since ``startMeasuring()``, in percent:
    /// on a shared host this is time the server and the bench were runnable and did not run, which shows up as
    /// latency (a few percent of steal, in bursts, doubled p99 in back-to-back runs of one binary).
    private func stealPercent() -> Double? {
        guard let from = measuredFrom.withLockedValue({ $0 }), let now = ProcFS.machineCPUTicks(),
            now.total > from.total
        else { return nil }
        return Double(now.steal - from.steal) * 100 / Double(now.total - from.total)
    }

    /// Starts (or attaches to) the server, `nodes` of them on one database, runs `body`, and always stops what the
    /// bench started.
    static func run(
        scenario: String, server serverOptions: ServerOptions, options: ClientOptions, nodes: Int = 1,
        _ body: (BenchRun) async throws -> Void
    ) async throws {
        Limits.raiseOpenFiles()
        Watchdog.start(seconds: options.timeout, scenario: scenario)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, options.threads))
        let server: ServerUnderTest
        do {
            server = try await ServerUnderTest.start(serverOptions, nodes: nodes)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        var failure: (any Error)?
        do {
            let run = try BenchRun(scenario: scenario, server: server, group: group, options: options)
            try await body(run)
        } catch {
            failure = error
        }
        await server.stop()
        try? await group.shutdownGracefully()
        if failure == nil { server.removeData() }
        if let failure {
            for log in server.logPaths { FileHandle.standardError.write(Data("server log: \(log)\n".utf8)) }
            throw failure
        }
    }

    /// Prints the scenario's line and writes its JSON report when asked.
    func report(line: String, parameters: some Encodable & Sendable, figures: some Encodable & Sendable) throws {
        let load = ProcFS.loadAverage()
        let steal = stealPercent()
        let suffix =
            (load.map { " load=\(Format.fixed($0, 1))" } ?? "") + (steal.map { " steal=\(Format.fixed($0, 1))%" } ?? "")
        FileHandle.standardOutput.write(Data("\(scenario): \(line)\(suffix)\n".utf8))
        guard let path = options.json else { return }
        let report = Report(
            scenario: scenario, parameters: parameters, figures: figures, machine: .current, loadAverage: load,
            stealPercent: steal, server: server.baseURL, finishedAt: Date().timeIntervalSince1970
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(report).write(to: URL(fileURLWithPath: path))
    }

    /// Prints progress on stderr (stdout keeps only the figures).
    func note(_ text: String) {
        FileHandle.standardError.write(Data("[\(scenario)] \(text)\n".utf8))
    }
}

struct Report<Parameters: Encodable, Figures: Encodable>: Encodable {
    var scenario: String
    var parameters: Parameters
    var figures: Figures
    var machine: Machine
    var loadAverage: Double?
    /// CPU time taken by the hypervisor during the measured phase, in percent of the machine's.
    var stealPercent: Double?
    var server: String
    var finishedAt: Double
}

/// The machine a figure was measured on.
struct Machine: Codable, Sendable {
    var cpu: String
    var cores: Int
    var memoryGiB: Double
    var kernel: String

    static var current: Machine {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .map { $0.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "" }
        let meminfo = (try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8)) ?? ""
        let kib =
            meminfo.split(separator: "\n").first { $0.hasPrefix("MemTotal:") }
            .flatMap { $0.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first }
            .flatMap { Double($0) } ?? 0
        var names = utsname()
        uname(&names)
        let release = withUnsafeBytes(of: &names.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        return Machine(
            cpu: model ?? "unknown", cores: System.coreCount, memoryGiB: (kib / 1024 / 1024 * 10).rounded() / 10,
            kernel: release
        )
    }
}

enum Limits {
    #if os(Linux)
        private static let openFilesResource = Int32(RLIMIT_NOFILE.rawValue)
    #else
        private static let openFilesResource = RLIMIT_NOFILE
    #endif

    /// Raises the soft limit of open files to the hard one (20,000 on the reference machine).
    static func raiseOpenFiles() {
        var limit = rlimit()
        guard getrlimit(openFilesResource, &limit) == 0 else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(openFilesResource, &limit)
    }
}

/// Bounds every run: past its time, or on SIGINT/SIGTERM, the bench kills the processes it started and exits.
enum Watchdog {
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []

    static func start(seconds: Int, scenario: String) {
        // A thread of its own: it fires even when the cooperative pool is stuck.
        let thread = Thread {
            Thread.sleep(forTimeInterval: TimeInterval(seconds))
            FileHandle.standardError.write(Data("[\(scenario)] timed out after \(seconds) s; stopping\n".utf8))
            ChildProcesses.shared.killAll()
            exit(3)
        }
        thread.start()
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler {
                ChildProcesses.shared.killAll()
                exit(130)
            }
            source.resume()
            sources.append(source)
        }
    }
}
