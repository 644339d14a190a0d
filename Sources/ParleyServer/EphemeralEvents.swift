import NIOCore
import ParleyProtocol

/// Builds the frame of an event that is not stored (typing, presence, profile, unread), encoded once.
enum EphemeralEvents {
    static func frame(
        appId: String, conversationId: String? = nil, actor: String?, timestamp: Int64, payload: EventPayload
    ) -> ByteBuffer? {
        guard let name = payload.eventName else { return nil }
        let event = Event(
            id: Secrets.randomID(prefix: "e_"), appId: appId, name: name, conversationId: conversationId,
            timestamp: timestamp, context: EventContext(createdBy: actor), payload: payload
        )
        guard let json = try? WireCoding.encode(event) else { return nil }
        return FrameEncoding.eventFrame(json: json)
    }
}
