import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import ParleyProtocol
import ParleyStore
import PostgresNIO

/// What the nodes of a deployment read from the database besides the store itself (``ClusterStore``): the events that
/// fill a gap in what NATS delivered, with their recipients, and the claim that keeps a node without NATS alone.
extension PostgresStore: ClusterStore {
    /// The advisory lock a node holds for as long as it serves the database ("parley.nodes"): exclusively without
    /// NATS, shared with NATS.
    static let deploymentLockKey: Int64 = 0x7061_726C_6579_4E31

    public func deploymentId() async throws -> String {
        guard let id = try await rows("SELECT id FROM deployment").first?.decode(String.self) else {
            throw PostgresStoreError(.database, "The deployment table is empty: the schema was not migrated.")
        }
        return id
    }

    public func claimDeployment(shared: Bool) async throws -> any DeploymentClaim {
        let connection = try await PostgresConnection.connect(
            configuration: try url.connectionConfiguration(connectTimeout: .seconds(10)), id: 1, logger: logger
        )
        do {
            let function = shared ? "pg_try_advisory_lock_shared" : "pg_try_advisory_lock"
            let taken = try await connection.query(
                "SELECT \(unescaped: function)(\(Self.deploymentLockKey))", logger: logger
            ).collect().first?.decode(Bool.self)
            guard taken != true else { return PostgresDeploymentClaim(connection: connection, logger: logger) }
            // Who holds it: nodes with NATS share the lock (a shared claim succeeds), a node without holds it alone.
            var heldAlone = true
            if !shared {
                heldAlone =
                    try await connection.query(
                        "SELECT pg_try_advisory_lock_shared(\(Self.deploymentLockKey))", logger: logger
                    ).collect().first?.decode(Bool.self) != true
            }
            throw heldAlone
                ? DeploymentClaimError(
                    heldAlone: true,
                    description:
                        "ERR_DATABASE_CLAIMED: a node without NATS serves this database (\(url)): several nodes need "
                        + "--nats-url, the same NATS cluster on every one of them; stop that node or give it --nats-url"
                )
                : DeploymentClaimError(
                    heldAlone: false,
                    description:
                        "ERR_DATABASE_CLAIMED: other nodes serve this database (\(url)) with NATS: a node without "
                        + "--nats-url cannot hear them; start this one with their --nats-url, or stop them")
        } catch {
            try? await connection.close()
            throw error
        }
    }

    public func routedEvents(appId: String, conversationId: String, afterSeq: Int64, throughSeq: Int64, limit: Int)
        async throws -> [RoutedEvent]
    {
        let eventRows = try await rows(
            """
            SELECT e.body FROM events e JOIN conversations c ON c.pk = e.conversation_pk
            WHERE c.id = \(conversationId) AND c.app_id = \(appId) AND e.seq > \(afterSeq) AND e.seq <= \(throughSeq)
            ORDER BY e.seq LIMIT \(limit)
            """
        )
        let decoder = JSONDecoder()
        let events = try eventRows.map { row in
            let json = Array(try row.decode(ByteBuffer.self).readableBytesView)
            return StoredEvent(event: try decoder.decode(Event.self, from: Data(json)), json: json)
        }
        guard let first = events.first?.event.seq else { return [] }
        // The participants now and every join or departure since the first event, in one statement (one snapshot):
        // undoing the changes made after an event gives the participants at that event.
        let membershipRows = try await rows(
            """
            WITH c AS (SELECT pk FROM conversations WHERE id = \(conversationId) AND app_id = \(appId))
            SELECT p.uid, NULL::boolean, NULL::bigint FROM participants p, c WHERE p.conversation_pk = c.pk
            UNION ALL
            SELECT m.uid, m.joined, m.seq FROM memberships m, c WHERE m.conversation_pk = c.pk AND m.seq >= \(first)
            """
        )
        var members = Set<String>()
        var changes: [(uid: String, joined: Bool, seq: Int64)] = []
        for row in membershipRows {
            let (uid, joined, seq) = try row.decode((String, Bool?, Int64?).self)
            if let joined, let seq { changes.append((uid, joined, seq)) } else { members.insert(uid) }
        }
        return Self.route(events, members: members, changes: changes)
    }

    /// Gives each event (ascending) its recipients from the participants now and the changes at or after the first
    /// event: the participants after every change up to the event, whoever left by the event itself, and the user a
    /// ban or an unban names.
    static func route(
        _ events: [StoredEvent], members current: Set<String>, changes: [(uid: String, joined: Bool, seq: Int64)]
    ) -> [RoutedEvent] {
        var members = current
        // Newest first: undo changes while walking the events backwards.
        let undo = changes.sorted { $0.seq > $1.seq }
        var next = undo.startIndex
        var routed: [RoutedEvent] = []
        routed.reserveCapacity(events.count)
        for stored in events.reversed() {
            let seq = stored.event.seq ?? 0
            while next < undo.endIndex, undo[next].seq > seq {
                if undo[next].joined { members.remove(undo[next].uid) } else { members.insert(undo[next].uid) }
                next += 1
            }
            var recipients = members
            for change in undo[next...].prefix(while: { $0.seq == seq }) where !change.joined {
                recipients.insert(change.uid)
            }
            // A ban or an unban also reaches the user it names, who is not (or no longer) a participant.
            switch stored.event.payload {
            case .participantBanned(let ban), .participantUnbanned(let ban): recipients.insert(ban.uid)
            default: break
            }
            routed.append(RoutedEvent(stored: stored, recipients: recipients.sorted()))
        }
        return routed.reversed()
    }

