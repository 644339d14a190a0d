import GRDB
import GRDBSQLite

/// A value bound to a statement's parameter by ``GRDB/Statement/forEachRawRow(_:_:)``.
enum RawArgument {
    case text(String)
    case integer(Int64)
}

/// The current row of a statement stepped by ``GRDB/Statement/forEachRawRow(_:_:)``: columns read by position, straight
/// from SQLite. Valid only inside the closure it is given to.
struct RawRow {
    fileprivate let statement: SQLiteStatement

    /// The column as an integer (0 for NULL).
    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }

    /// The column as text (empty for NULL).
    func string(_ column: Int32) -> String {
        guard let text = sqlite3_column_text(statement, column) else { return "" }
        return String(cString: text)
    }
}

extension Statement {
    /// Binds `arguments` to the statement's parameters in order, runs `body` with each row, and resets the statement
    /// (also when `body` or SQLite throws), so that a read outside a transaction ends with it.
    ///
    /// For the hottest reads only: GRDB's `Row.fetchCursor` builds a `Row` for every cursor, with a dictionary of the
    /// statement's column names, and validates the arguments against the statement's parameters. In `parley-bench
    /// rooms` the unread counts read with each batch
    /// (``SQLiteStore/fetchUnread(_:appId:uid:conversationIds:maxConversations:)``) spent twice as long there as in
    /// SQLite. Here the arguments must match the statement's parameters (checked), the
    /// statement must only read, and it must be used in no other way (GRDB keeps its own record of what is bound).
    func forEachRawRow(_ arguments: [RawArgument], _ body: (RawRow) throws -> Void) throws {
        let statement = sqliteStatement
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        guard sqlite3_bind_parameter_count(statement) == Int32(arguments.count) else {
            throw DatabaseError(
                resultCode: .SQLITE_MISUSE, message: "\(arguments.count) arguments for this statement", sql: sql
            )
        }
        for (index, argument) in zip(Int32(1)..., arguments) {
            let code: Int32
            switch argument {
            case .text(let text): code = sqlite3_bind_text(statement, index, text, -1, rawRowsTransient)
            case .integer(let value): code = sqlite3_bind_int64(statement, index, value)
            }
            guard code == SQLITE_OK else { throw error(code) }
        }
        while true {
            switch sqlite3_step(statement) {
            case SQLITE_ROW: try body(RawRow(statement: statement))
            case SQLITE_DONE: return
            case let code: throw error(code)
            }
        }
    }

    private func error(_ code: Int32) -> DatabaseError {
        DatabaseError(
            resultCode: ResultCode(rawValue: code),
            message: sqlite3_db_handle(sqliteStatement).flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) },
            sql: sql
        )
    }
}

/// SQLite copies the bound text (`SQLITE_TRANSIENT`): the Swift string's bytes live only during the call.
private let rawRowsTransient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)
