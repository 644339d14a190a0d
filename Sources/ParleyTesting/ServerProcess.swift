import Foundation
import NIOConcurrencyHelpers
import ParleyServer

#if canImport(Glibc)
    import Glibc
#endif

/// A `parley-server` process (the binary built next to the test bundle), for tests that need several nodes or a node
/// that dies for real (`SIGKILL`).
///
/// ```swift
/// let node = try await ServerProcess.start(label: "a", app: app, arguments: ["--database-url", url])
/// defer { node.kill() }
/// ```
public final class ServerProcess: ParleyEndpoint {
    public let label: String
    public let port: Int
    public let app: ProvisionedApp
    public var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    private let process: ChildProcess
    /// The pipe of the process's standard error, kept open for as long as the process runs (its log).
    private let logPipe: Pipe
    private let output: Output

    /// What the process wrote to stderr (its log), and the port it announced.
    final class Output: Sendable {
        private struct State {
            var log = ""
            var port: Int?
            var waiter: CheckedContinuation<Int?, Never>?
            var ended = false
        }

        private let state = NIOLockedValueBox(State())

        func append(_ data: Data) {
            let waiter = state.withLockedValue { state -> (CheckedContinuation<Int?, Never>, Int)? in
                state.log += String(decoding: data, as: UTF8.self)
                guard state.port == nil, let port = Self.announcedPort(in: state.log) else { return nil }
                state.port = port
                defer { state.waiter = nil }
                return state.waiter.map { ($0, port) }
            }
            waiter.map { $0.0.resume(returning: $0.1) }
        }

        func ended() {
            let waiter = state.withLockedValue { state -> CheckedContinuation<Int?, Never>? in
                state.ended = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
        }

        /// The port once announced; nil when the process ended first.
        func port() async -> Int? {
            await withCheckedContinuation { continuation in
                let ready = state.withLockedValue { state -> Int?? in
                    if let port = state.port { return .some(port) }
                    if state.ended { return .some(nil) }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }

        var log: String { state.withLockedValue { $0.log } }

        static func announcedPort(in log: String) -> Int? {
            guard let range = log.range(of: "listening on http://127.0.0.1:") else { return nil }
            return Int(log[range.upperBound...].prefix { $0.isNumber })
        }
    }

    private init(label: String, port: Int, app: ProvisionedApp, process: ChildProcess, logPipe: Pipe, output: Output) {
        self.logPipe = logPipe
        self.label = label
        self.port = port
        self.app = app
        self.process = process
        self.output = output
    }

    /// The `parley-server` binary next to the running test bundle.
    public static var executable: URL {
        let bundleDirectory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent()
        return bundleDirectory.appendingPathComponent("parley-server")
    }

    /// Whether the binary was built (`swift build --build-tests` builds it).
    public static var isAvailable: Bool { FileManager.default.isExecutableFile(atPath: executable.path) }

    /// Starts `parley-server serve --port 0` with `arguments` and waits until it listens.
    ///
    /// - Parameters:
    ///   - app: The app the test provisioned in the database (the server's keys are not read from its output).
    ///   - timeout: How long start-up may take (a loaded machine migrates slowly).
    ///   - fileDescriptorLimit: Runs the server with this `ulimit -n` (through `/bin/sh`).
    ///   - environment: Variables added to the server's environment (through `/usr/bin/env`).
    ///   - serveArguments: What comes before `arguments`; the default binds 127.0.0.1 on a free port.
    public static func start(
        label: String, app: ProvisionedApp, arguments: [String], timeout: Duration = .seconds(90),
        fileDescriptorLimit: Int? = nil, environment: [String: String] = [:],
        serveArguments: [String] = ["serve", "--hostname", "127.0.0.1", "--port", "0"]
    ) async throws -> ServerProcess {
        guard isAvailable else {
            throw ServerProcessError("\(executable.path) is missing: run `swift build --build-tests` first.")
        }
        var command = [executable.path] + serveArguments + arguments
        if !environment.isEmpty {
            command =
                ["/usr/bin/env"] + environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" } + command
        }
        let (executablePath, processArguments): (String, [String])
        if let fileDescriptorLimit {
            let script = "ulimit -n \(fileDescriptorLimit) && exec \"$0\" \"$@\""
            (executablePath, processArguments) = ("/bin/sh", ["-c", script] + command)
        } else {
            (executablePath, processArguments) = (command[0], Array(command.dropFirst()))
        }
        let pipe = Pipe()
        let output = Output()
        // A thread of its own reads the log with blocking reads until the child closes it. Not `readabilityHandler`:
        // setting up and tearing down its dispatch read sources while other threads do the same corrupts libdispatch's
        // epoll bookkeeping on Linux, and the test process crashed in `_dispatch_event_loop_drain`
        // (swiftlang/swift-corelibs-libdispatch#949).
        let readEnd = pipe.fileHandleForReading
        let reader = Thread {
            while true {
                let data = readEnd.availableData
                if data.isEmpty { break }
                output.append(data)
            }
            output.ended()
        }
        reader.name = "parley-test-log-\(label)"
        reader.start()
        let process = try ChildProcess(
            executable: executablePath, arguments: processArguments,
            standardError: pipe.fileHandleForWriting.fileDescriptor
        )
        // The child has its copy: the pipe ends (and the log with it) when the child exits.
        try pipe.fileHandleForWriting.close()
        let pid = process.pid
        let port = await withTaskGroup(of: Int?.self) { group in
            group.addTask { await output.port() }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            output.ended()
            return first
        }
        guard let port else {
            Glibc.kill(pid, SIGKILL)
            throw ServerProcessError("Node \(label) did not start within \(timeout):\n\(output.log.suffix(4_000))")
        }
        return ServerProcess(label: label, port: port, app: app, process: process, logPipe: pipe, output: output)
    }

    /// What the node logged so far.
    public var log: String { output.log }

    /// The process id.
    public var pid: Int32 { process.pid }

    /// Sends SIGTERM (a graceful shutdown) and waits up to `timeout` for the process to exit; returns how long it took,
    /// or nil if it was still running then (it is then killed).
    public func terminate(timeout: Duration) async -> Duration? {
        guard process.isRunning else { return .zero }
        let start = ContinuousClock.now
        process.signal(SIGTERM)
        while process.isRunning {
            guard ContinuousClock.now - start < timeout else {
                kill()
                return nil
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return ContinuousClock.now - start
    }

    /// The exit status, once the process has exited.
    public var exitStatus: Int32? { process.terminationStatus }

    /// Resident memory now, in bytes (VmRSS).
    public var residentBytes: Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kibibytes = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { return nil }
        return kibibytes * 1024
    }

    /// Open file descriptors now.
    public var openDescriptors: Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd"))?.count
    }

    /// User and system CPU time used so far.
    public var cpuTime: Duration? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return nil }
        // utime and stime, fields 14 and 15 of stat: the 12th and 13th after the command's closing parenthesis.
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
        let ticks = sysconf(Int32(_SC_CLK_TCK))
        return .milliseconds((user + system) * 1000 / ticks)
    }

    /// Kills the node at once (`SIGKILL`): no goodbye to the other nodes or to its clients.
    public func kill() {
        process.signal(SIGKILL)
    }

    /// Stops the node gracefully (`SIGTERM`), killing it if it has not exited within `timeout`.
    public func stop(timeout: Duration = .seconds(20)) async {
        guard process.isRunning else { return }
        process.signal(SIGTERM)
        let deadline = ContinuousClock.now + timeout
        while process.isRunning, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(50))
        }
        kill()
    }

    deinit {
        kill()
    }
}

public struct ServerProcessError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
