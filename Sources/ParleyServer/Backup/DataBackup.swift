import Crypto
import Foundation
import ParleyProtocol
import ParleyStoreSQLite

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A backup of a single-node deployment (`parley-server backup FOLDER`, `parley-server restore FOLDER`): the SQLite
/// database as of one commit (``SQLiteBackup``) and the attachments it names, in one new folder:
///
/// ```
/// FOLDER/parley.sqlite         the database (VACUUM INTO: one commit, compacted, no WAL)
/// FOLDER/files/APP/ATTACHMENT  every attachment the copy names, its SHA-256 checked against the database's
/// FOLDER/backup.json           what was copied (``Manifest``)
/// ```
///
/// Attachments never change once stored (an upload is renamed into place), so copying them after the database's copy
/// gives each one the copy names; a file uploaded since is not named, one removed since is listed as missing. A file is
/// hard-linked when the folder is on the same file system (no bytes copied; the link keeps it when the server removes
/// its own), else copied.
///
/// A restore takes the data directory's lock first, so a running server's directory is refused, puts the database and
/// the files in place, and, asked to replace what is there, moves the old database, search index and files aside into
/// `replaced-<time>/` in the data directory rather than deleting them.
public enum DataBackup {
    /// `backup.json`.
    public struct Manifest: Codable, Sendable, Equatable {
        /// The release that took the backup.
        public var release: String
        /// When, epoch milliseconds.
        public var createdAt: Int64
        /// Attachments copied, and their bytes.
        public var files: Int
        public var fileBytes: Int64
        /// Attachments the database names that were gone (removed since the database's copy), or whose bytes did not
        /// match their SHA-256: `APP/ATTACHMENT`.
        public var missingFiles: [String]
        /// Where the attachments are when they are not in the backup (S3): said, not copied.
        public var filesElsewhere: String?
    }

    /// What a restore did.
    public struct Restored: Sendable, Equatable {
        public var files: Int
        /// Where the replaced data went (nil: nothing was replaced).
        public var replacedInto: String?
    }

    static let databaseName = "parley.sqlite"
    static let manifestName = "backup.json"

    /// Backs up the database at `dataDirectory` and, when they are on disk (`filesDirectory`), its attachments, into
    /// the new folder `folder`. `filesElsewhere` names where they are otherwise (an S3 bucket), for the manifest.
    @discardableResult
    public static func backup(
        dataDirectory: String, filesDirectory: String?, filesElsewhere: String? = nil, into folder: String,
        now: Int64 = Int64(Date().timeIntervalSince1970 * 1000)
    ) throws -> Manifest {
        guard !FileManager.default.fileExists(atPath: folder) else { throw BackupError.destinationExists(folder) }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        do {
            return try fill(
                folder, dataDirectory: dataDirectory, filesDirectory: filesDirectory, filesElsewhere: filesElsewhere,
                now: now)
        } catch {
            // No half-made backup is left to be mistaken for one (nor to block the next attempt at the same name).
            try? FileManager.default.removeItem(atPath: folder)
            throw error
        }
    }

