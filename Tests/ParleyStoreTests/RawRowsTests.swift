import GRDB
import GRDBSQLite
import ParleyTesting
import Testing

@testable import ParleyStoreSQLite

/// ``GRDB/Statement/forEachRawRow(_:_:)``, the reads that step SQLite themselves (the unread counts read with every
/// batch): what they bind and read, and that every way out leaves the statement reset and usable.
@Suite struct RawRowsTests {
    /// A database file with a few rows, and the statement under test on its connection.
    static func withStatement(
        _ sql: String, _ body: (Database, Statement) throws -> Void
    ) throws {
        let directory = try TemporaryDirectory(prefix: "parley-raw-rows")
        let queue = try DatabaseQueue(path: directory.path + "/raw.sqlite")
        try queue.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE t (k TEXT NOT NULL, n INTEGER, s TEXT);
                    INSERT INTO t VALUES ('a', 1, 'one'), ('a', 2, NULL), ('b', 3, 'three');
                    """
            )
        }
        try queue.inDatabase { db in try body(db, try db.cachedStatement(sql: sql)) }
    }

    @Test func rowsAreReadByPositionWithTheArgumentsBound() throws {
        try Self.withStatement("SELECT n, s, k FROM t WHERE k = ? AND n >= ? ORDER BY n") { _, statement in
            var rows: [String] = []
            try statement.forEachRawRow([.text("a"), .integer(1)]) { row in
                rows.append("\(row.int64(0)) \(row.string(1)) \(row.string(2))")
            }
            // NULL text reads as empty.
            #expect(rows == ["1 one a", "2  a"])
            rows = []
            try statement.forEachRawRow([.text("b"), .integer(0)]) { rows.append($0.string(1)) }
            #expect(rows == ["three"])
            rows = []
            try statement.forEachRawRow([.text("none"), .integer(0)]) { rows.append($0.string(1)) }
            #expect(rows.isEmpty)
        }
    }

    @Test func tooFewOrTooManyArgumentsAreRefused() throws {
        try Self.withStatement("SELECT n FROM t WHERE k = ?") { _, statement in
            for arguments: [RawArgument] in [[], [.text("a"), .text("b")]] {
                let error = try #require(throws: DatabaseError.self) {
                    try statement.forEachRawRow(arguments) { _ in Issue.record("a row was read") }
                }
                #expect(error.resultCode == .SQLITE_MISUSE)
            }
            var count = 0
            try statement.forEachRawRow([.text("a")]) { _ in count += 1 }
            #expect(count == 2)
        }
    }

    @Test func anErrorWhileSteppingIsThrownAndTheStatementIsReset() throws {
        // abs() of the smallest integer overflows: SQLite fails at the row where k = ?.
        try Self.withStatement("SELECT abs(CASE WHEN k = ? THEN -9223372036854775807 - 1 ELSE n END) FROM t") {
            db, statement in
            var before: [Int64] = []
            let error = try #require(throws: DatabaseError.self) {
                try statement.forEachRawRow([.text("b")]) { before.append($0.int64(0)) }
            }
            #expect(error.resultCode == .SQLITE_ERROR)
            #expect(error.message?.contains("overflow") == true)
            #expect(before == [1, 2])
            #expect(sqlite3_stmt_busy(statement.sqliteStatement) == 0)
            #expect(!db.isInsideTransaction)
            var after: [Int64] = []
            try statement.forEachRawRow([.text("none")]) { after.append($0.int64(0)) }
            #expect(after == [1, 2, 3])
        }
    }

    @Test func aBodyThatThrowsStopsTheReadAndLeavesNoTransactionOpen() throws {
        struct Stop: Error {}
        try Self.withStatement("SELECT n FROM t WHERE k = ?") { db, statement in
            var seen = 0
            #expect(throws: Stop.self) {
                try statement.forEachRawRow([.text("a")]) { _ in
                    seen += 1
                    throw Stop()
                }
            }
            #expect(seen == 1)
            // Outside a transaction, the statement's implicit read ended with its reset: a write goes through.
            #expect(sqlite3_stmt_busy(statement.sqliteStatement) == 0)
            #expect(!db.isInsideTransaction)
            try db.execute(sql: "INSERT INTO t VALUES ('a', 4, 'four')")
            var values: [Int64] = []
            try statement.forEachRawRow([.text("a")]) { values.append($0.int64(0)) }
            #expect(values == [1, 2, 4])
        }
    }
}
