import Foundation
import NIOConcurrencyHelpers

/// The parley-server a scenario drives: a child process the bench started (temporary data directory, free port,
/// an app created for the run), or one it attaches to with `--server-url` and `--server-pid`. With `nodes` above one,
/// the bench starts that many servers on one PostgreSQL database (one deployment of several nodes); ``host``,
/// ``port`` and ``pid`` are then the first node's, the one REST setup goes to, and ``nodes`` lists them all.
final class ServerUnderTest: Sendable {
    /// One server process of the deployment.
    struct Node: Sendable {
        var host: String
        var port: Int
        /// Nil when attached without `--server-pid`.
        var pid: Int32?
    }

    let host: String
    let port: Int
    let appId: String
    let restAPIKey: String
    /// The server's pid, for its resident memory and CPU (it changes when the bench restarts its server). Nil when
    /// attached without `--server-pid`.
    var pid: Int32? { children.first?.pid ?? attachedPID }
    private let attachedPID: Int32?
    /// The bench's own children, one per node; empty when attached.
    private let children: [ManagedServer]

    var baseURL: String { "http://\(host):\(port)" }

    /// Every node, the first one first (an attached server is one node).
    var nodes: [Node] {
        guard !children.isEmpty else { return [Node(host: host, port: port, pid: attachedPID)] }
        return children.map { Node(host: "127.0.0.1", port: $0.port, pid: $0.pid) }
    }

    private init(
        host: String, port: Int, appId: String, restAPIKey: String, pid: Int32?, children: [ManagedServer]
    ) {
        self.host = host
        self.port = port
        self.appId = appId
        self.restAPIKey = restAPIKey
        self.attachedPID = pid
        self.children = children
    }

    /// Starts the server (`nodes` of them on the one `--database-url`), or attaches to `--server-url`.
    static func start(_ options: ServerOptions, nodes: Int = 1) async throws -> ServerUnderTest {
        if let url = options.serverURL {
            guard nodes == 1 else {
                throw BenchError("--nodes starts its own nodes: it cannot be used with --server-url (one server).")
            }
            guard let parsed = URL(string: url), let host = parsed.host else {
                throw BenchError("--server-url must look like http://127.0.0.1:8080")
            }
            guard let appId = options.appId, let key = options.restAPIKey else {
                throw BenchError(
                    "Attaching to a server needs --app-id and --rest-api-key (or PARLEY_APP_ID, PARLEY_REST_API_KEY).")
            }
            return ServerUnderTest(
                host: host, port: parsed.port ?? 80, appId: appId, restAPIKey: key, pid: options.serverPID,
                children: []
            )
        }
        guard nodes >= 1 else { throw BenchError("--nodes must be at least 1.") }
        guard nodes == 1 || (options.databaseURL != nil && options.natsURL != nil) else {
            throw BenchError(
                "--nodes \(nodes) needs --database-url and --nats-url (or PARLEY_BENCH_DATABASE_URL and "
                    + "PARLEY_BENCH_NATS_URL): the nodes share one PostgreSQL database and meet on NATS (a SQLite "
                    + "server is a single node), e.g. scripts/with-postgres scripts/with-nats sh -c "
                    + "'.build/release/parley-bench rooms --database-url \"$PARLEY_TEST_DATABASE_URL\" "
                    + "--nats-url \"$PARLEY_TEST_NATS_URL\" --nodes 2'")
        }
        let first = try await ManagedServer.launch(options)
        var children = [first]
        do {
            // The app exists in the database once the first node is up: the others serve it as they are.
            for _ in 1..<nodes {
                children.append(try await ManagedServer.launch(options, app: (first.appId, first.restAPIKey)))
            }
        } catch {
            for child in children { await child.stop() }
            throw error
        }
        return ServerUnderTest(
            host: "127.0.0.1", port: first.port, appId: first.appId, restAPIKey: first.restAPIKey, pid: first.pid,
            children: children
        )
    }

    /// Resident memory of the server process, in bytes (VmRSS of /proc/<pid>/status).
    func residentBytes() -> Int? {
        guard let pid else { return nil }
        return ProcFS.residentBytes(pid: pid)
    }

    /// Stops the bench's own servers (SIGTERM, then SIGKILL after `grace`); nothing for an attached one.
    func stop() async {
        for child in children { await child.stop() }
    }