    private static func fill(
        _ folder: String, dataDirectory: String, filesDirectory: String?, filesElsewhere: String?, now: Int64
    ) throws -> Manifest {
        let database = folder + "/" + databaseName
        try SQLiteBackup.copy(databaseAt: dataDirectory + "/" + databaseName, to: database)
        var manifest = Manifest(
            release: ParleyRelease.version, createdAt: now, files: 0, fileBytes: 0, missingFiles: [],
            filesElsewhere: filesDirectory == nil ? filesElsewhere : nil)
        if let filesDirectory {
            for file in try SQLiteBackup.attachments(inDatabaseAt: database) {
                let source = filesDirectory + "/" + file.key
                let destination = folder + "/files/" + file.key
                guard FileManager.default.fileExists(atPath: source) else {
                    manifest.missingFiles.append(file.key)
                    continue
                }
                try FileManager.default.createDirectory(
                    atPath: (destination as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                if link(source, destination) != 0 {
                    try FileManager.default.copyItem(atPath: source, toPath: destination)
                }
                guard try sha256(of: destination) == file.sha256 else {
                    try? FileManager.default.removeItem(atPath: destination)
                    manifest.missingFiles.append(file.key)
                    continue
                }
                manifest.files += 1
                manifest.fileBytes += file.size
            }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(manifest).write(to: URL(fileURLWithPath: folder + "/" + manifestName))
        return manifest
    }

    /// Restores the backup in `folder` into `dataDirectory` (created if missing), the attachments into
    /// `filesDirectory` (nil: they are elsewhere, e.g. S3). Refused while a server uses the directory, and when it
    /// holds a database already unless `replacing` (which moves the old data aside first).
    @discardableResult
    public static func restore(
        from folder: String, into dataDirectory: String, filesDirectory: String?, replacing: Bool,
        now: Date = Date()
    ) throws -> Restored {
        let database = folder + "/" + databaseName
        guard FileManager.default.fileExists(atPath: database) else { throw BackupError.notABackup(folder) }
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        let lock = try DataDirectoryLock(directory: dataDirectory)
        defer { lock.release() }
        // A backup of another application, an empty file, or a newer release's schema is refused before anything
        // moves.
        try SQLiteBackup.check(databaseAt: database)
        let target = dataDirectory + "/" + databaseName
        var restored = Restored(files: 0, replacedInto: nil)
        let existing = [target, target + "-wal", target + "-shm"].filter { FileManager.default.fileExists(atPath: $0) }
        let filesThere =
            filesDirectory.map { !((try? FileManager.default.contentsOfDirectory(atPath: $0)) ?? []).isEmpty } ?? false
        if !existing.isEmpty || filesThere {
            guard replacing else { throw BackupError.dataDirectoryInUse(dataDirectory) }
            let aside = dataDirectory + "/replaced-" + Self.stamp(now)
            try FileManager.default.createDirectory(atPath: aside, withIntermediateDirectories: true)
            let search = dataDirectory + "/parley-search.sqlite"
            for path in existing + [search, search + "-wal", search + "-shm"]
            where FileManager.default.fileExists(atPath: path) {
                try FileManager.default.moveItem(
                    atPath: path, toPath: aside + "/" + (path as NSString).lastPathComponent)
            }
            if let filesDirectory, filesThere {
                try FileManager.default.moveItem(atPath: filesDirectory, toPath: aside + "/files")
            }
            restored.replacedInto = aside
        }
        try FileManager.default.copyItem(atPath: database, toPath: target)
        let files = folder + "/files"
        if let filesDirectory, FileManager.default.fileExists(atPath: files) {
            try FileManager.default.createDirectory(atPath: filesDirectory, withIntermediateDirectories: true)
            for app in try FileManager.default.contentsOfDirectory(atPath: files) {
                for attachment in try FileManager.default.contentsOfDirectory(atPath: files + "/" + app) {
                    let destination = filesDirectory + "/" + app + "/" + attachment
                    try FileManager.default.createDirectory(
                        atPath: filesDirectory + "/" + app, withIntermediateDirectories: true)
                    try FileManager.default.copyItem(atPath: files + "/" + app + "/" + attachment, toPath: destination)
                    restored.files += 1
                }
            }
        }
        return restored
    }

    /// The manifest of the backup in `folder`.
    public static func manifest(in folder: String) throws -> Manifest {
        try JSONDecoder().decode(
            Manifest.self, from: Data(contentsOf: URL(fileURLWithPath: folder + "/" + manifestName)))
    }

    static func sha256(of path: String) throws -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw BackupError.unreadable(path) }
        defer { try? handle.close() }
        var hasher = SHA256()
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty { hasher.update(data: chunk) }
        return hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }

    static func stamp(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd-HHmmss"
        return formatter.string(from: date)
    }
}

/// Why a backup or a restore did not happen: one line that says what to do.
public enum BackupError: Error, CustomStringConvertible, Equatable {
    case destinationExists(String)
    case notABackup(String)
    case dataDirectoryInUse(String)
    case unreadable(String)

    public var description: String {
        switch self {
        case .destinationExists(let path):
            return "\(path) exists already; a backup goes into a new folder (or a new file ending in .sqlite)."
        case .notABackup(let path):
            return "\(path) holds no parley.sqlite: not a backup made by parley-server backup."
        case .dataDirectoryInUse(let path):
            return
                "\(path) holds a database or files already. Restore into a new data directory, or pass --replace to move them aside into \(path)/replaced-<time>/ first."
        case .unreadable(let path):
            return "Cannot read \(path)."
        }
    }
}
