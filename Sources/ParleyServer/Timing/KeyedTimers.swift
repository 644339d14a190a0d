import NIOConcurrencyHelpers
import ParleyProtocol

/// One-shot timers by key on a ``Timeline``: scheduling a key again replaces its timer, and an action runs only if
/// its timer was not replaced or cancelled in the meantime.
final class KeyedTimers<Key: Hashable & Sendable>: Sendable {
    private struct Entry {
        var id: UInt64
        var task: Task<Void, Never>
    }

    private struct State {
        var entries: [Key: Entry] = [:]
        var nextID: UInt64 = 0
    }

    let timeline: Timeline
    private let state = NIOLockedValueBox(State())

    init(timeline: Timeline) {
        self.timeline = timeline
    }

    /// Runs `action` at `deadline` (time on the timeline), replacing any timer of `key`.
    func schedule(_ key: Key, at deadline: Duration, _ action: @escaping @Sendable () -> Void) {
        let timeline = self.timeline
        state.withLockedValue { state in
            state.nextID += 1
            let id = state.nextID
            state.entries[key]?.task.cancel()
            let task = Task { [weak self] in
                guard (try? await timeline.sleepUntil(deadline)) != nil, let self else { return }
                let current = self.state.withLockedValue { state -> Bool in
                    guard state.entries[key]?.id == id else { return false }
                    state.entries[key] = nil
                    return true
                }
                if current { action() }
            }
            state.entries[key] = Entry(id: id, task: task)
        }
    }

    /// Cancels the timer of `key`; returns whether there was one.
    @discardableResult
    func cancel(_ key: Key) -> Bool {
        let entry = state.withLockedValue { $0.entries.removeValue(forKey: key) }
        entry?.task.cancel()
        return entry != nil
    }

    func isScheduled(_ key: Key) -> Bool {
        state.withLockedValue { $0.entries[key] != nil }
    }

    func cancelAll() {
        let entries = state.withLockedValue { state -> [Entry] in
            defer { state.entries = [:] }
            return Array(state.entries.values)
        }
        for entry in entries { entry.task.cancel() }
    }
}
