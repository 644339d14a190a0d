import NIOConcurrencyHelpers
import ParleyProtocol

/// Closes WebSockets when their token expires (4001 `ERR_AUTH_TOKEN_INVALID`).
///
/// One timer on the server's timeline, set to the earliest expiry of all connections, instead of one sleeping task
/// per connection: an idle connection costs a heap entry here, not a task.
final class TokenExpiry: Sendable {
    /// A connection's place in the expiry order; ``remove(_:)`` takes it back.
    struct Ticket: Sendable, Hashable {
        fileprivate let number: UInt64
    }

    private struct Entry: Comparable, Sendable {
        var expiresAt: Int64
        var number: UInt64
        static func < (lhs: Entry, rhs: Entry) -> Bool {
            (lhs.expiresAt, lhs.number) < (rhs.expiresAt, rhs.number)
        }
    }

    private struct State {
        var heap = MinHeap<Entry>()
        var connections: [UInt64: (expiresAt: Int64, connection: ServerConnection)] = [:]
        var nextNumber: UInt64 = 0
        /// The expiry the timer is set for.
        var timerAt: Int64?

        /// Drops entries of removed connections from the top of the heap, and rebuilds it when it holds many of them.
        mutating func earliest() -> Int64? {
            if heap.count > 2 * connections.count + 1024 {
                heap = MinHeap(connections.map { Entry(expiresAt: $0.value.expiresAt, number: $0.key) })
            }
            while let top = heap.min, connections[top.number] == nil { heap.popMin() }
            return heap.min?.expiresAt
        }
    }

    private let time: ServerClock
    private let timers: KeyedTimers<Int>
    private let state = NIOLockedValueBox(State())

    init(time: ServerClock) {
        self.time = time
        self.timers = KeyedTimers(timeline: time.timeline)
    }

    /// Watches a connection whose token expires; nil for a token that does not.
    func add(_ connection: ServerConnection) -> Ticket? {
        guard let expiresAt = connection.principal.expiresAt else { return nil }
        return state.withLockedValue { state in
            state.nextNumber += 1
            let number = state.nextNumber
            state.connections[number] = (expiresAt, connection)
            state.heap.insert(Entry(expiresAt: expiresAt, number: number))
            if state.timerAt.map({ expiresAt < $0 }) ?? true { setTimer(at: expiresAt, &state) }
            return Ticket(number: number)
        }
    }

    /// Stops watching a connection (it closed).
    /// Connections watched (``ServerSnapshot``).
    var count: Int { state.withLockedValue { $0.connections.count } }

    func remove(_ ticket: Ticket) {
        _ = state.withLockedValue { $0.connections.removeValue(forKey: ticket.number) }
    }

    func cancelAll() {
        timers.cancelAll()
    }

    /// Closes every connection whose token has expired, then sets the timer for the next one.
    private func expire() {
        let now = time.epochMilliseconds()
        let due = state.withLockedValue { state -> [ServerConnection] in
            state.timerAt = nil
            var due: [ServerConnection] = []
            while let top = state.heap.min, top.expiresAt <= now {
                state.heap.popMin()
                if let entry = state.connections.removeValue(forKey: top.number) { due.append(entry.connection) }
            }
            if let next = state.earliest() { setTimer(at: next, &state) }
            return due
        }
        for connection in due {
            connection.requestClose(code: WebSocketCloseCode.authenticationFailed, reason: .authTokenInvalid)
        }
    }

    /// Sets the one timer (replacing it). Called under the state lock, so that two connections added at once cannot
    /// leave the later expiry set.
    private func setTimer(at expiresAt: Int64, _ state: inout State) {
        state.timerAt = expiresAt
        timers.schedule(0, at: .milliseconds(expiresAt - time.epochAtStart)) { [weak self] in self?.expire() }
    }
}
