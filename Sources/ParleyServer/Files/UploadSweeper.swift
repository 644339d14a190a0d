import Logging
import NIOConcurrencyHelpers
import ParleyStore
import ServiceLifecycle

/// Removes uploads that no message carries within ``retention`` of their upload: their records, then their bytes
/// (docs/BENCHMARKS.md, appendix "Design notes", "Files"). It looks every ``interval`` (on the server's timeline: virtual in tests). Each
/// record goes only while no message carries it (the store's conditional delete), so a message that takes an upload
/// at the last moment keeps it; the bytes go after the record. Every node of a deployment sweeps; two removing the
/// same upload is harmless.
final class UploadSweeper: Service {
    let store: any ParleyStore
    let blobs: any BlobStore
    let retention: Duration
    let interval: Duration
    private let time: ServerClock
    private let logger: Logger
    private let stopping = NIOLockedValueBox(false)
    static let batch = 100

    init(
        store: any ParleyStore, blobs: any BlobStore, retention: Duration, interval: Duration, time: ServerClock,
        logger: Logger
    ) {
        self.store = store
        self.blobs = blobs
        self.retention = retention
        self.interval = interval
        self.time = time
        self.logger = logger
    }

    func run() async throws {
        let timeline = time.timeline
        let interval = interval
        await withGracefulShutdownHandler {
            while !stopping.withLockedValue({ $0 }), !Task.isCancelled {
                _ = await sweep()
                // The wait ends at once on shutdown.
                try? await cancelWhenGracefulShutdown { try await timeline.sleep(for: interval) }
            }
        } onGracefulShutdown: {
            self.stopping.withLockedValue { $0 = true }
        }
    }

    /// One pass over everything that is due; how many uploads it removed.
    @discardableResult
    func sweep() async -> Int {
        let cutoff = time.epochMilliseconds() - retention.wholeMilliseconds
        var removed = 0
        do {
            while !stopping.withLockedValue({ $0 }), !Task.isCancelled {
                let due = try await store.unattachedAttachments(createdBefore: cutoff, limit: Self.batch)
                for record in due {
                    guard try await store.deleteAttachment(appId: record.appId, id: record.id, unattachedOnly: true)
                    else { continue }
                    try await blobs.delete(try BlobKey(record.blobKey))
                    removed += 1
                }
                if due.count < Self.batch { break }
            }
        } catch {
            logger.warning("Files: removing abandoned uploads failed", metadata: ["error": "\(error)"])
        }
        if removed > 0 { logger.info("Files: removed \(removed) upload(s) no message took") }
        return removed
    }
}
