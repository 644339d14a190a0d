import ParleyProtocol
import ParleyStore

/// Events of the conversations a node follows that arrived after a gap, held until the events before them come.
///
/// Two nodes that commit to one conversation one after the other (the second waits for the first's row lock) each
/// publish their own events at once and send them on NATS: the second node often has its own commit in hand before
/// the first node's arrives. Reading the missing range from the database at once cost two queries per gap, about one
/// message in twenty with two nodes under `parley-bench rooms`, for events already on their way. So a gap is first
/// waited for (``EventPublisher/gapGrace``); events that fill it release what waits behind them, and only a gap still
/// open when the wait ends is read from the database. Pure: the publisher delivers what ``take(_:after:adding:)``
/// returns and starts or stops the conversation's timer.
struct ReorderBuffer {
    /// What waits per conversation, ascending by sequence number, each number once.
    private(set) var held: [ConversationRef: [RoutedEvent]] = [:]

    /// What can be published of `conversation` now that `position` is the last sequence number published: the events
    /// that follow it without a gap (`ready`, in order), from those held and `events`. The rest is held; `gapBefore` is
    /// then the first held sequence number (the gap is `position + 1 ..< gapBefore` once `ready` is published), nil
    /// when nothing is held. Events at or before `position` are published already and dropped.
    mutating func take(_ conversation: ConversationRef, after position: Int64, adding events: [RoutedEvent])
        -> (ready: [RoutedEvent], gapBefore: Int64?)
    {
        // Nothing held and the events ascending (one commit's, or one read's: the usual case) is sorted already.
        var queue = events
        if let waiting = held.removeValue(forKey: conversation) { queue = waiting + events }
        if !zip(queue, queue.dropFirst()).allSatisfy({ Self.seq($0) <= Self.seq($1) }) {
            queue.sort { Self.seq($0) < Self.seq($1) }
        }
        var ready: [RoutedEvent] = []
        var next = position + 1
        var rest: [RoutedEvent] = []
        for event in queue {
            let seq = Self.seq(event)
            if seq < next {
                continue  // published already, or a repeat of one just taken
            } else if seq == next && rest.isEmpty {
                ready.append(event)
                next += 1
            } else if rest.last.map({ Self.seq($0) != seq }) ?? true {
                rest.append(event)
            }
        }
        guard let first = rest.first else { return (ready, nil) }
        held[conversation] = rest
        return (ready, Self.seq(first))
    }

    /// Takes everything that waits for `conversation`, in order (to publish it past a gap that could not be read, or
    /// to drop it once the conversation is no longer followed here).
    mutating func takeAll(_ conversation: ConversationRef) -> [RoutedEvent] {
        held.removeValue(forKey: conversation) ?? []
    }

    private static func seq(_ event: RoutedEvent) -> Int64 { event.facts.seq ?? 0 }
}
