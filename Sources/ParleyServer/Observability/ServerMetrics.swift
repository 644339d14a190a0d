import CoreMetrics
import Foundation
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore
import Prometheus

/// The server's metrics (docs/PROTOCOL.md, "Metrics"), made through swift-metrics with one factory: by default a
/// ``PrometheusMetricsFactory`` over a registry of this server's own, so that several servers in one process (tests)
/// keep apart, and `GET /metrics` prints it. Hot paths pay one atomic add per event or per batch.
///
/// Values that are a state rather than a count (open connections, connections in setup, bytes queued) are read when
/// `/metrics` is scraped (``ServerMetrics/refreshGauges``), not kept up to date on every change.
final class ServerMetrics: Sendable {
    /// The registry `/metrics` prints; nil for ``discarding``.
    let registry: PrometheusCollectorRegistry?
    private let factory: any MetricsFactory

    /// `parley_build_info{version,commit}`: always 1; the release and commit a node runs, for dashboards and alerts
    /// across nodes.
    let buildInfo: CoreMetrics.Gauge
    /// 1 while `GET /health/ready` answers 200 (serving), 0 while starting or draining.
    let ready: CoreMetrics.Gauge
    /// Descriptors open and the limit (`process_open_fds`, `process_max_fds`: the names Prometheus clients use).
    let openFileDescriptors: CoreMetrics.Gauge
    let maxFileDescriptors: CoreMetrics.Gauge
    /// The data directory's file system: bytes free for the server and in all.
    let storageFreeBytes: CoreMetrics.Gauge
    let storageSizeBytes: CoreMetrics.Gauge
    /// Webhook endpoints this node disabled after too many failed attempts in a row.
    let webhookEndpointsDisabled: CoreMetrics.Counter
    let framesIn: CoreMetrics.Counter
    let framesOut: CoreMetrics.Counter
    let malformedFrames: CoreMetrics.Counter
    let messagesStored: CoreMetrics.Counter
    let commandsCommitted: CoreMetrics.Counter
    let commandBatchSize: CoreMetrics.Recorder
    let commitDuration: CoreMetrics.Timer
    let commitFailures: CoreMetrics.Counter
    let presenceChanges: CoreMetrics.Counter
    let typingEvents: CoreMetrics.Counter
    let databaseErrors: CoreMetrics.Counter
    let openConnections: CoreMetrics.Gauge
    let connectionsInSetup: CoreMetrics.Gauge
    let connectedUsers: CoreMetrics.Gauge
    let queuedBytes: CoreMetrics.Gauge
    let databaseInFlight: CoreMetrics.Gauge
    let databaseCapacity: CoreMetrics.Gauge
    /// Several nodes: events other nodes committed, received on NATS.
    let clusterEventsReceived: CoreMetrics.Counter
    /// Several nodes: events read from the database to fill a gap in what NATS brought.
    let clusterEventsRead: CoreMetrics.Counter
    /// Several nodes: messages this node published on NATS.
    let clusterMessagesPublished: CoreMetrics.Counter
    /// Several nodes: the other live nodes, the users online on them, the conversations this node follows, and
    /// whether it is connected to NATS.
    let clusterNodes: CoreMetrics.Gauge
    let clusterUsersElsewhere: CoreMetrics.Gauge
    let clusterConversationsFollowed: CoreMetrics.Gauge
    let clusterConnected: CoreMetrics.Gauge
    /// The store's failures already added to ``databaseErrors``.
    private let storeFailuresCounted = NIOLockedValueBox(0)

    private struct Keyed: Sendable {
        var closes: [UInt16: CoreMetrics.Counter] = [:]
        var push: [String: CoreMetrics.Counter] = [:]
        var webhooks: [String: CoreMetrics.Counter] = [:]
        var http: [HTTPKey: (CoreMetrics.Counter, CoreMetrics.Timer)] = [:]
    }

    struct HTTPKey: Hashable, Sendable {
        var route: String
        var method: String
        var status: Int
    }

