import Foundation
import Logging
import NIOConcurrencyHelpers

/// Delivers the socket's events to listeners in order, exactly once, with nothing missing.
///
/// Frames go in from the connection driver as they arrive; ``run()`` takes them one at a time:
/// - a durable event already delivered (its `seq` is not above the conversation's position) is dropped;
/// - a durable event after a gap waits until the missing ones are fetched over REST (`GET .../events?after=`)
///   and delivered; when they cannot be fetched the event is dropped and the socket reconnected, so that the
///   server replays from the position (the `resume` of the next `connect`);
/// - `caughtUp` and `resync` frames move the positions and reach listeners as `parley.caughtUp` and
///   `parley.resyncRequired` events.
/// Positions are saved after each event, so a new client over the same folder resumes where this one stopped.
final class EventPipeline: Sendable {
    /// Fetches a conversation's events `after < seq <= through`, ascending (fewer when the server has fewer).
    typealias Backfill = @Sendable (_ conversationId: String, _ after: Int64, _ through: Int64) async throws -> [Event]

    private let inputs: AsyncStream<ServerFrame>
    private let sink: AsyncStream<ServerFrame>.Continuation
    private let cursors: NIOLockedValueBox<StreamCursors?>
    private let store: CursorStore
    private let appId: String
    private let backfill: Backfill
    private let publish: @Sendable (Event) -> Void
    private let reconnect: @Sendable () async -> Void
    private let logger: Logger
    private let syntheticCount = NIOLockedValueBox(0)

    init(
        appId: String, store: CursorStore, backfill: @escaping Backfill, publish: @escaping @Sendable (Event) -> Void,
        reconnect: @escaping @Sendable () async -> Void, logger: Logger
    ) {
        (inputs, sink) = AsyncStream.makeStream(of: ServerFrame.self)
        self.appId = appId
        self.store = store
        self.cursors = NIOLockedValueBox(nil)
        self.backfill = backfill
        self.publish = publish
        self.reconnect = reconnect
        self.logger = logger
    }

    // MARK: Inputs (any thread)

    /// Queues a frame from the socket (events, `caughtUp`, `resync`).
    func receive(_ frame: ServerFrame) { sink.yield(frame) }

    /// Starts following `uid`'s streams from their saved positions (none for a first login).
    func begin(uid: String) {
        let saved = store.load(uid: uid) ?? StreamCursors(uid: uid)
        cursors.withLockedValue { $0 = saved }
    }

    /// Stops following the user and forgets the saved positions (logout).
    func end() {
        cursors.withLockedValue { $0 = nil }
        store.clear()
    }

    /// What the next `connect` asks the server to replay.
    var resumeRequest: ResumeRequest? { cursors.withLockedValue { $0?.resumeRequest } }

    /// The current positions (for tests and diagnostics).
    var positions: StreamCursors? { cursors.withLockedValue { $0 } }

    /// Ends ``run()``.
    func finish() { sink.finish() }

    // MARK: Processing (one task)

    func run() async {
        for await frame in inputs {
            switch frame {
            case .event(let frame): await handle(frame.event)
            case .caughtUp(let caughtUp):
                update { $0.caughtUp(caughtUp) }
                publish(synthetic(.caughtUp, .caughtUp(caughtUp), conversationId: nil))
            case .resync(let resync):
                update { $0.resync(resync) }
                publish(synthetic(.resyncRequired, .resyncRequired(resync), conversationId: resync.conversationId))
            case .hello, .ack, .error, .pong:
                break
            }
        }
    }

    private func handle(_ event: Event) async {
        guard let conversationId = event.conversationId, let seq = event.seq else {
            publish(event)  // ephemeral: typing, receipts, presence, profile, unread
            return
        }
        guard let decision = cursors.withLockedValue({ $0?.decide(conversationId: conversationId, seq: seq) }) else {
            return  // logged out
        }
        switch decision {
        case .duplicate:
            return
        case .deliver:
            deliver(event)
        case .gap(let after, let through):
            logger.info("Gap in \(conversationId): have \(after), got \(seq); fetching the missing events")
            let missing: [Event]
            do {
                missing = try await backfill(conversationId, after, through)
            } catch {
                logger.warning("Could not fetch missed events of \(conversationId): \(error); reconnecting to resume")
                await reconnect()
                return
            }
            for earlier in missing {
                guard let earlierSeq = earlier.seq,
                    cursors.withLockedValue({ $0?.decide(conversationId: conversationId, seq: earlierSeq) }) == .deliver
                else { continue }
                deliver(earlier)
            }
            if cursors.withLockedValue({ $0?.decide(conversationId: conversationId, seq: seq) }) != .deliver {
                // The server no longer has them: say so rather than pretend.
                let resync = ResyncFrame(conversationId: conversationId, reason: .historyTrimmed, lastSeq: through)
                update { $0.resync(resync) }
                publish(synthetic(.resyncRequired, .resyncRequired(resync), conversationId: conversationId))
            }
            deliver(event)
        }
    }

    private func deliver(_ event: Event) {
        update { $0.delivered(event) }
        publish(event)
    }

    private func update(_ change: (inout StreamCursors) -> Void) {
        let changed = cursors.withLockedValue { cursors -> StreamCursors? in
            guard var current = cursors else { return nil }
            change(&current)
            cursors = current
            return current
        }
        guard let changed else { return }
        do {
            try store.save(changed)
        } catch {
            logger.error("\(error)")
        }
    }

    private func synthetic(_ name: EventName, _ payload: EventPayload, conversationId: String?) -> Event {
        let number = syntheticCount.withLockedValue { count -> Int in
            count += 1
            return count
        }
        return Event(
            id: "\(name.rawValue):\(number)", appId: appId, name: name, conversationId: conversationId,
            timestamp: Int64((Date().timeIntervalSince1970 * 1000).rounded()), context: EventContext(),
            payload: payload
        )
    }
}
