import Logging
import PostgresNIO

/// A statement of the message path that PostgreSQL parses and plans once per connection (a named prepared statement),
/// not at every batch: planning was 11% of PostgreSQL's time per message with one node and 24% with two under
/// `parley-bench rooms`, and a plan made for one batch's lists could scan a small table whole where the next batch
/// wanted its index. Each is a type whose ``sql`` is the text its call site builds (with values bound, never spliced
/// in), so the statement is written once.
protocol PreparedSQL {
    static var sql: String { get }
}

/// The postgres-nio prepared statement of a ``PreparedSQL``: named after it, prepared on first use per connection.
struct Prepared<Statement: PreparedSQL>: PostgresPreparedStatement {
    typealias Row = PostgresRow
    static var sql: String { Statement.sql }
    /// Short: PostgreSQL cuts names at 63 bytes, and postgres-nio's default (the Swift type's full name) made the
    /// statements of one extension the same name there.
    static var name: String { "parley." + String(describing: Statement.self) }
    let bindings: PostgresBindings

    func makeBindings() -> PostgresBindings { bindings }
    func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
}

extension PostgresSession {
    /// Every row of `query`, run as the named statement `statement` (whose text `query` has).
    func rows<Statement: PreparedSQL>(_ query: PostgresQuery, as statement: Statement.Type) async throws
        -> [PostgresRow]
    {
        assert(query.sql == Statement.sql, "\(Statement.self): the query's text is not the statement's")
        var rows: [PostgresRow] = []
        for try await row in try await connection.execute(Prepared<Statement>(bindings: query.binds), logger: logger) {
            rows.append(row)
        }
        return rows
    }
}
