import NIOCore
import ParleyProtocol
import ParleyStore

/// Delivers what is not stored (typing, presence, unread counts, profile updates) and closes sockets: on this node at
/// once, and, with several nodes, on the other nodes where the recipients are connected (``NATSCluster``).
///
/// Signals leave this node in the order they were made (NATS keeps the order of one connection's publications), so a
/// typing indicator never reaches another node's connections after its own "off".
final class Relay: Sendable {
    private let hub: Hub
    private let cluster: NATSCluster?

    init(hub: Hub, cluster: NATSCluster?) {
        self.hub = hub
        self.cluster = cluster
    }

    /// Builds an event that is not stored and delivers it to the connections of `uids`, on every node. With
    /// `presenceOf`, also to the app's connections that subscribed to every user's presence, except that user's and
    /// those of `except`.
    func deliver(
        appId: String, conversationId: String? = nil, actor: String?, timestamp: Int64, payload: EventPayload,
        to uids: [String], presenceOf: String? = nil, except: [String] = []
    ) {
        guard
            let json = EphemeralEvents.json(
                appId: appId, conversationId: conversationId, actor: actor, timestamp: timestamp, payload: payload
            )
        else { return }
        deliver(json: json, appId: appId, to: uids, presenceOf: presenceOf, except: except)
    }

    /// Whether some connection, here or (with several nodes) on another node, may receive every user's presence in
    /// the app: then a presence change must know who blocked its user.
    func mayHavePresenceSubscribers(appId: String) -> Bool {
        cluster != nil || !hub.presenceSubscribers(appId: appId).isEmpty
    }

    /// Delivers an encoded event that is not stored (a receipt, say) to the connections of `uids`, on every node.
    func deliver(json: [UInt8], appId: String, to uids: [String], presenceOf: String? = nil, except: [String] = []) {
        var wakeUps = WakeUps()
        deliver(json: json, appId: appId, to: uids, presenceOf: presenceOf, except: except, into: &wakeUps)
        wakeUps.run()
    }

    /// ``deliver(json:appId:to:presenceOf:except:)``, leaving this node's writers to wake in `wakeUps`.
    func deliver(
        json: [UInt8], appId: String, to uids: [String], presenceOf: String? = nil, except: [String] = [],
        into wakeUps: inout WakeUps
    ) {
        deliverHere(
            FrameEncoding.eventFrame(json: json), appId: appId, uids: uids, presenceOf: presenceOf, except: except,
            into: &wakeUps)
        cluster?.deliver(appId: appId, uids: uids, presenceOf: presenceOf, except: except, json: json)
    }

    /// Closes a user's connections (those opened with `tokenIds`, or all), on every node.
    func close(appId: String, uid: String, tokenIds: Set<String>?, code: UInt16, reason: ErrorCode) {
        hub.close(appId: appId, uid: uid, tokenIds: tokenIds, code: code, reason: reason)
        cluster?.close(
            appId: appId, uid: uid, tokenIds: tokenIds.map { $0.sorted() }, code: code, reason: reason.rawValue)
    }

    /// Applies a signal from another node to this node's connections.
    func apply(appId: String, uids: [String], presenceOf: String?, except: [String], json: [UInt8]) {
        var wakeUps = WakeUps()
        deliverHere(
            FrameEncoding.eventFrame(json: json), appId: appId, uids: uids, presenceOf: presenceOf, except: except,
            into: &wakeUps)
        wakeUps.run()
    }

    private func deliverHere(
        _ frame: ByteBuffer, appId: String, uids: [String], presenceOf: String?, except: [String],
        into wakeUps: inout WakeUps
    ) {
        guard let subject = presenceOf else {
            hub.deliver(CollectionOfOne(frame), appId: appId, to: uids, into: &wakeUps)
            return
        }
        var reached = Set<ObjectIdentifier>()
        for connection in uids.flatMap({ hub.connections(appId: appId, uid: $0) })
            + hub.presenceSubscribers(appId: appId)
        where connection.principal.uid != subject && !except.contains(connection.principal.uid)
            && reached.insert(ObjectIdentifier(connection)).inserted
        {
            wakeUps.push(frame, on: connection)
        }
    }
}
