import NIOConcurrencyHelpers

/// Caps how many WebSocket handshakes the server works on at once: from a connection's `connect` frame (the token,
/// the user and the positions read, `hello`, the replay) until it is live, it holds one of `limit` slots; the others
/// wait, first come first served, with their socket unread.
///
/// A connection that was upgraded and has not sent `connect` holds nothing (it costs the server nothing while it is
/// silent), so silent sockets cannot starve anyone; a reconnection storm puts at most `limit` handshakes on the event
/// loops at once, so requests on established connections never wait behind thousands of them. A slot is held at most
/// ``maxHold`` (a client that does not read its replay cannot keep it).
final class HandshakeGate: Sendable {
    let limit: Int
    let maxHold: Duration

    /// One connection's place: waiting, then holding a slot, then released.
    struct Ticket: Hashable, Sendable {
        fileprivate let id: UInt64
    }

    private struct Waiter {
        var ticket: Ticket
        var granted: @Sendable () -> Void
    }

    private struct State {
        var nextID: UInt64 = 0
        var holding: Set<Ticket> = []
        /// Tickets in `queue` that still wait (a released waiter stays in the queue and is skipped).
        var waiting: Set<Ticket> = []
        var queue = FIFO<Waiter>()
    }

    private let state = NIOLockedValueBox(State())

    init(limit: Int, maxHold: Duration = .seconds(1)) {
        self.limit = limit
        self.maxHold = maxHold
    }

    /// Asks for a slot. Returns the ticket and whether the slot is held now; if not, `granted` is called (on the
    /// thread that frees a slot) when it is.
    func request(granted: @escaping @Sendable () -> Void) -> (Ticket, holding: Bool) {
        state.withLockedValue { state in
            state.nextID += 1
            let ticket = Ticket(id: state.nextID)
            if state.holding.count < limit {
                state.holding.insert(ticket)
                return (ticket, true)
            }
            state.waiting.insert(ticket)
            state.queue.append(Waiter(ticket: ticket, granted: granted))
            return (ticket, false)
        }
    }

    /// Gives the slot back, or leaves the queue. Idempotent; any thread.
    func release(_ ticket: Ticket) {
        let next = state.withLockedValue { state -> (@Sendable () -> Void)? in
            if state.waiting.remove(ticket) != nil { return nil }
            guard state.holding.remove(ticket) != nil else { return nil }
            while state.queue.count > 0 {
                let waiter = state.queue.removeFirst()
                guard state.waiting.remove(waiter.ticket) != nil else { continue }
                state.holding.insert(waiter.ticket)
                return waiter.granted
            }
            return nil
        }
        next?()
    }

    /// Slots held now.
    var inUse: Int { state.withLockedValue { $0.holding.count } }

    /// Handshakes waiting for a slot.
    var waiting: Int { state.withLockedValue { $0.waiting.count } }
}
