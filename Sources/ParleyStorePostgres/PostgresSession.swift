import Logging
import PostgresNIO

/// One leased connection and the logger its queries report to: what a transaction runs on.
struct PostgresSession: Sendable {
    let connection: PostgresConnection
    let logger: Logger

    /// Every row of the query's result.
    func rows(_ query: PostgresQuery) async throws -> [PostgresRow] {
        try await connection.query(query, logger: logger).collect()
    }

    /// Runs a statement, discarding any rows.
    func execute(_ query: PostgresQuery) async throws {
        _ = try await connection.query(query, logger: logger).collect()
    }

    /// The first column of the first row, or nil when there is no row.
    func value<T: PostgresDecodable>(_ query: PostgresQuery, as type: T.Type = T.self) async throws -> T? {
        try await rows(query).first.map { try $0.decode(T.self) }
    }

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws (the error is rethrown
    /// as it is, unlike postgres-nio's `withTransaction`, so a ``DomainError`` stays one).
    ///
    /// When the rollback itself fails, the connection is closed so that the pool never hands out a connection
    /// left inside a transaction.
    func transaction<T: Sendable>(
        isolation: IsolationLevel = .readCommitted, _ body: () async throws -> T
    ) async throws -> T {
        try await execute(isolation == .readCommitted ? "BEGIN" : "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        do {
            let value = try await body()
            try await execute("COMMIT")
            return value
        } catch {
            do {
                try await execute("ROLLBACK")
            } catch {
                try? await connection.close()
            }
            throw error
        }
    }

    enum IsolationLevel {
        case readCommitted
        /// One snapshot for every statement; for reads that must agree with each other.
        case repeatableReadOnly
    }
}
