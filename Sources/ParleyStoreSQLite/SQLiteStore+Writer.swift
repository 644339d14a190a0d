import Foundation
import GRDB
import ParleyStore

/// What the store's writer carries from one batch to the next: the conversations its sends read (``SendBatch/Known``)
/// and the database's `data_version` when the last batch committed.
final class WriterMemory: @unchecked Sendable {
    // `@unchecked Sendable` is sound: `known` and `dataVersion` are only read or written with `lock` held (and only by
    // the writer's batches, which GRDB already runs one at a time).
    private let lock = NSLock()
    private var known = SendBatch.Known()
    private var dataVersion: Int64?

    /// Takes what is kept, leaving nothing until the batch gives it back after its commit: what a batch that fails
    /// read or changed is never kept. (What was kept before it would still match the database once the batch rolled
    /// back; it is dropped all the same, since the failure may come from a database that is not what it seemed.)
    fileprivate func take() -> (SendBatch.Known, dataVersion: Int64?) {
        lock.withLock {
            defer { (known, dataVersion) = (SendBatch.Known(), nil) }
            return (known, dataVersion)
        }
    }

    fileprivate func keep(_ known: SendBatch.Known, dataVersion: Int64) {
        lock.withLock { (self.known, self.dataVersion) = (known, dataVersion) }
    }
}

extension SQLiteStore {
    /// Runs `body`, a batch of commands, in one write transaction on the writer's connection, with what the writer's
    /// earlier batches read (``SendBatch``).
    ///
    /// The transaction is begun and committed with statements compiled once (GRDB's `write` compiles `BEGIN
    /// IMMEDIATE` and `COMMIT` anew for every transaction: 7% of the writer's time in `parley-bench rooms`, where most
    /// batches hold one message). What the sends read is handed on only once the batch committed. `PRAGMA
    /// data_version`, read once the transaction holds the write lock, changes when another connection committed since
    /// this one's last transaction: the database then may not be what the writer remembers, and the batch starts
    /// from nothing. (Only this store writes the tables sends read, but nothing else stops a second store or another
    /// process from opening the same file.)
    static func writeBatch<T>(_ db: Database, memory: WriterMemory, _ body: (inout SendBatch) throws -> T) throws -> T {
        var (known, rememberedVersion) = memory.take()
        try db.cachedStatement(sql: "BEGIN IMMEDIATE TRANSACTION").execute()
        do {
            let dataVersion = try Int64.fetchOne(db.cachedStatement(sql: "PRAGMA data_version")) ?? -1
            if dataVersion != rememberedVersion { known = SendBatch.Known() }
            // Moved, not shared: the first send that changes it would otherwise copy every conversation kept.
            var sends = SendBatch(known: consume known)
            let value = try body(&sends)
            try db.cachedStatement(sql: "COMMIT TRANSACTION").execute()
            memory.keep(sends.known, dataVersion: dataVersion)
            return value
        } catch {
            // SQLite may have rolled the transaction back itself (a full disk, an I/O error).
            if db.isInsideTransaction { try? db.rollback() }
            if let error = error as? DatabaseError, error.resultCode == .SQLITE_FULL {
                // A documented refusal, not an internal error: the caller can tell the user, the operator the disk.
                throw DomainError(.storageFull, "The server's storage is full: nothing was stored. Try again later.")
            }
            throw error
        }
    }
}
