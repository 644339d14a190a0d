import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
    import Glibc
#endif

/// A child process started with `posix_spawn`, its standard input and output on `/dev/null` (or given files) and its
/// standard error on a pipe (or a file), every other descriptor of this process closed in it.
///
/// Not Foundation's `Process`: on Linux its `run()` crashed (a bad memory access in a `memcpy`) when the test process
/// had thousands of descriptors open, which the connection tests have while other tests start servers.
final class ChildProcess: Sendable {
    let pid: pid_t
    private let status = NIOLockedValueBox<Int32?>(nil)

    /// Starts `executable` with `arguments`; its standard input is the file `standardInput`, its standard output and
    /// error go to `standardOutput` (nil: `/dev/null`) and `standardError` (descriptors of this process); `environment`
    /// nil passes this process's.
    init(
        executable: String, arguments: [String], environment: [String: String]? = nil,
        standardInput: String = "/dev/null", standardOutput: Int32? = nil, standardError: Int32
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, standardInput, O_RDONLY, 0)
        if let standardOutput {
            posix_spawn_file_actions_adddup2(&actions, standardOutput, 1)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        posix_spawn_file_actions_adddup2(&actions, standardError, 2)
        Self.closeFrom3(&actions, keeping: standardError)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { for variable in envp ?? [] { free(variable) } }
        var pid: pid_t = 0
        let result =
            if let envp {
                posix_spawn(&pid, executable, &actions, nil, argv, envp)
            } else {
                posix_spawn(&pid, executable, &actions, nil, argv, environ)
            }
        guard result == 0 else {
            throw ServerProcessError("posix_spawn \(executable): \(String(cString: strerror(result)))")
        }
        self.pid = pid
    }

    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    /// Glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which Swift's Glibc module does not export.
    private static let closeFrom: CloseFrom? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")
        else { return nil }
        return unsafeBitCast(symbol, to: CloseFrom.self)
    }()

    /// Closes every descriptor from 3 up in the child (after the `dup2` onto its standard error).
    private static func closeFrom3(_ actions: inout posix_spawn_file_actions_t, keeping: Int32) {
        if let closeFrom {
            _ = closeFrom(&actions, 3)
            return
        }
        let open =
            (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.compactMap { Int32($0) } ?? []
        for descriptor in open where descriptor >= 3 && descriptor != keeping {
            posix_spawn_file_actions_addclose(&actions, descriptor)
        }
    }

    /// The exit status once the process has ended (reaped here), nil while it runs.
    var terminationStatus: Int32? {
        status.withLockedValue { status in
            if status == nil {
                var raw: Int32 = 0
                if waitpid(pid, &raw, WNOHANG) == pid {
                    // WIFEXITED: the exit code; else 128 + the signal, as a shell reports it.
                    status = raw & 0x7F == 0 ? (raw >> 8) & 0xFF : 128 + (raw & 0x7F)
                }
            }
            return status
        }
    }

    var isRunning: Bool { terminationStatus == nil }

    func signal(_ signal: Int32) {
        if isRunning { kill(pid, signal) }
    }

    deinit {
        // No zombie left behind.
        if isRunning {
            kill(pid, SIGKILL)
            var raw: Int32 = 0
            waitpid(pid, &raw, 0)
        }
    }
}

/// What a program run by ``ProgramRun/run(_:arguments:environment:input:timeout:)`` did.
public struct ProgramOutcome: Sendable {
    /// The exit code; 128 + the signal when a signal ended it.
    public var status: Int32
    public var output: String
    public var errors: String
}

/// Runs a program to its end, as a shell would (for tests of command-line tools).
///
/// Not Foundation's `Process`: on Linux its dispatch sources for the child's pipes and exit have corrupted
/// libdispatch's timers in a test process that runs many things at once (every `Task.sleep` of the process then waited
/// for ever; swift-corelibs-libdispatch#949). This spawns with `posix_spawn`, writes the output to files and waits for
/// the child on a thread of its own.
public enum ProgramRun {
    /// Runs `executable` with `arguments` and `environment`, its standard input from `input` (nil: nothing); killed
    /// after `timeout`.
    ///
    /// A program that runs until stopped (`parley listen`) is interrupted (SIGINT) as soon as its output so far
    /// satisfies `stopWhen` (read every 50 ms), or killed at `timeout`.
    public static func run(
        _ executable: String, arguments: [String], environment: [String: String], input: URL? = nil,
        timeout: Duration = .seconds(60), stopWhen: (@Sendable (String) -> Bool)? = nil
    ) async throws -> ProgramOutcome {
        let folder = try TemporaryDirectory(prefix: "parley-program")
        defer { folder.remove() }
        let outPath = folder.path + "/out"
        let errPath = folder.path + "/err"
        let out = open(outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let err = open(errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard out >= 0, err >= 0 else { throw ServerProcessError("cannot open output files in \(folder.path)") }
        let child: ChildProcess
        do {
            defer {
                close(out)
                close(err)
            }
            child = try ChildProcess(
                executable: executable, arguments: arguments, environment: environment,
                standardInput: input?.path ?? "/dev/null", standardOutput: out, standardError: err
            )
        }
        let deadline = ContinuousClock.now + timeout
        let status = await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            let waiter = Thread {
                // Polled every 5 ms on this thread, so that the deadline needs no timer.
                var polls = 0
                var interrupted = false
                while true {
                    if let status = child.terminationStatus {
                        continuation.resume(returning: status)
                        return
                    }
                    if ContinuousClock.now >= deadline { child.signal(SIGKILL) }
                    polls += 1
                    if let stopWhen, !interrupted, polls % 10 == 0,
                        let output = try? String(contentsOfFile: outPath, encoding: .utf8), stopWhen(output)
                    {
                        interrupted = true
                        child.signal(SIGINT)
                    }
                    usleep(5_000)
                }
            }
            waiter.start()
        }
        return ProgramOutcome(
            status: status, output: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
            errors: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
        )
    }
}
