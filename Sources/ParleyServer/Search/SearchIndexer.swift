import Logging
import NIOConcurrencyHelpers
import ParleyStore
import ServiceLifecycle

/// Files stored messages in the store's search index (``ParleyStore/fileSearchIndex(limit:)``): at start, whatever
/// is waiting (messages stored before the search existed, or, on SQLite, before a crash); then, on a store that files
/// after the commit (``StoreCapabilities/searchFiledAfterCommit``), the new messages the writer reports
/// (``messagesStored()``).
///
/// After filing it waits ``interval`` before it looks again: at a high rate it files a few hundred messages a few
/// times a second, and a report meanwhile only sets a flag (no wake-up per batch). It files ``chunk`` events per
/// call (SQLite: a read of the log, then a write of the index's own file, so the messages' writer never waits for it).
/// A message, an edit or a deletion reaches the index at most ``interval`` and the time to file what came before it
/// after its commit. A failure is logged and tried again an ``interval`` later.
final class SearchIndexer: Service {
    /// Events of the log filed per call.
    static let chunk = 512

    let store: any ParleyStore
    let interval: Duration
    private let time: ServerClock
    private let logger: Logger
    private let doorbell = Doorbell()
    private let stopping = NIOLockedValueBox(false)

    init(store: any ParleyStore, interval: Duration, time: ServerClock, logger: Logger) {
        self.store = store
        self.interval = interval
        self.time = time
        self.logger = logger
    }

    /// A batch stored new messages. Never blocks.
    func messagesStored() { doorbell.ring() }

    func run() async throws {
        let followsWriter = store.capabilities.searchFiledAfterCommit
        let timeline = time.timeline
        let interval = interval
        let doorbell = doorbell
        await withGracefulShutdownHandler {
            while !stopping.withLockedValue({ $0 }), !Task.isCancelled {
                let filedAll = await fileWaiting()
                if filedAll && !followsWriter {
                    // Nothing more to file: new messages are filed with their transaction. (A service that returns
                    // would stop the server.)
                    try? await gracefulShutdown()
                    break
                }
                // Both waits end at once on shutdown.
                try? await cancelWhenGracefulShutdown { try await timeline.sleep(for: interval) }
                if filedAll { await cancelWhenGracefulShutdown { await doorbell.wait() } }
            }
        } onGracefulShutdown: {
            self.stopping.withLockedValue { $0 = true }
        }
    }

    /// Files everything waiting; false when the store failed (tried again later).
    @discardableResult
    func fileWaiting() async -> Bool {
        var filed = 0
        defer { if filed > Self.chunk * 20 { logger.info("Search: filed \(filed) events") } }
        do {
            while !stopping.withLockedValue({ $0 }), !Task.isCancelled {
                let count = try await store.fileSearchIndex(limit: Self.chunk)
                filed += count
                if count < Self.chunk { return true }
            }
            return true
        } catch is CancellationError {
            return true
        } catch {
            logger.warning("Search: filing messages failed", metadata: ["error": "\(error)"])
            return false
        }
    }
}
