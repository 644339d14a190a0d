import Foundation
import GRDB

/// A consistent copy of a Parley SQLite database taken while servers write to it (`parley-server backup`): SQLite's
/// `VACUUM INTO`, in one read transaction, so the copy is the database as of one commit, compacted, with no WAL
/// beside it. The server keeps serving meanwhile (WAL readers do not block the writer).
///
/// Restoring is copying the file back as `parley.sqlite` into an empty data directory (or over the old one, without
/// its `-wal` and `-shm` files) while the server is stopped (README, "Backup and restore").
public enum SQLiteBackup {
    /// Copies the database at `path` into `destination`, which must not exist yet; returns its size in bytes.
    @discardableResult
    public static func copy(databaseAt path: String, to destination: String) throws -> Int {
        guard FileManager.default.fileExists(atPath: path) else { throw SQLiteBackupError.noDatabase(path) }
        guard !FileManager.default.fileExists(atPath: destination) else {
            throw SQLiteBackupError.destinationExists(destination)
        }
        try DatabaseIdentity.check(path: path, creation: .ifMissing)
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(10)
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        defer { try? queue.close() }
        try queue.inDatabase { db in try db.execute(sql: "VACUUM INTO ?", arguments: [destination]) }
        let attributes = try FileManager.default.attributesOfItem(atPath: destination)
        return (attributes[.size] as? NSNumber)?.intValue ?? 0
    }
}

extension SQLiteBackup {
    /// An attachment a database names: where its bytes are in a blob store (`APP/ATTACHMENT`), their size and SHA-256
    /// (hex).
    public struct NamedFile: Sendable, Equatable {
        public var key: String
        public var size: Int64
        public var sha256: String
    }

    /// The attachments the database at `path` names (a backup's copy: read-only).
    public static func attachments(inDatabaseAt path: String) throws -> [NamedFile] {
        var configuration = Configuration()
        configuration.readonly = true
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        defer { try? queue.close() }
        return try queue.read { db in
            try Row.fetchAll(db, sql: "SELECT app_id, id, size, sha256 FROM attachments ORDER BY app_id, id").map {
                NamedFile(key: ($0[0] as String) + "/" + ($0[1] as String), size: $0[2], sha256: $0[3])
            }
        }
    }

    /// Refuses, before a restore moves anything, a file that is not a Parley database or that a newer release
    /// migrated (``SQLiteStoreError``).
    public static func check(databaseAt path: String) throws {
        guard FileManager.default.fileExists(atPath: path) else { throw SQLiteBackupError.noDatabase(path) }
        try DatabaseIdentity.check(path: path, creation: .ifMissing)
    }
}

public enum SQLiteBackupError: Error, CustomStringConvertible {
    case noDatabase(String)
    case destinationExists(String)

    public var description: String {
        switch self {
        case .noDatabase(let path): return "No database at \(path)."
        case .destinationExists(let path): return "\(path) exists already; a backup goes into a new file."
        }
    }
}
