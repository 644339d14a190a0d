import NIOConcurrencyHelpers
import NIOCore
import ParleyProtocol

/// Builds an event that is not stored (typing, presence, profile, unread), encoded once.
enum EphemeralEvents {
    /// The event's JSON, as sent inside an event frame.
    static func json(
        appId: String, conversationId: String? = nil, actor: String?, timestamp: Int64, payload: EventPayload
    ) -> [UInt8]? {
        guard let name = payload.eventName else { return nil }
        let event = Event(
            id: nextID(), appId: appId, name: name, conversationId: conversationId, timestamp: timestamp,
            context: EventContext(createdBy: actor), payload: payload
        )
        return try? WireJSON.encode(event)
    }

    /// The next event id: `e_`, 8 random letters and digits drawn once per process, then a counter in 12 base-36
    /// digits (22 characters, as a random id was). Unique, and not a secret: an ephemeral event is never stored nor
    /// looked up by its id. A random id per event (20 characters from the random pool, under its lock) cost about as
    /// much as encoding the event.
    static func nextID() -> String {
        let count = counter.withLockedValue { count in
            count &+= 1
            return count
        }
        return idPrefix + Secrets.orderedBase36(count, width: 12)
    }

    private static let idPrefix = Secrets.randomID(prefix: "e_", length: 8)
    private static let counter = NIOLockedValueBox<UInt64>(0)
}
