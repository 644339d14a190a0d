import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A child process started with `posix_spawn`, its standard input and output on `/dev/null` and its standard error on
/// a pipe, every other descriptor of this process closed in it.
///
/// Not Foundation's `Process`: on Linux its `run()` crashed (a bad memory access in a `memcpy`) when the test process
/// had thousands of descriptors open, which the connection tests have while other tests start servers.
final class ChildProcess: Sendable {
    let pid: pid_t
    private let status = Mutex<Int32?>(nil)

    /// Starts `executable` with `arguments`; its standard error goes to `standardError` (a descriptor of this process).
    init(executable: String, arguments: [String], standardError: Int32) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, standardError, 2)
        Self.closeFrom3(&actions, keeping: standardError)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, nil, argv, environ)
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
        status.withLock { status in
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