    /// Deletes the temporary data directories of the bench's own servers (after a successful run; a failed one keeps
    /// them, with the servers' logs).
    func removeData() {
        for child in children { try? FileManager.default.removeItem(atPath: child.dataDirectory) }
    }

    /// Restarts the bench's own server on the same port and data (the storm's `--drop restart`).
    func restart() async throws {
        guard children.count == 1, let child = children.first else {
            throw BenchError("--drop restart needs one server the bench started itself.")
        }
        try await child.restart()
    }

    /// The data directories of the bench's own servers, one per node (empty when attached).
    var dataDirectories: [String] { children.map(\.dataDirectory) }

    /// The logs of the bench's own servers, one per node.
    var logPaths: [String] { children.map(\.logPath) }

    /// User + system CPU seconds the server has used so far (the first node's).
    func cpuSeconds() -> Double? {
        pid.flatMap(ProcFS.cpuSeconds)
    }

    /// User + system CPU seconds each node has used so far, in the order of ``nodes``.
    func nodeCPUSeconds() -> [Double?] {
        nodes.map { $0.pid.flatMap(ProcFS.cpuSeconds) }
    }
}

/// Reads /proc.
enum ProcFS {
    /// The 1-minute load average: the CPU is shared with other work, and figures taken under load say so.
    static func loadAverage() -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return nil }
        return text.split(separator: " ").first.flatMap { Double($0) }
    }

    static func residentBytes(pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if fields.count >= 2, let kib = Int(fields[1]) { return kib * 1024 }
        }
        return nil
    }

    /// The machine's CPU time so far (all CPUs), and the part of it the hypervisor gave to other virtual machines
    /// (`steal`, from the `cpu` line of /proc/stat), in clock ticks.
    static func machineCPUTicks() -> (total: UInt64, steal: UInt64)? {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = stat.split(separator: "\n").first(where: { $0.hasPrefix("cpu ") })
        else { return nil }
        // user nice system idle iowait irq softirq steal guest guest_nice; guest time is counted in user already.
        let ticks = line.split(separator: " ").dropFirst().compactMap { UInt64($0) }
        guard ticks.count >= 8 else { return nil }
        return (ticks.prefix(8).reduce(0, +), ticks[7])
    }

    /// CPU seconds (user + system) of the PostgreSQL server at `port`: its postmaster and every process it started
    /// (backends, WAL writer, checkpointer...), those that exited included (their time is in the postmaster's `cutime`
    /// and `cstime` once it has reaped them). When no postmaster has `-p <port>` on its command line (one started with
    /// the port in its configuration): every process named `postgres` on the machine.
    static func postgresCPUSeconds(port: Int) -> Double? {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return nil }
        var processes: [(pid: Int32, parent: Int32, ticks: Double)] = []
        for entry in entries {
            guard let pid = Int32(entry), let process = processStat(pid: pid), process.command == "postgres",
                process.fields.count > 14, let parent = Int32(process.fields[1])
            else { continue }
            // utime, stime, cutime, cstime: fields 14-17 of the whole line.
            let ticks = process.fields[11...14].compactMap { Double($0) }.reduce(0, +)
            processes.append((pid, parent, ticks))
        }
        guard !processes.isEmpty else { return nil }
        let postmaster = processes.first { process in
            let arguments =
                (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(process.pid)/cmdline")))
                .map { $0.split(separator: 0).map { String(decoding: $0, as: UTF8.self) } } ?? []
            return zip(arguments, arguments.dropFirst()).contains { $0 == "-p" && $1 == String(port) }
        }
        let ours = postmaster.map { server in processes.filter { $0.pid == server.pid || $0.parent == server.pid } }
        return (ours ?? processes).reduce(0) { $0 + $1.ticks } / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// The command name of a process and the fields of /proc/<pid>/stat after it (state first).
    private static func processStat(pid: Int32) -> (command: String, fields: [Substring])? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")")
        else { return nil }
        let command = String(stat[stat.index(after: open)..<close])
        return (command, stat[stat.index(after: close)...].split(separator: " "))
    }

    /// User + system CPU seconds of the nats-server listening on `port` (its command line names the port), or of
    /// every nats-server when none does.
    static func natsCPUSeconds(port: Int) -> Double? {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return nil }
        var all: [Double] = []
        var ours: [Double] = []
        for entry in entries {
            guard let pid = Int32(entry), let process = processStat(pid: pid), process.command == "nats-server",
                process.fields.count > 13
            else { continue }
            let ticks = process.fields[11...12].compactMap { Double($0) }.reduce(0, +)
            all.append(ticks)
            let arguments =
                (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline")))
                .map { $0.split(separator: 0).map { String(decoding: $0, as: UTF8.self) } } ?? []
            if arguments.contains(String(port)) || arguments.contains(where: { $0.hasSuffix(":\(port)") }) {
                ours.append(ticks)
            }
        }
        guard !all.isEmpty else { return nil }
        return (ours.isEmpty ? all : ours).reduce(0, +) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// User + system CPU seconds of a process (/proc/<pid>/stat).
    static func cpuSeconds(pid: Int32) -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command: state is field 3; utime and stime are fields 14 and 15 (1-based, whole line).
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}

