import Foundation
import GRDB
import ParleyProtocol
import ParleyServer
import ParleyStoreSQLite
import ParleyTesting
import Testing

/// docs/BENCHMARKS.md, appendix "Design notes", "Storage identity": the server refuses a database file that is empty or not Parley's (unless
/// told to create one), and a second server on one data directory refuses to start; each with one clear line.
@Suite struct StorageIdentityTests {
    static func refusal(_ work: () throws -> Void) -> SQLiteStoreError? {
        do {
            try work()
            return nil
        } catch let error as SQLiteStoreError {
            return error
        } catch {
            Issue.record("unexpected \(error)")
            return nil
        }
    }

    @Test func anEmptyFileIsRefusedUnlessToldToCreateADatabaseInIt() async throws {
        let directory = try TemporaryDirectory(prefix: "parley-identity")
        FileManager.default.createFile(atPath: directory.path + "/parley.sqlite", contents: Data())
        let error = Self.refusal { _ = try openSQLiteStore(in: directory.path) }
        #expect(error?.code == "ERR_DATABASE_NOT_PARLEY")
        #expect(error?.description.contains("empty file (0 bytes)") == true)
        #expect(error?.description.contains("--create-database") == true)
        // The file is untouched.
        #expect(
            (try FileManager.default.attributesOfItem(atPath: directory.path + "/parley.sqlite")[.size] as? Int) == 0)

