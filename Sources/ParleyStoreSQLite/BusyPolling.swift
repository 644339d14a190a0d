import Foundation
import GRDB

extension Database.BusyMode {
    /// Waits for a lock held by another connection by trying again every `interval` microseconds, for at least
    /// `seconds`, then fails with `SQLITE_BUSY`.
    ///
    /// SQLite's own busy handler (`.timeout`) sleeps 1, 2, 5, 10, 15, 20, 25... ms between tries: a writer held off
    /// for 3 ms by the checkpointer's RESTART (``WALCheckpointer``) came back after 8 ms, and the checkpointer, which
    /// holds the writer off while it waits for the readers of older snapshots, slept the same steps with the writer
    /// waiting behind it. Both only ever wait for short transactions of this process.
    static func polling(seconds: Double, interval: UInt32 = 100) -> Database.BusyMode {
        let tries = Int(seconds * 1_000_000 / Double(interval))
        return .callback { numberOfTries in
            guard numberOfTries < tries else { return false }
            usleep(interval)
            return true
        }
    }
}