/// A parley-server child process of the bench.
final class ManagedServer: Sendable {
    private struct State {
        var process: Process
        var port: Int
    }

    let binary: String
    let dataDirectory: String
    let logPath: String
    let appId: String
    let restAPIKey: String
    let extraArguments: [String]
    private let state: NIOLockedValueBox<State>

    var pid: Int32 { state.withLockedValue { $0.process.processIdentifier } }
    var port: Int { state.withLockedValue { $0.port } }

    private init(
        binary: String, dataDirectory: String, logPath: String, appId: String, restAPIKey: String,
        extraArguments: [String], process: Process, port: Int
    ) {
        self.binary = binary
        self.dataDirectory = dataDirectory
        self.logPath = logPath
        self.appId = appId
        self.restAPIKey = restAPIKey
        self.extraArguments = extraArguments
        self.state = NIOLockedValueBox(State(process: process, port: port))
    }

    /// Starts a server in a temporary data directory. Without `app`, creates the run's app first (`apps create`); with
    /// it, the app is already in the shared database (another node of the run created it).
    static func launch(_ options: ServerOptions, app: (id: String, restAPIKey: String)? = nil) async throws
        -> ManagedServer
    {
        let binary = options.serverBinary ?? Self.siblingBinary()
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw BenchError(
                "No parley-server at \(binary): build it (swift build -c release --product parley-server) or pass --server-binary."
            )
        }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("parley-bench-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var extra = options.serverArguments
        if let url = options.databaseURL { extra += ["--database-url", url] }
        if let url = options.natsURL { extra += ["--nats-url", url] }
        // The scenarios are load from a few addresses (thousands of connections a second, tens of thousands of
        // messages a second from a few users): the server's abuse limits are off for them, unless the run sets them.
        if supports(option: "--connections-per-second-per-address", binary: binary) {
            for option in [
                "--connections-per-second-per-address", "--logins-per-second-per-address",
                "--messages-per-second-per-user",
            ] where !extra.contains(option) {
                extra += [option, "0"]
            }
        }

        // An app for the run, created before the server starts (so the server creates no default app).
        let appId: String
        let key: String
        if let app {
            (appId, key) = app
        } else {
            let create = try runToCompletion(
                binary,
                ["apps", "create", "parley-bench", "--data-dir", directory]
                    + (options.databaseURL.map { ["--database-url", $0] } ?? [])
            )
            guard let id = Self.value(after: "App ID:", in: create),
                let created = Self.value(after: "REST API Key:", in: create)
            else { throw BenchError("Could not read the app's keys from `parley-server apps create`:\n\(create)") }
            (appId, key) = (id, created)
        }

        let logPath = directory + "/server.log"
        let (process, port) = try await spawn(
            binary: binary, directory: directory, logPath: logPath, port: 0, extra: extra
        )
        return ManagedServer(
            binary: binary, dataDirectory: directory, logPath: logPath, appId: appId, restAPIKey: key,
            extraArguments: extra, process: process, port: port
        )
    }

    /// Whether this parley-server's `serve` takes `option` (a later server may, an older one not).
    static func supports(option: String, binary: String?) -> Bool {
        let binary = binary ?? siblingBinary()
        guard let help = try? runToCompletion(binary, ["serve", "--help"]) else { return false }
        return help.contains(option)
    }