    private let keyed = NIOLockedValueBox(Keyed())

    /// Metrics into a new Prometheus registry.
    static func prometheus() -> ServerMetrics {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.valueHistogramBuckets["parley_writer_batch_commands"] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
        let fast: [Duration] = [
            .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2),
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
            .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(5),
        ]
        factory.durationHistogramBuckets["parley_writer_commit_seconds"] = fast
        factory.durationHistogramBuckets["parley_http_request_duration_seconds"] = fast
        return ServerMetrics(factory: factory, registry: registry)
    }

    /// Metrics that go nowhere (components built without a server, in tests).
    static let discarding = ServerMetrics(factory: NOOPMetricsHandler.instance, registry: nil)

    init(factory: any MetricsFactory, registry: PrometheusCollectorRegistry?) {
        self.factory = factory
        self.registry = registry
        buildInfo = CoreMetrics.Gauge(
            label: "parley_build_info", dimensions: [("version", ServerBuild.version), ("commit", ServerBuild.commit)],
            factory: factory)
        buildInfo.record(1)
        ready = CoreMetrics.Gauge(label: "parley_ready", factory: factory)
        openFileDescriptors = CoreMetrics.Gauge(label: "process_open_fds", factory: factory)
        maxFileDescriptors = CoreMetrics.Gauge(label: "process_max_fds", factory: factory)
        storageFreeBytes = CoreMetrics.Gauge(label: "parley_storage_free_bytes", factory: factory)
        storageSizeBytes = CoreMetrics.Gauge(label: "parley_storage_size_bytes", factory: factory)
        webhookEndpointsDisabled = CoreMetrics.Counter(
            label: "parley_webhook_endpoints_disabled_total", factory: factory)
        framesIn = CoreMetrics.Counter(label: "parley_websocket_frames_received_total", factory: factory)
        framesOut = CoreMetrics.Counter(label: "parley_websocket_frames_sent_total", factory: factory)
        malformedFrames = CoreMetrics.Counter(label: "parley_websocket_malformed_frames_total", factory: factory)
        messagesStored = CoreMetrics.Counter(label: "parley_messages_stored_total", factory: factory)
        commandsCommitted = CoreMetrics.Counter(label: "parley_writer_commands_total", factory: factory)
        commandBatchSize = CoreMetrics.Recorder(label: "parley_writer_batch_commands", factory: factory)
        commitDuration = CoreMetrics.Timer(label: "parley_writer_commit_seconds", factory: factory)
        commitFailures = CoreMetrics.Counter(label: "parley_writer_failed_batches_total", factory: factory)
        presenceChanges = CoreMetrics.Counter(label: "parley_presence_changes_total", factory: factory)
        typingEvents = CoreMetrics.Counter(label: "parley_typing_events_total", factory: factory)
        databaseErrors = CoreMetrics.Counter(label: "parley_database_errors_total", factory: factory)
        openConnections = CoreMetrics.Gauge(label: "parley_websocket_connections", factory: factory)
        connectionsInSetup = CoreMetrics.Gauge(label: "parley_connections_in_setup", factory: factory)
        connectedUsers = CoreMetrics.Gauge(label: "parley_connected_users", factory: factory)
        queuedBytes = CoreMetrics.Gauge(label: "parley_websocket_queued_bytes", factory: factory)
        databaseInFlight = CoreMetrics.Gauge(label: "parley_database_operations_in_flight", factory: factory)
        databaseCapacity = CoreMetrics.Gauge(label: "parley_database_connections_max", factory: factory)
        clusterEventsReceived = CoreMetrics.Counter(label: "parley_cluster_events_received_total", factory: factory)
        clusterEventsRead = CoreMetrics.Counter(label: "parley_cluster_events_read_total", factory: factory)
        clusterMessagesPublished = CoreMetrics.Counter(
            label: "parley_cluster_messages_published_total", factory: factory)
        clusterNodes = CoreMetrics.Gauge(label: "parley_cluster_nodes", factory: factory)
        clusterUsersElsewhere = CoreMetrics.Gauge(label: "parley_cluster_users_elsewhere", factory: factory)
        clusterConversationsFollowed = CoreMetrics.Gauge(
            label: "parley_cluster_conversations_followed", factory: factory)
        clusterConnected = CoreMetrics.Gauge(label: "parley_cluster_connected", factory: factory)
    }

    /// A WebSocket ended with this close code (sent or received; 1006 when the socket went without one).
    func closed(code: UInt16) {
        keyed.withLockedValue { keyed in
            if let counter = keyed.closes[code] { return counter }
            let counter = CoreMetrics.Counter(
                label: "parley_websocket_closes_total", dimensions: [("code", "\(code)")], factory: factory
            )
            keyed.closes[code] = counter
            return counter
        }.increment()
    }

    /// A push notification's outcome: delivered, invalid_token, retry, given_up, rejected.
    func push(_ outcome: String) {
        counter(\.push, outcome, label: "parley_push_notifications_total").increment()
    }

    /// A webhook attempt's outcome: delivered, failed, given_up.
    func webhook(_ outcome: String) {
        counter(\.webhooks, outcome, label: "parley_webhook_attempts_total").increment()
    }

    private func counter(
        _ path: WritableKeyPath<Keyed, [String: CoreMetrics.Counter]>, _ outcome: String, label: String
    )
        -> CoreMetrics.Counter
    {
        keyed.withLockedValue { keyed in
            if let counter = keyed[keyPath: path][outcome] { return counter }
            let counter = CoreMetrics.Counter(label: label, dimensions: [("outcome", outcome)], factory: factory)
            keyed[keyPath: path][outcome] = counter
            return counter
        }
    }

    /// An HTTP request was answered (route: the router's pattern, not the path, so ids do not multiply the series).
    func httpRequest(route: String, method: String, status: Int, nanoseconds: Int64) {
        let key = HTTPKey(route: route, method: method, status: status)
        let (counter, timer) = keyed.withLockedValue { keyed in
            if let pair = keyed.http[key] { return pair }
            let dimensions = [("route", route), ("method", method), ("status", "\(status)")]
            let pair = (
                CoreMetrics.Counter(label: "parley_http_requests_total", dimensions: dimensions, factory: factory),
                CoreMetrics.Timer(
                    label: "parley_http_request_duration_seconds", dimensions: dimensions, factory: factory
                )
            )
            keyed.http[key] = pair
            return pair
        }
        counter.increment()
        timer.recordNanoseconds(nanoseconds)
    }

    /// Sets the database gauges from the store's figures, and adds its new failures to ``databaseErrors``.
    func record(_ activity: StoreActivity) {
        databaseInFlight.record(activity.inFlight)
        databaseCapacity.record(activity.capacity)
        let new = storeFailuresCounted.withLockedValue { counted -> Int in
            defer { counted = max(counted, activity.failures) }
            return max(0, activity.failures - counted)
        }
        if new > 0 { databaseErrors.increment(by: new) }
    }

    /// The Prometheus text of every metric, once `refresh` has set the gauges.
    func exposition(refresh: () -> Void) -> [UInt8] {
        refresh()
        var buffer: [UInt8] = []
        registry?.emit(into: &buffer)
        return buffer
    }
}

extension ServerMetrics {
    /// Reads, at a scrape, the gauges of the process and its data directory: readiness, descriptors, room on disk.
    func recordResources(ready isReady: Bool, dataDirectory: String) {
        ready.record(isReady ? 1 : 0)
        if let open = ProcessResources.openFileDescriptors() { openFileDescriptors.record(open) }
        if let limit = ProcessResources.maxFileDescriptors() { maxFileDescriptors.record(limit) }
        if let room = ProcessResources.fileSystem(of: dataDirectory) {
            storageFreeBytes.record(room.free)
            storageSizeBytes.record(room.size)
        }
    }
}
