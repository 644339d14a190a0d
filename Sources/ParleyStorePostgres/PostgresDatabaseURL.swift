import Foundation
import NIOSSL
import PostgresNIO

/// Where and how to reach a PostgreSQL database, read from a libpq-style URL.
///
/// ```
/// postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require|verify-ca|verify-full]
/// postgresql://parley@%2Fvar%2Frun%2Fpostgresql/parley        (a Unix socket directory as the host)
/// postgres://parley@localhost/parley?host=/var/run/postgresql   (the same, libpq's `host` parameter)
/// ```
///
/// User and password are percent-decoded. `sslmode` follows libpq: `prefer` (the default) and `require` encrypt
/// without checking the certificate, `verify-ca` checks it against `sslrootcert` (or the system's roots),
/// `verify-full` also checks the host name. The ``description`` never shows the password.
public struct PostgresDatabaseURL: Sendable, Hashable, CustomStringConvertible {
    /// TLS use, as libpq's `sslmode`.
    public enum TLSMode: String, Sendable, Hashable {
        case disable, prefer, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"
    }

    /// The server's host name or address (or the socket directory, see ``unixSocketPath``); `localhost` by default.
    public var host: String
    /// The server's port; 5432 by default.
    public var port: Int
    /// The Unix socket file, when the host is a directory (`HOST/.s.PGSQL.PORT`).
    public var unixSocketPath: String?
    /// The user to log in as.
    public var username: String
    /// The user's password; nil when the URL has none (a server that trusts the client, or a socket).
    public var password: String?
    /// The database; PostgreSQL's default (the user's name) when nil.
    public var database: String?
    public var tlsMode: TLSMode
    /// A PEM file of trusted roots for `verify-ca` and `verify-full`.
    public var rootCertificatePath: String?
    /// Sent as `application_name`, shown in `pg_stat_activity`.
    public var applicationName: String