    private static func spawn(binary: String, directory: String, logPath: String, port: Int, extra: [String])
        async throws
        -> (Process, Int)
    {
        if !FileManager.default.fileExists(atPath: logPath) {
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        }
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        log.seekToEndOfFile()
        let start = (try? Data(contentsOf: URL(fileURLWithPath: logPath)).count) ?? 0
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments =
            [
                "serve", "--hostname", "127.0.0.1", "--port", String(port), "--data-dir", directory, "--log-level",
                "info",
            ]
            + extra
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
        ChildProcesses.shared.add(process.processIdentifier)
        // The server logs "Parley listening on http://127.0.0.1:<port>" once it accepts connections.
        let deadline = Monotonic.nanoseconds() + 60_000_000_000
        while Monotonic.nanoseconds() < deadline {
            if let text = try? String(contentsOfFile: logPath, encoding: .utf8) {
                let fresh = String(decoding: text.utf8.dropFirst(start), as: UTF8.self)
                if let range = fresh.range(of: "Parley listening on http://") {
                    let rest = fresh[range.upperBound...]
                    if let colon = rest.firstIndex(of: ":") {
                        let digits = rest[rest.index(after: colon)...].prefix(while: \.isNumber)
                        if let bound = Int(digits) { return (process, bound) }
                    }
                }
            }
            guard process.isRunning else {
                throw BenchError("parley-server exited (\(process.terminationStatus)); see \(logPath)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        process.terminate()
        throw BenchError("parley-server did not listen within 60 s; see \(logPath)")
    }

    func stop() async {
        let process = state.withLockedValue { $0.process }
        await Self.terminate(process)
        ChildProcesses.shared.remove(process.processIdentifier)
    }

    /// SIGTERM (graceful: the server closes its sockets with 1001), SIGKILL if it is still there after 10 s.
    private static func terminate(_ process: Process) async {
        guard process.isRunning else { return }
        process.terminate()
        let deadline = Monotonic.nanoseconds() + 10_000_000_000
        while process.isRunning && Monotonic.nanoseconds() < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    func restart() async throws {
        let (old, port) = state.withLockedValue { ($0.process, $0.port) }
        await Self.terminate(old)
        ChildProcesses.shared.remove(old.processIdentifier)
        let (process, _) = try await Self.spawn(
            binary: binary, directory: dataDirectory, logPath: logPath, port: port, extra: extraArguments
        )
        state.withLockedValue { $0.process = process }
    }

    /// The parley-server next to this executable (both come out of the same `swift build -c release`).
    static func siblingBinary() -> String {
        let me = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let path = me.deletingLastPathComponent().appendingPathComponent("parley-server").path
        if FileManager.default.isExecutableFile(atPath: path) { return path }
        if let resolved = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            return URL(fileURLWithPath: resolved).deletingLastPathComponent().appendingPathComponent("parley-server")
                .path
        }
        return path
    }

    static func runToCompletion(_ binary: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0 else {
            throw BenchError("\(binary) \(arguments.joined(separator: " ")) failed:\n\(text)")
        }
        return text
    }

    private static func value(after label: String, in text: String) -> String? {
        guard let range = text.range(of: label) else { return nil }
        return text[range.upperBound...].split(whereSeparator: { $0 == " " || $0 == "\n" }).first.map(String.init)
    }
}

/// Every child process the bench started, so that an interrupted or timed-out run leaves none behind.
final class ChildProcesses: Sendable {
    static let shared = ChildProcesses()
    private let pids = NIOLockedValueBox(Set<Int32>())

    func add(_ pid: Int32) { pids.withLockedValue { _ = $0.insert(pid) } }
    func remove(_ pid: Int32) { pids.withLockedValue { _ = $0.remove(pid) } }

    /// SIGKILL to every child still registered (on timeout, on SIGINT).
    func killAll() {
        for pid in pids.withLockedValue({ $0 }) { kill(pid, SIGKILL) }
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// PostgreSQL's own statistics, read with `psql` when it is installed (the bench has no PostgreSQL client of its own).
enum PostgresStats {
    /// Rows inserted, updated and deleted in every database since the server started (`pg_stat_database`).
    static func rowsWritten(url: String) -> Int? {
        let psql = ["/usr/bin/psql", "/usr/local/bin/psql"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let psql else { return nil }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: psql)
        process.arguments = [
            url, "-Atc",
            "SELECT pg_stat_clear_snapshot(); SELECT sum(tup_inserted + tup_updated + tup_deleted) FROM pg_stat_database",
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return nil }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).split(separator: "\n").last.flatMap { Int($0) }
    }
}
