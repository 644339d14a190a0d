import Foundation
import NIOConcurrencyHelpers
import Parley

extension ParleyClient {
    /// Waits until the connection status satisfies `matches` (checked at once, then at every change).
    public func waitForStatus(_ matches: @Sendable (ConnectionStatus) -> Bool) async -> ConnectionStatus {
        let updates = connectionStatusUpdates()
        let now = connectionStatus
        if matches(now) { return now }
        for await status in updates where matches(status) { return status }
        return connectionStatus
    }

    /// Waits until connected.
    public func waitUntilConnected() async {
        _ = await waitForStatus { $0 == .connected }
    }
}

/// Test settings: a server, a fresh storage directory, and the callback queue of the test's choice.
public func testSettings(
    server: TestServer, storage: TemporaryDirectory? = nil, autoConnect: Bool = true,
    tuning: ConnectionTuning = ConnectionTuning()
) throws -> AppSettings {
    try testSettings(serverURL: server.baseURL, storage: storage, autoConnect: autoConnect, tuning: tuning)
}

/// Settings for a client of the server at `serverURL` (a node, or a proxy in front of nodes).
public func testSettings(
    serverURL: URL, storage: TemporaryDirectory? = nil, autoConnect: Bool = true,
    tuning: ConnectionTuning = ConnectionTuning()
) throws -> AppSettings {
    AppSettings.Builder()
        .serverURL(serverURL)
        .storageDirectory(try (storage ?? TemporaryDirectory(prefix: "parley-sdk")).url)
        .autoEstablishSocketConnection(autoConnect)
        .connectionTuning(tuning)
        .build()
}

/// A listener that records what it receives, in order, and lets a test await it.
public final class RecordingListener: ParleyEventListener, ConnectionListener {
    private let events = NIOLockedValueBox<[Event]>([])
    private let statuses = NIOLockedValueBox<[ConnectionStatus]>([])
    private let eventStream: AsyncStream<Event>
    private let eventSink: AsyncStream<Event>.Continuation

    public init() {
        (eventStream, eventSink) = AsyncStream.makeStream(of: Event.self)
    }

    public func onEvent(_ event: Event) {
        events.withLockedValue { $0.append(event) }
        eventSink.yield(event)
    }

    public func onStatusChanged(_ status: ConnectionStatus) {
        statuses.withLockedValue { $0.append(status) }
    }

    public var receivedEvents: [Event] { events.withLockedValue { $0 } }
    public var receivedStatuses: [ConnectionStatus] { statuses.withLockedValue { $0 } }

    /// Waits for the next event satisfying `matches`.
    public func next(where matches: (Event) -> Bool = { _ in true }) async -> Event? {
        for await event in eventStream where matches(event) { return event }
        return nil
    }
}
