import NIOCore
import ParleyProtocol
import ParleyStore

/// Delivers what is not stored (typing, presence, unread counts, profile updates) and closes sockets: on this node at
/// once, and on every other node through the cluster link when there is one.
///
/// Signals leave this node in the order they were made (one sender task), so a typing indicator never reaches another
/// node's connections after its own "off".
final class Relay: Sendable {
    private let hub: Hub
    private let link: (any ClusterLink)?
    private let outgoing: AsyncStream<ClusterSignal>
    private let sink: AsyncStream<ClusterSignal>.Continuation
    init(hub: Hub, link: (any ClusterLink)?) {
        self.hub = hub
        self.link = link
        (outgoing, sink) = AsyncStream.makeStream(of: ClusterSignal.self)
    }

    /// Builds an event that is not stored and delivers it to the connections of `uids`, on every node. With
    /// `presenceOf`, also to the app's connections that subscribed to every user's presence, except that user's and
    /// those of `except`.
    func deliver(
        appId: String, conversationId: String? = nil, actor: String?, timestamp: Int64, payload: EventPayload,
        to uids: [String], presenceOf: String? = nil, except: [String] = []
    ) {
        guard let json = EphemeralEvents.json(
            appId: appId, conversationId: conversationId, actor: actor, timestamp: timestamp, payload: payload
        ) else { return }
        deliver(json: json, appId: appId, to: uids, presenceOf: presenceOf, except: except)
    }

    /// Whether some connection, here or (with several nodes) on another node, may receive every user's presence in
    /// the app: then a presence change must know who blocked its user.
    func mayHavePresenceSubscribers(appId: String) -> Bool {
        link != nil || !hub.presenceSubscribers(appId: appId).isEmpty
    }

    /// Delivers an encoded event that is not stored (a receipt, say) to the connections of `uids`, on every node.
    func deliver(json: [UInt8], appId: String, to uids: [String], presenceOf: String? = nil, except: [String] = []) {
        deliverHere(
            FrameEncoding.eventFrame(json: json), appId: appId, uids: uids, presenceOf: presenceOf, except: except)
        if link != nil {
            sink.yield(
                .deliver(
                    appId: appId, uids: uids, presenceOf: presenceOf, except: except.isEmpty ? nil : except,
                    event: String(decoding: json, as: UTF8.self)
                )
            )
        }
    }

    /// Closes a user's connections (those opened with `tokenIds`, or all), on every node.
    func close(appId: String, uid: String, tokenIds: Set<String>?, code: UInt16, reason: ErrorCode) {
        hub.close(appId: appId, uid: uid, tokenIds: tokenIds, code: code, reason: reason)
        if link != nil {
            sink.yield(.close(appId: appId, uid: uid, tokenIds: tokenIds.map { $0.sorted() }, code: code, reason: reason.rawValue))
        }
    }

    /// Applies a signal from another node to this node's connections.
    func apply(_ signal: ClusterSignal) {
        switch signal {
        case .deliver(let appId, let uids, let presenceOf, let except, let event):
            deliverHere(
                FrameEncoding.eventFrame(json: Array(event.utf8)), appId: appId, uids: uids, presenceOf: presenceOf,
                except: except ?? []
            )
        case .close(let appId, let uid, let tokenIds, let code, let reason):
            hub.close(
                appId: appId, uid: uid, tokenIds: tokenIds.map(Set.init), code: code,
                reason: ErrorCode(rawValue: reason)
            )
        }
    }

    /// Sends this node's signals to the others, in order, until the stream ends.
    func sendSignals() async {
        guard let link else { return }
        for await signal in outgoing { await link.broadcast(signal) }
    }

    /// Ends ``sendSignals()`` once what is queued has been sent.
    func finish() { sink.finish() }

    private func deliverHere(
        _ frame: ByteBuffer, appId: String, uids: [String], presenceOf: String?, except: [String] = []
    ) {
        guard let subject = presenceOf else {
            hub.deliver(frame, appId: appId, to: uids)
            return
        }
        var reached = Set<ObjectIdentifier>()
        var wakeUps = WakeUps()
        for connection in uids.flatMap({ hub.connections(appId: appId, uid: $0) }) + hub.presenceSubscribers(appId: appId)
        where connection.principal.uid != subject && !except.contains(connection.principal.uid)
            && reached.insert(ObjectIdentifier(connection)).inserted
        {
            wakeUps.push(frame, on: connection)
        }
        wakeUps.run()
    }
}
