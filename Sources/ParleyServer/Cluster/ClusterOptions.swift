import Logging
import NATSNIO
import ParleyStore
import ServiceLifecycle

/// A node of several (``NodeRole/clustered(_:)``).
public struct ClusterOptions: Sendable {
    /// The NATS servers, `nats://HOST:PORT[,nats://...]` (credentials as `nats://user:password@host:port`).
    public var natsURL: String
    /// The database's side of the cluster: the deployment's id and claim, and the reads that fill gaps.
    public var store: any ClusterStore
    /// How often the node says it is alive on NATS (and announces what acknowledges the others).
    public var heartbeatInterval: Duration = .seconds(1)
    /// Silence after which the other nodes declare a node dead and its users offline.
    public var nodeTimeout: Duration = .seconds(5)
    /// How long a conversation stays followed after its last participant connected here left.
    public var linger: Duration = .seconds(30)
    /// How often every followed conversation is checked against the database.
    public var sweepInterval: Duration = .seconds(10)

    public init(natsURL: String, store: any ClusterStore) {
        self.natsURL = natsURL
        self.store = store
    }
}
