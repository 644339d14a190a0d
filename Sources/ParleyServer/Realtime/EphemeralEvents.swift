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
            id: Secrets.randomID(prefix: "e_"), appId: appId, name: name, conversationId: conversationId,
            timestamp: timestamp, context: EventContext(createdBy: actor), payload: payload
        )
        return try? WireJSON.encode(event)
    }
}