    public func lastSeqs(_ conversations: [ConversationRef]) async throws -> [ConversationRef: Int64] {
        var positions: [ConversationRef: Int64] = [:]
        var start = conversations.startIndex
        while start < conversations.endIndex {
            let chunk = conversations[start..<min(start + 5_000, conversations.endIndex)]
            start = chunk.endIndex
            let rows = try await rows(
                """
                SELECT c.app_id, c.id, c.last_seq FROM unnest(\(chunk.map(\.conversationId))) AS u(id)
                JOIN conversations c ON c.id = u.id
                """
            )
            let wanted = Set(chunk)
            for row in rows {
                let (appId, id, lastSeq) = try row.decode((String, String, Int64).self)
                let key = ConversationRef(appId: appId, conversationId: id)
                if wanted.contains(key) { positions[key] = lastSeq }
            }
        }
        return positions
    }

    public func membershipChanges(_ users: [UserRef: Int64], limit: Int) async throws -> MembershipChanges {
        let ordered = users.sorted { ($0.key.appId, $0.key.uid) < ($1.key.appId, $1.key.uid) }
        guard !ordered.isEmpty else { return MembershipChanges(changes: [:], incomplete: []) }
        let rows = try await rows(
            """
            SELECT u.app_id, u.uid, m.user_seq, c.id, m.joined, m.seq
            FROM unnest(\(ordered.map(\.key.appId)), \(ordered.map(\.key.uid)), \(ordered.map(\.value)))
                AS u(app_id, uid, after)
            JOIN memberships m ON m.app_id = u.app_id AND m.uid = u.uid AND m.user_seq > u.after
            JOIN conversations c ON c.pk = m.conversation_pk
            ORDER BY u.app_id, u.uid, m.user_seq
            LIMIT \(limit + 1)
            """
        )
        var changes: [UserRef: [MembershipChange]] = [:]
        var incomplete = Set<UserRef>()
        for (index, row) in rows.enumerated() {
            let (appId, uid, userSeq, conversationId, joined, seq) = try row.decode(
                (String, String, Int64, String, Bool, Int64).self)
            let user = UserRef(appId: appId, uid: uid)
            if index == limit {
                // One more than fits: this user's changes are cut (and every later user's are not read at all).
                incomplete.insert(user)
                let cut = ordered.firstIndex { $0.key == user } ?? ordered.endIndex
                for (later, _) in ordered[cut...] { incomplete.insert(later) }
                break
            }
            changes[user, default: []].append(
                MembershipChange(userSeq: userSeq, conversationId: conversationId, joined: joined, seq: seq))
        }
        for user in incomplete { changes[user] = nil }
        return MembershipChanges(changes: changes, incomplete: incomplete)
    }
}

/// A claim held by a connection of its own, outside the pool: PostgreSQL releases a session's advisory locks when
/// the session ends, so a node that dies (or loses the database) gives its claim up by itself.
final class PostgresDeploymentClaim: DeploymentClaim {
    private let connection: PostgresConnection
    private let logger: Logger

    init(connection: PostgresConnection, logger: Logger) {
        self.connection = connection
        self.logger = logger
    }

    /// How long the check may take: a connection the server ended while a query was on its way can leave the query
    /// unanswered (seen under load), and the claim's keeper must not wait on it forever.
    static let checkTimeout: TimeAmount = .seconds(5)

    func isHeld() async -> Bool {
        if connection.isClosed { return false }
        let waiting = NIOLockedValueBox<CheckedContinuation<Bool, Never>?>(nil)
        let finish: @Sendable (Bool) -> Void = { held in
            waiting.withLockedValue { continuation in
                continuation?.resume(returning: held)
                continuation = nil
            }
        }
        return await withCheckedContinuation { continuation in
            waiting.withLockedValue { $0 = continuation }
            connection.eventLoop.scheduleTask(in: Self.checkTimeout) { finish(false) }
            // Not awaited by the caller past the timeout: a query that never answers ends with the connection, which
            // the keeper closes (``release()``) once it finds the claim gone.
            let (connection, logger) = (self.connection, self.logger)
            Task { finish((try? await connection.query("SELECT 1", logger: logger).collect()) != nil) }
        }
    }

    /// Unlocks within the session, then closes it. Closing alone releases the lock only when the server's backend has
    /// ended, which under load came after a node starting next had already found the claim held. The unlock waits at
    /// most ``checkTimeout``: a connection that no longer answers is closed anyway.
    func release() async {
        if !connection.isClosed {
            let waiting = NIOLockedValueBox<CheckedContinuation<Void, Never>?>(nil)
            let finish: @Sendable () -> Void = {
                waiting.withLockedValue { continuation in
                    continuation?.resume()
                    continuation = nil
                }
            }
            await withCheckedContinuation { continuation in
                waiting.withLockedValue { $0 = continuation }
                connection.eventLoop.scheduleTask(in: Self.checkTimeout) { finish() }
                let (connection, logger) = (self.connection, self.logger)
                Task {
                    _ = try? await connection.query("SELECT pg_advisory_unlock_all()", logger: logger).collect()
                    finish()
                }
            }
        }
        try? await connection.close()
    }
}
