import Foundation
import ParleyProtocol
import Testing

@Suite struct FrameCodingTests {
    func json(_ value: some Encodable) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(WireCoding.encode(value))) as? [String: Any])
    }

    @Test func clientFramesAreTaggedObjects() throws {
        let send = ClientFrame.send(
            SendFrame(ref: "r1", conversationId: "c_1", clientMessageId: "x", parts: [.text("hi")]))
        let object = try json(send)
        #expect(object["type"] as? String == "send")
        #expect(object["ref"] as? String == "r1")
        #expect(object["conversationId"] as? String == "c_1")
        #expect(try WireCoding.decode(ClientFrame.self, from: WireCoding.encode(send)) == send)

        let ping = ClientFrame.ping(PingFrame(id: "7"))
        #expect(try json(ping)["type"] as? String == "ping")
        #expect(try WireCoding.decode(ClientFrame.self, from: WireCoding.encode(ping)) == ping)
    }

    @Test func serverFramesRoundTrip() throws {
        let user = User(uid: "alice", name: "Alice", createdAt: 1, updatedAt: 2)
        let message = Message(
            id: "m_1", conversationId: "c_1", seq: 3, sender: "alice", parts: [.text("hi")], sentAt: 4)
        let event = Event(
            id: Event.durableID(conversationId: "c_1", seq: 3), appId: "a", name: .messageSent, conversationId: "c_1",
            seq: 3, timestamp: 4, context: EventContext(createdBy: "alice"), payload: .messageSent(message)
        )
        let frames: [ServerFrame] = [
            .hello(
                HelloFrame(
                    protocolVersion: 1, connectionId: "k", appId: "a", user: user, heartbeatIntervalMs: 30_000,
                    serverTime: 5)),
            .event(EventFrame(event: event)),
            .ack(AckFrame(ref: "r1", message: message, duplicate: false)),
            .error(ErrorFrame(ref: "r2", code: .conversationNotFound, message: "no")),
            .pong(PongFrame(id: "1", serverTime: 6)),
        ]
        for frame in frames {
            #expect(try WireCoding.decode(ServerFrame.self, from: WireCoding.encode(frame)) == frame)
        }
        let object = try json(ServerFrame.event(EventFrame(event: event)))
        #expect(object["type"] as? String == "event")
        let inner = try #require(object["event"] as? [String: Any])
        #expect(inner["name"] as? String == "conversationMessage.sent")
        #expect(inner["seq"] as? Int == 3)
    }

    @Test func unknownFrameTypeIsReportedAsSuch() throws {
        #expect(throws: UnknownFrameType.self) {
            try WireCoding.decode(ClientFrame.self, from: Array(#"{"type":"teleport"}"#.utf8))
        }
        #expect(throws: DecodingError.self) {
            try WireCoding.decode(ClientFrame.self, from: Array(#"{"type":"send","ref":1}"#.utf8))
        }
    }

    @Test func unknownEventsAreKeptAsJSON() throws {
        let text =
            #"{"id":"e1","appId":"a","name":"future.thing","timestamp":1,"context":{},"payload":{"x":[1,true,null]}}"#
        let event = try WireCoding.decode(Event.self, from: Array(text.utf8))
        #expect(event.name == "future.thing")
        #expect(event.payload == .unknown(["x": [1, true, nil]]))
    }

    @Test func jsonValueRoundTripsEveryKind() throws {
        let value: JSONValue = ["s": "text", "n": 1.5, "b": false, "z": nil, "a": [1, "two"], "o": ["k": "v"]]
        #expect(try WireCoding.decode(JSONValue.self, from: WireCoding.encode(value)) == value)
    }
}

@Suite struct MessageLimitsTests {
    let limits = MessageLimits(maxParts: 3, maxBytes: 100)

    @Test func emptyMessagesAreRejected() {
        #expect(limits.violation(parts: [], metadata: nil, alert: nil) == .messageEmpty)
        #expect(limits.violation(parts: [.text("  \n ")], metadata: nil, alert: nil) == .messageEmpty)
        #expect(limits.violation(parts: [.text("hi")], metadata: nil, alert: nil) == nil)
        #expect(limits.violation(parts: [.data(["lat": 1])], metadata: nil, alert: nil) == nil)
    }

    @Test func oversizedMessagesAreRejected() {
        #expect(
            limits.violation(parts: [.text(String(repeating: "x", count: 101))], metadata: nil, alert: nil)
                == .messageTooLarge)
        #expect(
            limits.violation(parts: [.text("a"), .text("b"), .text("c"), .text("d")], metadata: nil, alert: nil)
                == .messageTooLarge)
        #expect(
            limits.violation(parts: [.text("hi")], metadata: .string(String(repeating: "m", count: 120)), alert: nil)
                == .messageTooLarge)
        #expect(
            limits.violation(parts: [.text("hi")], metadata: nil, alert: String(repeating: "a", count: 99))
                == .messageTooLarge)
    }

    @Test func uidRules() {
        #expect(User.isValidUID("alice_01.test@x-y"))
        #expect(!User.isValidUID(""))
        #expect(!User.isValidUID("has space"))
        #expect(!User.isValidUID(String(repeating: "a", count: 101)))
        #expect(!User.isValidUID("émile"))
    }
}
