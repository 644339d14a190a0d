import Foundation
import Logging
import ParleyStorePostgres
import PostgresNIO

/// A fresh, empty database on the PostgreSQL server named by `PARLEY_TEST_DATABASE_URL`, for one test.
///
/// `scripts/test` sets the variable (it starts a throwaway server with `scripts/with-postgres`); when it is not set,
/// PostgreSQL tests skip themselves with ``skipReason``. Each test creates its own database, so tests run in parallel.
///
/// ```swift
/// let database = try await PostgresTestDatabase.create()
/// let store = try await PostgresStore.connect(url: database.url)
/// ...
/// try await store.close()
/// try await database.drop()
/// ```
public struct PostgresTestDatabase: Sendable {
    /// The variable that names the test server: `postgres://USER:PASSWORD@HOST:PORT/postgres` (a database the
    /// user may connect to, as a user who may create databases).
    public static let environmentVariable = "PARLEY_TEST_DATABASE_URL"

    /// Why PostgreSQL tests do not run, when they do not.
    public static let skipReason = """
        PARLEY_TEST_DATABASE_URL is not set: the PostgreSQL tests and the postgres cases of the store conformance \
        suite are SKIPPED. Run scripts/test (it starts a throwaway PostgreSQL), or set PARLEY_TEST_DATABASE_URL=\
        postgres://USER:PASSWORD@127.0.0.1:PORT/postgres.
        """

    /// The server's URL from the environment, if any.
    public static var adminURL: String? {
        ProcessInfo.processInfo.environment[environmentVariable].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Whether PostgreSQL tests can run.
    public static var isConfigured: Bool { adminURL != nil }

    /// The database's name (`parley_test_<random>`).
    public let name: String
    /// A URL of the database, with the administrator's credentials.
    public let url: String

    /// Creates a database with a new random name.
    public static func create(prefix: String = "parley_test") async throws -> PostgresTestDatabase {
        guard let adminURL else { throw PostgresTestDatabaseError(message: skipReason) }
        let name = "\(prefix)_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased())"
        try await administer(adminURL, "CREATE DATABASE \(name)")
        guard var components = URLComponents(string: adminURL) else {
            throw PostgresTestDatabaseError(message: "\(environmentVariable) is not a URL.")
        }
        components.percentEncodedPath = "/" + name
        return PostgresTestDatabase(name: name, url: components.string!)
    }

    /// Drops the database, closing any connection still open to it.
    public func drop() async throws {
        guard let adminURL = Self.adminURL else { return }
        try await Self.administer(adminURL, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
    }

    /// Runs SQL of the test's own in this database (a trigger that fails writes as a full disk would, ...).
    public func execute(_ sql: String) async throws {
        try await Self.administer(url, sql)
    }

    /// Ends the sessions of this database that hold advisory locks (a node's claim on the database): as if their
    /// connections broke.
    public func terminateClaims() async throws {
        guard let adminURL = Self.adminURL else { return }
        try await Self.administer(
            adminURL,
            """
            SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a
            WHERE a.datname = '\(name)' AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'advisory')
            """
        )
    }

    /// Runs `body` while a transaction of another session holds `table` in `ACCESS EXCLUSIVE` mode: every statement
    /// of the servers that reads the table waits until `body` returns (a database that keeps some work waiting).
    public func withTableLocked<T: Sendable>(_ table: String, _ body: () async throws -> T) async throws -> T {
        let configuration = try PostgresDatabaseURL(url).connectionConfiguration(connectTimeout: .seconds(10))
        var logger = Logger(label: "parley.test-database")
        logger.logLevel = .error
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
        do {
            _ = try await connection.query("BEGIN", logger: logger).collect()
            _ = try await connection.query(
                PostgresQuery(unsafeSQL: "LOCK TABLE \(table) IN ACCESS EXCLUSIVE MODE"), logger: logger
            ).collect()
            let value = try await body()
            _ = try await connection.query("ROLLBACK", logger: logger).collect()
            try await connection.close()
            return value
        } catch {
            try? await connection.close()
            throw error
        }
    }

    private static func administer(_ url: String, _ sql: String) async throws {
        let configuration = try PostgresDatabaseURL(url).connectionConfiguration(connectTimeout: .seconds(10))
        var logger = Logger(label: "parley.test-database")
        logger.logLevel = .error
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
        do {
            _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).collect()
            try await connection.close()
        } catch {
            try? await connection.close()
            throw error
        }
    }
}

/// PostgreSQL tests cannot run.
public struct PostgresTestDatabaseError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
