import Foundation
import Logging
import NATSNIO
import NIOConcurrencyHelpers
import NIOCore
import ParleyTesting

@testable import ParleyServer

/// Listens to everything the nodes of a deployment say on NATS (`parley.>`) and decodes it, so that a test can wait
/// for what a node announced (a user's socket closed) and for another node to acknowledge it, instead of guessing.
final class ClusterObserver: Sendable {
    let connection: NATSConnection
    private let heard = NIOLockedValueBox<[ClusterMessage]>([])
    private let task: Task<Void, any Error>

    static func start(url: String) async throws -> ClusterObserver {
        let connection = NATSConnection(
            configuration: NATSConfiguration(servers: try NATSConfiguration.parseServers(url)),
            logger: Logger(label: "cluster-observer"))
        let observer = ClusterObserver(connection: connection)
        try await connection.waitUntilConnected(timeout: .seconds(30))
        let inbox = connection.makeInbox()
        _ = try connection.subscribe(to: "parley.>", into: inbox)
        try await connection.flush(timeout: .seconds(30))
        Task {
            for await message in inbox {
                if let decoded = ClusterWire.decode(message.payload) {
                    observer.heard.withLockedValue { $0.append(decoded) }
                }
            }
        }
        return observer
    }

    private init(connection: NATSConnection) {
        self.connection = connection
        task = Task { try await connection.run() }
    }

    var messages: [ClusterMessage] { heard.withLockedValue { $0 } }

    /// Waits until a message heard matches; it, or nil after `timeout`.
    func wait(
        timeout: Duration = .seconds(30), for matches: @escaping @Sendable (ClusterMessage) -> Bool
    ) async -> ClusterMessage? {
        var found: ClusterMessage?
        _ = await eventually(timeout: timeout) {
            found = messages.last(where: matches)
            return found != nil
        }
        return found
    }

    /// Waits until `node` announced `change` of one of its users, then until every other node that beats has
    /// applied that announcement (its heartbeat acknowledges it). Whether both happened.
    func waitUntilApplied(
        by others: [String], change matches: @escaping @Sendable (ClusterDirectory.Change) -> Bool,
        timeout: Duration = .seconds(30)
    ) async -> Bool {
        guard
            case .delta(let node, let seq, _) = await wait(
                timeout: timeout,
                for: { message in
                    if case .delta(_, _, let changes) = message { return changes.contains(where: matches) }
                    return false
                })
        else { return false }
        for other in others {
            let acknowledged = await wait(timeout: timeout) { message in
                if case .heartbeat(other, _, let acks, _) = message { return (acks[node] ?? 0) >= seq }
                return false
            }
            if acknowledged == nil { return false }
        }
        return true
    }

    /// The id of the node whose log says it joined (`Cluster node ID joined deployment`).
    static func nodeId(in log: String) -> String? {
        guard let range = log.range(of: #"Cluster node (n[0-9a-zA-Z]+) joined"#, options: .regularExpression) else {
            return nil
        }
        return String(log[range].split(separator: " ")[2])
    }

    func stop() async {
        task.cancel()
        _ = try? await task.value
    }
}
