import Dispatch
import Foundation
import GRDB
import GRDBSQLite

/// WAL checkpoints on a thread of their own, so that the writer never stops for one.
///
/// A checkpoint copies the pages of the WAL back into the database file and `fdatasync`s both files. SQLite runs it
/// on the writer's thread at the commit that crosses `wal_autocheckpoint`: measured in the `rooms` benchmark, the
/// writer then stopped for 0.3-0.5 s every 3-4 s (two `fdatasync`s of 10-110 ms each, plus the copy), and every
/// message sent meanwhile waited for it.
///
/// Here the writer's commits only count the WAL's frames (a `sqlite3_wal_hook`, which also turns SQLite's automatic
/// checkpoints off) and, past ``threshold`` frames, ring this checkpointer. On its own connection and dispatch queue
/// it then runs PASSIVE checkpoints, which never block the writer or the readers, until few frames are left. Once the
/// WAL holds ``restartThreshold`` frames, a RESTART checkpoint follows for those: it waits for the writer to be
/// between transactions and holds it off while it copies the last frames, so that the writer's next transaction
/// starts the WAL from its beginning again (without it, a WAL that is never fully copied while commits keep coming
/// would grow without bound). A round whose PASSIVE passes copied everything needs no RESTART: the writer restarts the
/// WAL by itself.
///
/// The RESTART is the one part that stops the writer, and not briefly: SQLite takes the WAL's write lock first and
/// keeps it through an `fdatasync` of the WAL, the copy and an `fdatasync` of the database (4-13 ms each, measured
/// here). Run every round, it made the tail of `parley-bench rooms` (p99 6.7-7.0 ms at 2,000 messages/s against
/// 2.6-3.4 ms with a RESTART every fourth round); ``restartThreshold`` trades that stall for a larger WAL file.
final class WALCheckpointer: @unchecked Sendable {
    // `@unchecked Sendable` is sound: `database` and `queue` are immutable and thread-safe (GRDB serializes the
    // connection; a dispatch queue may be used from any thread), and `state` is only read or written with `lock`
    // held.
    private let database: DatabaseQueue
    private let queue = DispatchQueue(label: "parley.sqlite.checkpointer")
    private let lock = NSLock()
    private var state = State()
    /// WAL frames after a commit past which a checkpoint starts.
    let threshold: Int
    /// WAL frames past which a round ends with a RESTART (see the type's discussion).
    let restartThreshold: Int
    /// Frames a PASSIVE pass may leave behind for the RESTART that follows it.
    private let restartBelow: Int

    private struct State {
        var scheduled = false
        var closed = false
        var rounds = 0
        var restarts = 0
    }

    /// Opens the checkpointer's connection to the database at `path`, which the writer has already put in WAL mode.
    ///
    /// - Parameters:
    ///   - threshold: WAL frames after a commit past which a round of PASSIVE checkpoints runs.
    ///   - restartThreshold: WAL frames past which a round ends with a RESTART checkpoint (at least `threshold`).
    init(path: String, threshold: Int, restartThreshold: Int) throws {
        var configuration = Configuration()
        // RESTART waits for the writer's transaction in progress and for readers of older snapshots.
        configuration.busyMode = .polling(seconds: 10)
        configuration.label = "parley.sqlite.checkpointer"
        database = try DatabaseQueue(path: path, configuration: configuration)
        self.threshold = threshold
        self.restartThreshold = max(restartThreshold, threshold)
        restartBelow = max(threshold / 8, 64)
    }

    /// Installs the frame counter on the writer's connection (run on the writer, once, before it commits again).
    func install(on db: Database) {
        sqlite3_wal_hook(db.sqliteConnection, walHook, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Checkpoint rounds run so far.
    var rounds: Int { lock.withLock { state.rounds } }

    /// RESTART checkpoints run so far.
    var restarts: Int { lock.withLock { state.restarts } }

    /// Returns once every checkpoint the writer asked for so far has run.
    func waitUntilIdle() async {
        await withCheckedContinuation { continuation in queue.async { continuation.resume() } }
    }

    func close() throws {
        lock.withLock { state.closed = true }
        queue.sync {}
        try database.close()
    }

    /// The writer committed and the WAL holds `frames` frames.
    fileprivate func committed(frames: Int) {
        guard frames >= threshold else { return }
        let schedule = lock.withLock {
            guard !state.scheduled else { return false }
            state.scheduled = true
            return true
        }
        if schedule { queue.async { self.checkpoint() } }
    }

    private func checkpoint() {
        let closed = lock.withLock {
            state.scheduled = false
            if !state.closed { state.rounds += 1 }
            return state.closed
        }
        guard !closed else { return }
        do {
            try database.writeWithoutTransaction { db in
                // The bulk of the work, while the writer goes on: each pass copies what the writer appended during
                // the previous one.
                var left = Int.max
                var frames = 0
                for _ in 0..<4 where left > restartBelow {
                    let (log, copied) = try db.checkpoint(.passive)
                    (frames, left) = (log, log - copied)
                }
                // Everything copied: the writer's next transaction restarts the WAL by itself. Else the WAL only
                // grows, which is fine until it holds `restartThreshold` frames.
                if left > 0 && frames >= restartThreshold {
                    try db.checkpoint(.restart)
                    lock.withLock { state.restarts += 1 }
                }
            }
        } catch {
            // Busy past the timeout (a long read): the next commit past the threshold asks again.
        }
    }
}

/// SQLite calls it on the writer's thread after each commit, with the number of frames in the WAL.
private func walHook(
    _ context: UnsafeMutableRawPointer?, _ connection: OpaquePointer?, _ database: UnsafePointer<CChar>?,
    _ frames: Int32
) -> Int32 {
    guard let context else { return SQLITE_OK }
    Unmanaged<WALCheckpointer>.fromOpaque(context).takeUnretainedValue().committed(frames: Int(frames))
    return SQLITE_OK
}
