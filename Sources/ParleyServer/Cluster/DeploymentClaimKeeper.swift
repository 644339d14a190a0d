import Logging
import NATSNIO
import ParleyStore
import ServiceLifecycle

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
