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

/// An invalid `--nats-url`.
public struct NATSURLError: Error, CustomStringConvertible {
    public var description: String
}

/// Keeps the node's claim on its database (``ClusterStore/claimDeployment(shared:)``): checks it every few seconds
/// and claims it again after its connection ended (the database restarted). Fails, stopping the server, if another
/// node took the database the other way meanwhile.
struct DeploymentClaimKeeper: Service {
    let store: any ClusterStore
    let shared: Bool
    let first: any DeploymentClaim
    let time: ServerClock
    let logger: Logger
    static let interval: Duration = .seconds(5)

    func run() async throws {
        var claim: (any DeploymentClaim)? = first
        do {
            try await keep(&claim)
        } catch {
            await claim?.release()
            throw error
        }
        await claim?.release()
    }

    private func keep(_ claim: inout (any DeploymentClaim)?) async throws {
        while !Task.isCancelled {
            do {
                try await cancelWhenGracefulShutdown { try await time.timeline.sleep(for: Self.interval) }
            } catch {
                return
            }
            if let held = claim, await held.isHeld() { continue }
            if let lost = claim {
                logger.warning("The claim on the database was lost (its connection ended); claiming it again")
                await lost.release()
                claim = nil
            }
            do {
                claim = try await store.claimDeployment(shared: shared)
                logger.notice("The claim on the database is held again")
            } catch let refused as DeploymentClaimError {
                logger.critical("Stopping: \(refused.description)")
                throw refused
            } catch {
                logger.warning("The database cannot be claimed yet", metadata: ["error": "\(error)"])
            }
        }
    }
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
