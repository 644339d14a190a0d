import Logging
import NATSNIO
import ParleyStore
import ServiceLifecycle

/// How a server shares its database with other servers (``buildApplication(_:store:role:clock:logger:onServerRunning:onMetricsRunning:)``).
public enum NodeRole: Sendable {
    /// The only server of its database. With a PostgreSQL store (its ``ClusterStore``), the database is claimed for
    /// this node alone: a second node without NATS, or nodes with it, are refused while it runs.
    case alone(claiming: (any ClusterStore)?)
    /// One node of several on one PostgreSQL database, meeting the others on NATS.
    case clustered(ClusterOptions)

    /// A single node with nothing to claim (SQLite).
    public static let single = NodeRole.alone(claiming: nil)
}

/// An invalid `--nats-url`.
public struct NATSURLError: Error, CustomStringConvertible {
    public var description: String
}

extension ClusterOptions {
    /// The NATS servers of ``natsURL``.
    func servers() throws -> [NATSServerAddress] {
        do {
            return try NATSConfiguration.parseServers(natsURL)
        } catch {
            throw NATSURLError(description: "Invalid --nats-url: \(error.message)")
        }
    }
}
