import Foundation
import GRDB
import ParleyProtocol

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Why the server will not open a database file or a data directory: one line that says what to do.
public struct SQLiteStoreError: Error, CustomStringConvertible, Sendable {
    /// `ERR_DATABASE_NOT_PARLEY`, `ERR_DATABASE_TOO_NEW`, `ERR_DATA_DIRECTORY_LOCKED`,
    /// `ERR_DATA_DIRECTORY_NOT_A_FOLDER` or `ERR_DATA_DIRECTORY_UNUSABLE`.
    public let code: String
    public let message: String

    public var description: String { "\(code): \(message)" }

    /// A refusal with its code and the line that says what to do.
    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }

    static func notParley(_ message: String) -> SQLiteStoreError {
        SQLiteStoreError(code: "ERR_DATABASE_NOT_PARLEY", message: message)
    }
}

/// What the store does with a database file that exists but holds no Parley data.
public enum DatabaseCreation: Sendable {
    /// Create the file when it is missing; refuse a file that exists and is empty (0 bytes, or a SQLite database
    /// without tables): it may be a backup that failed, or the wrong path.
    case ifMissing
    /// Also make a new database in an existing empty file (`parley-server --create-database`).
    case ifMissingOrEmpty
}

/// The mark of a Parley database: SQLite's `application_id` (the header's bytes 68-71), "Prly".
enum DatabaseIdentity {
    static let applicationID: Int32 = 0x5072_6C79

    /// Checks, before anything is written, that `path` is missing (it will be created), Parley's, or empty when
    /// `creation` allows it.
    static func check(path: String, creation: DatabaseCreation) throws {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path) else { return }
        let size = (attributes[.size] as? NSNumber)?.intValue ?? 0
        let emptyAdvice =
            "Move it away (or restore it from a backup), or start with --create-database to make a new database in it."
        if size == 0 {
            guard case .ifMissingOrEmpty = creation else {
                throw SQLiteStoreError.notParley(
                    "\(path) is an empty file (0 bytes), not a Parley database. \(emptyAdvice)")
            }
            return
        }
        let (applicationID, tables, steps): (Int32, [String], [(String, String?)])
        do {
            var configuration = Configuration()
            configuration.readonly = true
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            defer { try? queue.close() }
            (applicationID, tables, steps) = try queue.read { db in
                let tables = try String.fetchAll(
                    db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
                return (
                    try Int32.fetchOne(db, sql: "PRAGMA application_id") ?? 0, tables,
                    try Self.schemaSteps(db, tables: tables)
                )
            }
        } catch {
            throw SQLiteStoreError.notParley(
                "\(path) is not a SQLite database (\(size) bytes). Parley will not touch it.")
        }
        if applicationID == Self.applicationID {
            try refuseNewerSchema(path: path, steps: steps, known: SQLiteStore.migrator.migrations)
            return
        }
        if applicationID == 0, tables.isEmpty {
            guard case .ifMissingOrEmpty = creation else {
                throw SQLiteStoreError.notParley(
                    "\(path) is a SQLite database without tables, not a Parley database. \(emptyAdvice)")
            }
            return
        }
        // A database of a version of Parley from before the mark: its migrations table names Parley's first one.
        if applicationID == 0, tables.contains("grdb_migrations"), tables.contains("apps"), tables.contains("events") {
            return
        }
        let listed = tables.prefix(5).joined(separator: ", ") + (tables.count > 5 ? ", ..." : "")
        throw SQLiteStoreError.notParley(
            "\(path) is the SQLite database of another application (application_id \(String(format: "0x%08X", applicationID)); tables: \(listed)). Parley will not write into it."
        )
    }

    /// The schema's steps (GRDB's migration identifiers) in the order they were applied, each with the release that
    /// applied it (nil before releases were recorded).
    static func schemaSteps(_ db: Database, tables: [String]) throws -> [(String, String?)] {
        guard tables.contains("grdb_migrations") else { return [] }
        let releases =
            tables.contains("schema_releases") ? "schema_releases" : "(SELECT NULL AS migration, NULL AS release)"
        return try Row.fetchAll(
            db,
            sql: """
                SELECT m.identifier, r.release FROM grdb_migrations m LEFT JOIN \(releases) r ON r.migration = m.identifier
                ORDER BY m.rowid
                """
        ).map { ($0[0], $0[1]) }
    }

    /// Refuses a database with a step this server does not know: a newer Parley migrated it, and old code on a schema
    /// it was not written for could lose data. One line that names the release that wrote it.
    static func refuseNewerSchema(path: String, steps: [(String, String?)], known: [String]) throws {
        let knownSteps = Set(known)
        guard let unknown = steps.last(where: { !knownSteps.contains($0.0) }) else { return }
        let writer = unknown.1.map { "Parley \($0)" } ?? "a newer Parley"
        throw SQLiteStoreError(
            code: "ERR_DATABASE_TOO_NEW",
            message:
                "\(path) was migrated by \(writer) (schema step \"\(unknown.0)\"); this server, Parley \(ParleyRelease.version), knows steps up to \"\(known.last ?? "")\" and will not touch it. Run \(writer) or later, or restore the backup taken before the upgrade (docs/DEPLOYMENT.md, \"Upgrades and rollbacks\")."
        )
    }
}

/// An exclusive lock on a data directory (`flock` on `parley.lock` in it), held while a server uses the directory, so
/// that a second server on the same SQLite database refuses to start instead of running beside the first (each would
/// miss the other's events). The lock goes with the process, however it ends.
public final class DataDirectoryLock: Sendable {
    private let descriptor: CInt
    public let path: String

    /// Takes the lock of `directory`, or throws `ERR_DATA_DIRECTORY_LOCKED` naming the process that holds it.
    public init(directory: String) throws {
        let path = (directory as NSString).appendingPathComponent("parley.lock")
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw SQLiteStoreError(
                code: "ERR_DATA_DIRECTORY_LOCKED", message: "Cannot open \(path): \(String(cString: strerror(errno)))."
            )
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            var holder = [UInt8](repeating: 0, count: 32)
            let count = pread(descriptor, &holder, holder.count, 0)
            close(descriptor)
            let pid = String(decoding: holder.prefix(max(0, count)), as: UTF8.self).trimmingCharacters(
                in: .whitespacesAndNewlines)
            throw SQLiteStoreError(
                code: "ERR_DATA_DIRECTORY_LOCKED",
                message:
                    "Another parley-server\(pid.isEmpty ? "" : " (pid \(pid))") is using the data directory \(directory). Stop it first, or give this one another --data-dir."
            )
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(descriptor, 0)
        _ = pwrite(descriptor, pid, pid.count, 0)
        self.descriptor = descriptor
        self.path = path
    }

    /// Gives the lock back (closing the store does).
    public func release() {
        _ = flock(descriptor, LOCK_UN)
    }

    deinit {
        close(descriptor)
    }
}