        let store = try openSQLiteStore(in: directory.path, creation: .ifMissingOrEmpty)
        try await store.close()
        // Now it is Parley's: it opens without being told.
        let again = try openSQLiteStore(in: directory.path)
        try await again.close()
    }

    @Test func aSQLiteDatabaseWithoutTablesIsTreatedAsEmpty() async throws {
        let directory = try TemporaryDirectory(prefix: "parley-identity")
        let queue = try DatabaseQueue(path: directory.path + "/parley.sqlite")
        try await queue.write { db in try db.execute(sql: "PRAGMA user_version = 1") }
        try queue.close()
        #expect(
            Self.refusal { _ = try openSQLiteStore(in: directory.path) }?.description.contains("without tables") == true
        )
        let store = try openSQLiteStore(in: directory.path, creation: .ifMissingOrEmpty)
        try await store.close()
    }

    @Test func anotherApplicationsDatabaseIsRefusedEvenWhenToldToCreate() throws {
        let directory = try TemporaryDirectory(prefix: "parley-identity")
        let queue = try DatabaseQueue(path: directory.path + "/parley.sqlite")
        try queue.write { db in try db.execute(sql: "CREATE TABLE invoices (id INTEGER)") }
        try queue.close()
        for creation in [DatabaseCreation.ifMissing, .ifMissingOrEmpty] {
            let error = Self.refusal { _ = try openSQLiteStore(in: directory.path, creation: creation) }
            #expect(error?.description.contains("another application") == true)
            #expect(error?.description.contains("invoices") == true)
        }
        // Parley wrote nothing into it.
        let check = try DatabaseQueue(path: directory.path + "/parley.sqlite")
        #expect(try check.read { db in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master") } == ["invoices"])
        try check.close()
    }

    @Test func bytesThatAreNotSQLiteAreRefused() throws {
        let directory = try TemporaryDirectory(prefix: "parley-identity")
        var random = SeededRandom(seed: 42)
        let bytes = (0..<5000).map { _ in UInt8.random(in: 0...255, using: &random) }
        FileManager.default.createFile(atPath: directory.path + "/parley.sqlite", contents: Data(bytes))
        let error = Self.refusal { _ = try openSQLiteStore(in: directory.path, creation: .ifMissingOrEmpty) }
        #expect(error?.description.contains("not a SQLite database") == true)
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory.path + "/parley.sqlite")) == Data(bytes))
    }

    /// A database from before the mark (application_id 0, Parley's tables) opens, and is marked.
    @Test func aParleyDatabaseFromBeforeTheMarkOpensAndIsMarked() async throws {
        let directory = try TemporaryDirectory(prefix: "parley-identity")
        let path = directory.path + "/parley.sqlite"
        let store = try SQLiteStore(path: path)
        try await store.close()
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in try db.execute(sql: "PRAGMA application_id = 0") }
        try queue.close()
        let reopened = try openSQLiteStore(in: directory.path)
        try await reopened.close()
        let check = try DatabaseQueue(path: path)
        let mark = try await check.read { db in try Int32.fetchOne(db, sql: "PRAGMA application_id") }
        #expect(mark == 0x5072_6C79)
        try check.close()
    }

    @Test func aSecondServerOnOneDataDirectoryIsRefusedWhileTheFirstRuns() async throws {
        let directory = try TemporaryDirectory(prefix: "parley-identity")
        let first = try openSQLiteStore(in: directory.path)
        let error = Self.refusal { _ = try openSQLiteStore(in: directory.path) }
        #expect(error?.code == "ERR_DATA_DIRECTORY_LOCKED")
        #expect(error?.description.contains("pid \(getpid())") == true)
        try await first.close()
        // Closed: the next one may start.
        let second = try openSQLiteStore(in: directory.path)
        try await second.close()
    }

    /// The same through the executable: the second `parley-server` exits with one line, the first keeps serving.
    @Test(.enabled(if: ServerProcess.isAvailable)) func aSecondParleyServerProcessExitsWithOneLine() async throws {
        let directory = try TemporaryDirectory(prefix: "parley-identity")
        let store = try openSQLiteStore(in: directory.path)
        let app = try await AppProvisioning.createApp(in: store, name: "Lock")
        try await store.close()
        let first = try await ServerProcess.start(label: "first", app: app, arguments: ["--data-dir", directory.path])
        do {
            _ = try await ServerProcess.start(label: "second", app: app, arguments: ["--data-dir", directory.path])
            Issue.record("the second server started")
        } catch {
            #expect("\(error)".contains("ERR_DATA_DIRECTORY_LOCKED: Another parley-server (pid \(first.pid))"))
        }
        #expect(try await first.request("GET", "/health").status == 200)
        #expect(await first.terminate(timeout: .seconds(20)) != nil)
    }

    /// A data directory that is a file, or one that cannot be made: one line that says what to do, not Foundation's
    /// `NSCocoaErrorDomain Code=516`.
    @Test func aDataDirectoryThatIsAFileOrCannotBeMadeIsRefusedWithOneLine() throws {
        let directory = try TemporaryDirectory(prefix: "parley-identity")
        let file = directory.path + "/not-a-folder"
        #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
        let isFile = Self.refusal { _ = try openSQLiteStore(in: file) }
        #expect(isFile?.code == "ERR_DATA_DIRECTORY_NOT_A_FOLDER")
        #expect(isFile?.message.contains("--data-dir") == true && isFile?.message.contains(file) == true)
        // Below a file: cannot be made.
        let below = Self.refusal { _ = try openSQLiteStore(in: file + "/data") }
        #expect(below?.code == "ERR_DATA_DIRECTORY_UNUSABLE")
        #expect(below?.description.contains("NSCocoaErrorDomain") == false)
        // The file is left as it was.
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "x")
    }

    /// The same through the executable: it exits at once with that line.
    @Test(.enabled(if: ServerProcess.isAvailable)) func aServerGivenAFileAsItsDataDirectoryExitsWithOneLine()
        async throws
    {
        let directory = try TemporaryDirectory(prefix: "parley-identity")
        let store = try openSQLiteStore(in: directory.path)
        let app = try await AppProvisioning.createApp(in: store, name: "File")
        try await store.close()
        let file = directory.path + "/a-file"
        #expect(FileManager.default.createFile(atPath: file, contents: Data()))
        do {
            _ = try await ServerProcess.start(label: "file", app: app, arguments: ["--data-dir", file])
            Issue.record("the server started on a file")
        } catch {
            #expect("\(error)".contains("ERR_DATA_DIRECTORY_NOT_A_FOLDER: The data directory \(file) is a file"))
            #expect(!"\(error)".contains("NSCocoaErrorDomain"))
        }
    }

    /// A database a newer Parley migrated (a schema step this server does not know) is refused with one line that names
    /// the release that wrote it, and is left as it was; the steps this server applies record its release.
    @Test func aDatabaseMigratedByANewerParleyIsRefusedAndLeftAlone() async throws {
        let directory = try TemporaryDirectory(prefix: "parley-identity")
        let store = try openSQLiteStore(in: directory.path)
        try await store.close()
        let path = directory.path + "/parley.sqlite"
        let queue = try DatabaseQueue(path: path)
        let recorded = try await queue.read { db in
            try String.fetchAll(db, sql: "SELECT DISTINCT release FROM schema_releases")
        }
        #expect(recorded == [ParleyRelease.version])
        try await queue.write { db in
            try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v99: from the future')")
            try db.execute(
                sql: "INSERT INTO schema_releases (migration, release) VALUES ('v99: from the future', '9.9.9')")
        }
        try queue.close()
        let before = try Data(contentsOf: URL(fileURLWithPath: path))

        let error = Self.refusal { _ = try openSQLiteStore(in: directory.path) }
        #expect(error?.code == "ERR_DATABASE_TOO_NEW")
        #expect(error?.description.contains("Parley 9.9.9") == true, "\(String(describing: error))")
        #expect(error?.description.contains("v99: from the future") == true)
        #expect(error?.description.contains(path) == true)
        #expect(error?.description.contains("\n") == false)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)

        // A step from a release that recorded none (or a table a newer release dropped) still refuses.
        let bare = try DatabaseQueue(path: path)
        try await bare.write { db in try db.execute(sql: "DELETE FROM schema_releases") }
        try bare.close()
        let unnamed = Self.refusal { _ = try openSQLiteStore(in: directory.path) }
        #expect(unnamed?.code == "ERR_DATABASE_TOO_NEW")
        #expect(unnamed?.description.contains("a newer Parley") == true)
    }
}
