import Foundation
import NIOCore
import NIOPosix
import ParleyProtocol
import PostgresNIO

/// The PostgreSQL store could not start, or the database failed in a way worth a clear message.
///
/// The ``description`` is one line an operator can act on, without the password or any SQL; the
/// ``debugDescription`` adds the underlying error.
///
/// | code | cause | what to do |
/// | --- | --- | --- |
/// | `ERR_DATABASE_URL` | the URL cannot be parsed | fix `--database-url` / `PARLEY_DATABASE_URL` |
/// | `ERR_DATABASE_UNREACHABLE` | no server answers at the address (refused, unknown host, timeout) | start the server, check host and port |
/// | `ERR_DATABASE_AUTHENTICATION` | PostgreSQL refused the login (SQLSTATE 28P01, 28000) | fix the user or password, or `pg_hba.conf` |
/// | `ERR_DATABASE_NOT_FOUND` | the database does not exist (SQLSTATE 3D000) | create it, or fix the URL's path |
/// | `ERR_DATABASE_MIGRATION` | the schema could not be brought up to date | read the underlying error |
/// | `ERR_DATABASE_TOO_NEW` | a newer Parley migrated the schema past what this server knows | run that version or later, or restore the backup from before the upgrade |
/// | `ERR_DATABASE` | any other failure of PostgreSQL | read the SQLSTATE and message |
public struct PostgresStoreError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// A stable, documented code.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let invalidURL = Code(rawValue: "ERR_DATABASE_URL")
        public static let unreachable = Code(rawValue: "ERR_DATABASE_UNREACHABLE")
        public static let authenticationFailed = Code(rawValue: "ERR_DATABASE_AUTHENTICATION")
        public static let databaseNotFound = Code(rawValue: "ERR_DATABASE_NOT_FOUND")
        public static let migrationFailed = Code(rawValue: "ERR_DATABASE_MIGRATION")
        /// The database's schema was written by a newer Parley than this server: it is not touched.
        public static let schemaTooNew = Code(rawValue: "ERR_DATABASE_TOO_NEW")
        public static let database = Code(rawValue: "ERR_DATABASE")
    }

    public var code: Code
    public var message: String
    /// PostgreSQL's SQLSTATE, when the server sent one (e.g. `28P01`).
    public var sqlState: String?
    public var underlying: (any Error)?

    public init(_ code: Code, _ message: String, sqlState: String? = nil, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.sqlState = sqlState
        self.underlying = underlying
    }

    public var description: String { "\(code.rawValue): \(message)" }

    public var debugDescription: String {
        guard let underlying else { return description }
        return "\(description) (underlying: \(String(reflecting: underlying)))"
    }

    /// Explains why connecting to `url` failed.
    static func connecting(to url: PostgresDatabaseURL, _ error: any Error) -> PostgresStoreError {
        if let error = error as? PostgresStoreError { return error }
        let database = url.database ?? url.username
        guard let psql = error as? PSQLError else {
            return PostgresStoreError(
                .unreachable, "Cannot connect to PostgreSQL at \(url.endpoint): \(error).", underlying: error
            )
        }
        let sqlState = psql.serverInfo?[.sqlState]
        let serverMessage = psql.serverInfo?[.message] ?? ""
        switch (psql.code, sqlState) {
        case (.server, "28P01"), (.server, "28000"):
            return PostgresStoreError(
                .authenticationFailed,
                "PostgreSQL at \(url.endpoint) refused the login of user \"\(url.username)\" "
                    + "(SQLSTATE \(sqlState!) \(sqlState == "28P01" ? "invalid_password" : "invalid_authorization_specification"): \(serverMessage)).",
                sqlState: sqlState, underlying: error
            )
        case (.server, "3D000"):
            return PostgresStoreError(
                .databaseNotFound,
                "PostgreSQL at \(url.endpoint) has no database \"\(database)\" (SQLSTATE 3D000 invalid_catalog_name: \(serverMessage)).",
                sqlState: sqlState, underlying: error
            )
        case (.server, let state?):
            return PostgresStoreError(
                .database,
                "PostgreSQL at \(url.endpoint) refused the connection (SQLSTATE \(state): \(serverMessage)).",
                sqlState: state, underlying: error
            )
        case (.authMechanismRequiresPassword, _):
            return PostgresStoreError(
                .authenticationFailed,
                "PostgreSQL at \(url.endpoint) asks user \"\(url.username)\" for a password, and the URL has none.",
                underlying: error
            )
        case (.sslUnsupported, _):
            return PostgresStoreError(
                .unreachable,
                "PostgreSQL at \(url.endpoint) does not accept TLS, and sslmode=\(url.tlsMode.rawValue) requires it.",
                underlying: error
            )
        case (.serverClosedConnection, _), (.uncleanShutdown, _):
            return PostgresStoreError(
                .unreachable,
                "The server at \(url.endpoint) closed the connection during start-up (is it PostgreSQL, and does it accept this client?).",
                underlying: error
            )
        case (.connectionError, _):
            let reason = psql.underlying.map(Self.reason) ?? "connection failed"
            return PostgresStoreError(
                .unreachable, "Cannot connect to PostgreSQL at \(url.endpoint): \(reason).", underlying: error
            )
        default:
            return PostgresStoreError(
                .unreachable, "Cannot connect to PostgreSQL at \(url.endpoint): \(psql.code).", underlying: error
            )
        }
    }

    /// A short reason for a socket-level failure ("connection refused").
    static func reason(_ error: any Error) -> String {
        if let error = error as? IOError {
            switch error.errnoCode {
            case ECONNREFUSED: return "connection refused"
            case ECONNRESET: return "connection reset by the server"
            case ETIMEDOUT: return "connection timed out"
            case EHOSTUNREACH: return "host unreachable"
            case ENETUNREACH: return "network unreachable"
            case ENOENT: return "no such socket file"
            default: return "\(error)"
            }
        }
        if let error = error as? NIOConnectionError {
            if let first = error.connectionErrors.first { return reason(first.error) }
            if let dns = error.dnsAAAAError ?? error.dnsAError { return "cannot resolve \(error.host): \(dns)" }
            return "cannot resolve \(error.host)"
        }
        if let error = error as? ChannelError, case .connectTimeout(let amount) = error {
            return "no answer within the start-up timeout (\(amount.nanoseconds / 1_000_000_000) s)"
        }
        return "\(error)"
    }
}

extension PSQLError {
    /// The server's SQLSTATE, when the error came from PostgreSQL.
    var sqlState: String? { serverInfo?[.sqlState] }
}

extension PostgresStoreError {
    /// The schema has step `version`, which this server (whose last step is `known`) does not know: a newer Parley
    /// (`release`, when it recorded one) migrated it. Starting would run old code on a schema it was not written for.
    static func schemaTooNew(version: Int64, release: String?, known: Int64) -> PostgresStoreError {
        let writer = release.map { "Parley \($0)" } ?? "a newer Parley"
        return PostgresStoreError(
            .schemaTooNew,
            "The database's schema is at version \(version), written by \(writer); this server, Parley "
                + "\(ParleyRelease.version), knows versions up to \(known) and will not touch it. Run \(writer) or later, or "
                + "restore the backup taken before the upgrade (docs/DEPLOYMENT.md, \"Upgrades and rollbacks\")."
        )
    }
}
