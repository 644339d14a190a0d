import Foundation
import ParleyProtocol

extension FuzzTarget {
    /// The hand-written wire JSON writer (`WireJSON`) on messages built from the input (any text, metadata of any
    /// shape, ids with quotes and control characters): its bytes are JSON that `JSONSerialization` accepts and that
    /// reads back as Foundation's encoding of the event does, and it refuses exactly what Foundation refuses (a number that is not finite).
    static let wireJSON = FuzzTarget(
        name: "wire-json",
        summary: "WireJSON.encode of generated message events: valid JSON that reads back as the same event"
    ) { bytes throws(FuzzFinding) in
        var input = FuzzInput(bytes)
        let message = WireJSONCase.message(&input)
        let finite = ([message.metadata] + message.parts.map(\.data)).allSatisfy {
            $0.map(WireJSONCase.isFinite) ?? true
        }
        let names: [(EventName, (Message) -> EventPayload)] = [
            (.messageSent, EventPayload.messageSent), (.messageUpdate, EventPayload.messageUpdated),
            (.messageDelete, EventPayload.messageDeleted),
        ]
        let (name, payload) = names[input.int(in: 0...2)]
        let event = Event(
            id: input.string(maxBytes: 24), appId: input.string(maxBytes: 16), name: name,
            conversationId: input.bool() ? message.conversationId : nil, seq: input.bool() ? message.seq : nil,
            timestamp: input.int64(), context: EventContext(createdBy: input.bool() ? input.string() : nil),
            payload: payload(message)
        )
        let written: [UInt8]
        do {
            written = try WireJSON.encode(event)
        } catch {
            guard !finite else { throw FuzzFinding("WireJSON refused \(event): \(error)") }
            return
        }
        guard finite else { throw FuzzFinding("WireJSON wrote a number that is not finite: \(event)") }
        do {
            _ = try JSONSerialization.jsonObject(with: Data(written), options: [.fragmentsAllowed])
        } catch {
            throw FuzzFinding("WireJSON wrote JSON that JSONSerialization refuses (\(error)): \(written)")
        }
        let read: Event
        do {
            read = try WireCoding.decode(Event.self, from: written)
        } catch {
            throw FuzzFinding(
                "WireJSON's bytes do not read back (\(error)): \(String(decoding: written, as: UTF8.self))")
        }
        // Foundation's round trip, not the event itself: both read `"metadata":null` back as no metadata.
        let expected: Event
        do {
            expected = try WireCoding.decode(Event.self, from: WireCoding.encode(event))
        } catch {
            throw FuzzFinding("Foundation cannot round-trip \(event): \(error)")
        }
        guard read == expected else { throw FuzzFinding("\(event) read back as \(read), Foundation's as \(expected)") }
    }
}

/// Messages and JSON values made from a fuzz input.
enum WireJSONCase {
    static func message(_ input: inout FuzzInput) -> Message {
        var parts: [MessagePart] = []
        for _ in 0..<input.int(in: 0...3) {
            switch input.int(in: 0...2) {
            case 0: parts.append(.text(input.string(maxBytes: 200)))
            case 1: parts.append(.data(value(&input, depth: 0), name: optionalString(&input)))
            default: parts.append(MessagePart(type: .data, data: .null))
            }
        }
        return Message(
            id: input.string(maxBytes: 24), conversationId: input.string(maxBytes: 24), seq: input.int64(),
            sender: input.string(maxBytes: 24), clientMessageId: optionalString(&input), parts: parts,
            metadata: input.bool() ? value(&input, depth: 0) : nil, alert: optionalString(&input),
            sentAt: input.int64(), replyTo: optionalString(&input),
            mentions: input.bool() ? (0..<input.int(in: 0...3)).map { _ in input.string(maxBytes: 16) } : nil,
            editedAt: input.bool() ? input.int64() : nil, deletedAt: input.bool() ? input.int64() : nil,
            deletedBy: optionalString(&input), replyCount: input.bool() ? input.int(in: 0...1_000_000) : nil,
            lastReplyAt: input.bool() ? input.int64() : nil,
            reactions: input.bool()
                ? (0..<input.int(in: 0...3)).map { _ in
                    ReactionSummary(
                        key: input.string(maxBytes: 16), count: input.int(in: 0...1000), reacted: input.bool())
                } : nil,
            pin: input.bool()
                ? MessagePin(
                    messageId: input.string(maxBytes: 24), messageSeq: input.int64(),
                    pinnedBy: optionalString(&input), pinnedAt: input.int64()
                ) : nil,
            silent: input.bool() ? input.bool() : nil, system: input.bool() ? input.bool() : nil
        )
    }

    static func optionalString(_ input: inout FuzzInput) -> String? {
        input.bool() ? input.string() : nil
    }

    /// Whether every number in a value is finite (a key given twice keeps its last value only).
    static func isFinite(_ value: JSONValue) -> Bool {
        switch value {
        case .number(let number): number.isFinite
        case .array(let values): values.allSatisfy(isFinite)
        case .object(let members): members.values.allSatisfy(isFinite)
        case .null, .bool, .string: true
        }
    }

    static func value(_ input: inout FuzzInput, depth: Int) -> JSONValue {
        switch input.int(in: 0...(depth < 4 ? 7 : 4)) {
        case 0: return .null
        case 1: return .bool(input.bool())
        case 2: return .number(Double(bitPattern: UInt64(bitPattern: input.int64())))
        case 3: return .number(Double(input.int(in: -1_000_000...1_000_000)))
        case 4: return .string(input.string())
        case 5, 6:
            return .array((0..<input.int(in: 0...4)).map { _ in value(&input, depth: depth + 1) })
        default:
            var object: [String: JSONValue] = [:]
            for _ in 0..<input.int(in: 0...4) {
                object[input.string(maxBytes: 16)] = value(&input, depth: depth + 1)
            }
            return .object(object)
        }
    }
}
