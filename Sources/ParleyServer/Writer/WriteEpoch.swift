import NIOConcurrencyHelpers

/// Counts the command writer's batches, so that a reader can tell that nothing was written between two points of its
/// own: a WebSocket handshake reads its starting positions, registers the connection, and then needs to know whether
/// anything was committed in between (see ``WebSocketGateway/replayPlan(principal:resume:baseline:quietMark:inline:)``).
///
/// A batch counts as started before its transaction begins and as finished once its events are published and its
/// callers answered. A ``Mark`` is taken only when every started batch has finished; ``unchanged(since:)`` is true
/// when none has started since. Between the two, then, nothing this writer stores was committed, and whatever it
/// commits later is published after the reader's later steps. The counters are behind a lock, not atomics: a reader
/// that sees no new batch in ``unchanged(since:)`` did what it did before that call (registering a connection with the
/// hub) before the next batch starts, in the lock's order, so that batch's publication sees it.
///
/// Only the writer's batches are counted: this says nothing of what another process or another node writes.
final class WriteEpoch: Sendable {
    /// The number of batches started when every one of them had finished.
    struct Mark: Sendable, Hashable {
        fileprivate var started: UInt64
    }

    private struct Counts {
        var started: UInt64 = 0
        var finished: UInt64 = 0
    }

    private let counts = NIOLockedValueBox(Counts())

    /// Called before a batch's transaction begins.
    func batchStarted() {
        counts.withLockedValue { $0.started += 1 }
    }

    /// Called once a batch's events are published and its callers answered (or it failed).
    func batchFinished() {
        counts.withLockedValue { $0.finished += 1 }
    }

    /// Now, if no batch is being stored or published; nil while one is.
    func quietMark() -> Mark? {
        counts.withLockedValue { $0.started == $0.finished ? Mark(started: $0.started) : nil }
    }

    /// The batches started and finished so far.
    var batches: (started: UInt64, finished: UInt64) {
        counts.withLockedValue { ($0.started, $0.finished) }
    }

    /// Whether no batch started since `mark` was taken.
    func unchanged(since mark: Mark) -> Bool {
        counts.withLockedValue { $0.started == mark.started }
    }
}