    /// Parses a `postgres://` or `postgresql://` URL.
    ///
    /// - Throws: ``PostgresStoreError`` `ERR_DATABASE_URL` when the URL cannot be used.
    public init(_ string: String) throws {
        guard let components = URLComponents(string: string),
            let scheme = components.scheme?.lowercased(), scheme == "postgres" || scheme == "postgresql"
        else {
            throw PostgresStoreError(
                .invalidURL, "The database URL must look like postgres://user:password@host:5432/database."
            )
        }
        var query: [String: String] = [:]
        for item in components.queryItems ?? [] { query[item.name] = item.value ?? "" }

        let port: Int
        if let explicit = components.port {
            port = explicit
        } else if let text = query["port"] {
            guard let parsed = Int(text) else {
                throw PostgresStoreError(.invalidURL, "The port \(text) is not a number.")
            }
            port = parsed
        } else {
            port = 5432
        }
        guard (1...65535).contains(port) else {
            throw PostgresStoreError(.invalidURL, "The port \(port) is out of range.")
        }
        self.port = port

        let host = (components.percentEncodedHost?.removingPercentEncoding).flatMap { $0.isEmpty ? nil : $0 }
        let socketDirectory =
            query["host"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? host.flatMap { $0.hasPrefix("/") ? $0 : nil }
        if let socketDirectory {
            self.host = socketDirectory
            self.unixSocketPath = socketDirectory + "/.s.PGSQL.\(port)"
        } else {
            self.host = query["host"] ?? host ?? "localhost"
            self.unixSocketPath = nil
        }

        guard let user = components.percentEncodedUser?.removingPercentEncoding ?? query["user"], !user.isEmpty else {
            throw PostgresStoreError(.invalidURL, "The database URL names no user (postgres://USER@host/database).")
        }
        self.username = user
        self.password = components.percentEncodedPassword?.removingPercentEncoding ?? query["password"]
        let path = components.percentEncodedPath.removingPercentEncoding ?? ""
        let database = path.hasPrefix("/") ? String(path.dropFirst()) : path
        self.database = database.isEmpty ? query["dbname"] : database

        let mode = query["sslmode"] ?? "prefer"
        guard let tlsMode = TLSMode(rawValue: mode) ?? (mode == "allow" ? .prefer : nil) else {
            throw PostgresStoreError(
                .invalidURL, "Unknown sslmode \(mode): use disable, prefer, require, verify-ca or verify-full."
            )
        }
        self.tlsMode = tlsMode
        self.rootCertificatePath = query["sslrootcert"]
        self.applicationName = query["application_name"] ?? "parley-server"
    }

    /// The URL without its password, e.g. `postgres://parley@db.internal:5432/parley`.
    public var description: String {
        let user = username.addingPercentEncoding(withAllowedCharacters: .urlUserAllowed) ?? username
        let location = unixSocketPath.map { "[\($0)]" } ?? "\(host.contains(":") ? "[\(host)]" : host):\(port)"
        return "postgres://\(user)\(password == nil ? "" : ":***")@\(location)/\(database ?? "")"
    }

    /// Where the server is, for messages: `host:port` or the socket path.
    public var endpoint: String {
        unixSocketPath ?? "\(host.contains(":") ? "[\(host)]" : host):\(port)"
    }

    // MARK: postgres-nio configurations

    func tlsConfiguration() throws -> TLSConfiguration? {
        var tls = TLSConfiguration.makeClientConfiguration()
        switch tlsMode {
        case .disable: return nil
        case .prefer, .require: tls.certificateVerification = .none
        case .verifyCA: tls.certificateVerification = .noHostnameVerification
        case .verifyFull: tls.certificateVerification = .fullVerification
        }
        if let rootCertificatePath { tls.trustRoots = .file(rootCertificatePath) }
        return tls
    }

    /// The pool's configuration.
    func clientConfiguration(maximumConnections: Int) throws -> PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        if let unixSocketPath {
            configuration = .init(
                unixSocketPath: unixSocketPath, username: username, password: password, database: database)
        } else {
            let tls: PostgresClient.Configuration.TLS
            switch (tlsMode, try tlsConfiguration()) {
            case (.disable, _), (_, nil): tls = .disable
            case (.prefer, let config?): tls = .prefer(config)
            case (_, let config?): tls = .require(config)
            }
            configuration = .init(
                host: host, port: port, username: username, password: password, database: database, tls: tls)
        }
        configuration.options.maximumConnections = maximumConnections
        configuration.options.connectTimeout = .seconds(10)
        // The message path's named statements (``PreparedSQL``) are planned once per connection, for any list: a
        // plan made for one batch's values (PostgreSQL's default for the first five) is planning paid per batch.
        configuration.options.additionalStartupParameters = [
            ("application_name", applicationName), ("plan_cache_mode", "force_generic_plan"),
        ]
        return configuration
    }

    /// The configuration of a single postgres-nio connection (the store uses one for its start-up checks and
    /// migrations; tools and tests for administration, e.g. `CREATE DATABASE`).
    public func connectionConfiguration(connectTimeout: Duration) throws -> PostgresConnection.Configuration {
        var configuration: PostgresConnection.Configuration
        if let unixSocketPath {
            configuration = .init(
                unixSocketPath: unixSocketPath, username: username, password: password, database: database)
        } else {
            let tls: PostgresConnection.Configuration.TLS
            switch (tlsMode, try tlsConfiguration()) {
            case (.disable, _), (_, nil): tls = .disable
            case (.prefer, let config?): tls = .prefer(try NIOSSLContext(configuration: config))
            case (_, let config?): tls = .require(try NIOSSLContext(configuration: config))
            }
            configuration = .init(
                host: host, port: port, username: username, password: password, database: database, tls: tls)
        }
        let (seconds, attoseconds) = connectTimeout.components
        configuration.options.connectTimeout = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        configuration.options.additionalStartupParameters = [("application_name", applicationName)]
        return configuration
    }
}
