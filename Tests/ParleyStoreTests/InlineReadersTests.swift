import Foundation
import GRDB
import ParleyTesting
import Testing

@testable import ParleyStoreSQLite

/// The connections behind the SQLite store's inline reads (``InlineReaders``): each read is one snapshot, at most
/// `limit` connections are opened, a failed read leaves its connection usable, and a closed store's reads go to the
/// pool.
@Suite struct InlineReadersTests {
    /// A database of one table with `rows` rows, and readers with at most `limit` connections.
    private struct Fixture {
        let directory: TemporaryDirectory
        let pool: DatabasePool
        let readers: InlineReaders

        init(rows: Int = 1, limit: Int) throws {
            directory = try TemporaryDirectory(prefix: "parley-inline-readers")
            let path = directory.path + "/db.sqlite"
            pool = try DatabasePool(path: path)
            try pool.write { db in
                try db.execute(sql: "CREATE TABLE items (id INTEGER PRIMARY KEY)")
                for id in 0..<rows { try db.execute(sql: "INSERT INTO items (id) VALUES (?)", arguments: [id]) }
            }
            readers = InlineReaders(path: path, configuration: Configuration(), pool: pool, limit: limit)
        }

        /// Closes the readers and the pool, and deletes the folder.
        func close() throws {
            readers.close()
            try pool.close()
            directory.remove()
        }
    }

    private static func count(_ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT count(*) FROM items") ?? -1
    }

    @Test func aReadSeesOneSnapshotWhileTheWriterCommits() throws {
        let fixture = try Fixture(limit: 2)
        let (pool, readers) = (fixture.pool, fixture.readers)
        let (before, during) = try readers.read { db in
            let before = try Self.count(db)
            // A commit in the middle of the read is not seen by its second statement.
            try pool.write { db in try db.execute(sql: "INSERT INTO items (id) VALUES (100)") }
            return (before, try Self.count(db))
        }
        #expect(before == 1 && during == 1)
        // The next read, on the same connection, sees it.
        #expect(try readers.read(Self.count) == 2)
        #expect(readers.openedCount == 1)
        try fixture.close()
    }

    @Test func pastTheLimitAReadGoesThroughThePool() throws {
        let fixture = try Fixture(rows: 3, limit: 1)
        let readers = fixture.readers
        // The outer read holds the only connection: the inner one is served by the pool, with the same data.
        let counts = try readers.read { db in
            (try Self.count(db), try readers.read(Self.count))
        }
        #expect(counts == (3, 3))
        #expect(readers.openedCount == 1)
        try fixture.close()
    }

    @Test func aFailedReadLeavesItsConnectionBetweenTransactions() throws {
        struct Refused: Error {}
        let fixture = try Fixture(limit: 1)
        let readers = fixture.readers
        #expect(throws: Refused.self) {
            try readers.read { db in
                _ = try Self.count(db)
                throw Refused()
            }
        }
        // A query error inside the transaction too.
        #expect(throws: DatabaseError.self) {
            try readers.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM missing") }
        }
        // The same connection begins its next transaction (it would fail if one were still open) and reads.
        #expect(try readers.read(Self.count) == 1)
        #expect(readers.openedCount == 1)
        try fixture.close()
    }

    @Test func afterCloseReadsGoThroughThePoolAndALentConnectionIsClosedWhenItsReadEnds() throws {
        let fixture = try Fixture(limit: 2)
        let readers = fixture.readers
        try readers.read { _ in
            // Closed while this read holds its connection: the read still finishes.
            readers.close()
        }
        // Nothing idle, nothing opened again: the pool answers.
        #expect(try readers.read(Self.count) == 1)
        #expect(readers.openedCount == 1)
        try fixture.close()
        #expect(throws: DatabaseError.self) { try readers.read(Self.count) }
    }

    /// Many threads at once: every read is answered, and no more connections are opened than the limit.
    @Test func concurrentReadersShareAtMostLimitConnections() async throws {
        let fixture = try Fixture(rows: 5, limit: 3)
        let readers = fixture.readers
        try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<16 {
                group.addTask {
                    var total = 0
                    for _ in 0..<200 { total += try readers.read(Self.count) }
                    return total
                }
            }
            for try await total in group { #expect(total == 5 * 200) }
        }
        #expect(readers.openedCount <= 3)
        try fixture.close()
    }
}
