/// A hand-written JSON encoder for the frames and events on the server's hot path.
///
/// Foundation's `JSONEncoder` builds a tree of boxed values before it writes a byte; it was 21% of the server's CPU
/// when persisting messages (docs/BENCHMARKS.md). This writes the bytes directly for the shapes sent most often:
/// `conversationMessage.sent`, `.delivered` and `.read`, typing, presence, unread and profile events, and every
/// server frame but `event` (which wraps stored event JSON). Other events (conversations, participants) go through
/// ``WireCoding`` as before.
///
/// The output follows ``WireCoding``'s conventions (compact, slashes not escaped, `nil` optionals left out, numbers
/// as Foundation writes them), so every decoder reads it exactly as it reads the Foundation-encoded form
/// (`WireJSONTests` compares the two for every event payload kind). Key order may differ, which JSON ignores.
package enum WireJSON {
    /// The JSON of an event, as stored and sent inside `event` frames.
    package static func encode(_ event: Event) throws -> [UInt8] {
        var writer = Writer()
        switch event.payload {
        case .messageSent(let message), .messageUpdated(let message), .messageDeleted(let message):
            writer.reserve(256 + message.parts.reduce(0) { $0 + ($1.text?.utf8.count ?? 64) })
            try writer.eventHeader(event)
            try writer.message(message)
        case .messageDelivered(let receipt), .messageRead(let receipt):
            try writer.eventHeader(event)
            writer.receipt(receipt)
        case .participantTyping(let typing), .participantTypingOff(let typing):
            try writer.eventHeader(event)
            writer.raw(#"{"uid":"#)
            writer.string(typing.uid)
            writer.byte(UInt8(ascii: "}"))
        case .presenceUpdated(let presence):
            try writer.eventHeader(event)
            writer.presence(presence)
        case .unreadUpdated(let summary):
            writer.reserve(256 + 96 * summary.conversations.count)
            try writer.eventHeader(event)
            writer.unread(summary)
        case .profileUpdated(let user):
            try writer.eventHeader(event)
            try writer.user(user)
        default:
            return try WireCoding.encode(event)
        }
        writer.byte(UInt8(ascii: "}"))
        return writer.bytes
    }

    /// The JSON of a server frame.
    package static func encode(_ frame: ServerFrame) throws -> [UInt8] {
        var writer = Writer()
        switch frame {
        case .ack(let ack):
            try writer.ack(ack)
        case .hello(let hello):
            writer.raw(#"{"type":"hello","protocolVersion":"#)
            writer.integer(Int64(hello.protocolVersion))
            writer.raw(#","connectionId":"#)
            writer.string(hello.connectionId)
            writer.raw(#","appId":"#)
            writer.string(hello.appId)
            writer.raw(#","user":"#)
            try writer.user(hello.user)
            writer.raw(#","heartbeatIntervalMs":"#)
            writer.integer(hello.heartbeatIntervalMs)
            writer.raw(#","serverTime":"#)
            writer.integer(hello.serverTime)
            if let tokenExpiresAt = hello.tokenExpiresAt {
                writer.raw(#","tokenExpiresAt":"#)
                writer.integer(tokenExpiresAt)
            }
            writer.byte(UInt8(ascii: "}"))
        case .caughtUp(let caughtUp):
            writer.reserve(64 + 40 * caughtUp.conversations.count)
            writer.raw(#"{"type":"caughtUp","userSeq":"#)
            writer.integer(caughtUp.userSeq)
            writer.raw(#","conversations":{"#)
            for (index, (conversationId, seq)) in caughtUp.conversations.enumerated() {
                if index > 0 { writer.byte(UInt8(ascii: ",")) }
                writer.string(conversationId)
                writer.byte(UInt8(ascii: ":"))
                writer.integer(seq)
            }
            writer.raw(#"},"replayed":"#)
            writer.integer(Int64(caughtUp.replayed))
            writer.byte(UInt8(ascii: "}"))
        case .pong(let pong):
            writer.raw(#"{"type":"pong","#)
            if let id = pong.id {
                writer.raw(#""id":"#)
                writer.string(id)
                writer.byte(UInt8(ascii: ","))
            }
            writer.raw(#""serverTime":"#)
            writer.integer(pong.serverTime)
            writer.byte(UInt8(ascii: "}"))
        case .error(let error):
            writer.raw(#"{"type":"error","#)
            if let ref = error.ref {
                writer.raw(#""ref":"#)
                writer.string(ref)
                writer.byte(UInt8(ascii: ","))
            }
            writer.raw(#""code":"#)
            writer.string(error.code.rawValue)
            writer.raw(#","message":"#)
            writer.string(error.message)
            if let retryAfterMs = error.retryAfterMs {
                writer.raw(#","retryAfterMs":"#)
                writer.integer(retryAfterMs)
            }
            writer.byte(UInt8(ascii: "}"))
        case .event, .resync:
            return try WireCoding.encode(frame)
        }
        return writer.bytes
    }

    /// Appends JSON to a byte array.
    struct Writer {
        var bytes: [UInt8] = []

        mutating func ack(_ ack: AckFrame) throws {
            reserve(64 + (ack.message?.parts.reduce(256) { $0 + ($1.text?.utf8.count ?? 64) } ?? 0))
            raw(#"{"type":"ack","ref":"#)
            string(ack.ref)
            if let message = ack.message {
                raw(#","message":"#)
                try self.message(message)
            }
            if let duplicate = ack.duplicate {
                raw(duplicate ? #","duplicate":true"# : #","duplicate":false"#)
            }
            if let reactions = ack.reactions {
                raw(#","reactions":{"messageId":"#)
                string(reactions.messageId)
                raw(#","reactions":"#)
                self.reactions(reactions.reactions)
                byte(UInt8(ascii: "}"))
            }
            byte(UInt8(ascii: "}"))
        }

        mutating func reserve(_ count: Int) { bytes.reserveCapacity(count) }

        mutating func byte(_ byte: UInt8) { bytes.append(byte) }

        /// Bytes that are already JSON (keys and punctuation written as literals).
        mutating func raw(_ text: StaticString) {
            text.withUTF8Buffer { bytes.append(contentsOf: $0) }
        }

        /// A JSON string: `"`, `\` and control characters escaped as Foundation does, everything else as UTF-8.
        mutating func string(_ value: String) {
            bytes.append(UInt8(ascii: "\""))
            var value = value
            value.withUTF8 { utf8 in
                var start = 0
                for index in 0..<utf8.count {
                    let byte = utf8[index]
                    guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                    if start < index { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index])) }
                    start = index + 1
                    bytes.append(UInt8(ascii: "\\"))
                    switch byte {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
                    case 0x08: bytes.append(UInt8(ascii: "b"))
                    case 0x0C: bytes.append(UInt8(ascii: "f"))
                    case 0x0A: bytes.append(UInt8(ascii: "n"))
                    case 0x0D: bytes.append(UInt8(ascii: "r"))
                    case 0x09: bytes.append(UInt8(ascii: "t"))
                    default:
                        let hex = Array("0123456789abcdef".utf8)
                        bytes.append(contentsOf: [
                            UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)],
                        ])
                    }
                }
                if start < utf8.count { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...])) }
            }
            bytes.append(UInt8(ascii: "\""))
        }

        mutating func integer(_ value: Int64) {
            if value >= 0 && value < 10 {
                bytes.append(UInt8(ascii: "0") + UInt8(value))
            } else {
                bytes.append(contentsOf: String(value).utf8)
            }
        }

        /// A number as Foundation's `JSONEncoder` writes a `Double`: shortest round-trip form, no trailing `.0`.
        mutating func number(_ value: Double) throws {
            guard value.isFinite else {
                throw EncodingError.invalidValue(
                    value, EncodingError.Context(codingPath: [], debugDescription: "\(value) is not a JSON number.")
                )
            }
            var text = value.description
            if text.hasSuffix(".0") { text.removeLast(2) }
            bytes.append(contentsOf: text.utf8)
        }

        mutating func value(_ value: JSONValue) throws {
            switch value {
            case .null: raw("null")
            case .bool(let bool): bool ? raw("true") : raw("false")
            case .number(let number): try self.number(number)
            case .string(let string): self.string(string)
            case .array(let array):
                byte(UInt8(ascii: "["))
                for (index, element) in array.enumerated() {
                    if index > 0 { byte(UInt8(ascii: ",")) }
                    try self.value(element)
                }
                byte(UInt8(ascii: "]"))
            case .object(let object):
                byte(UInt8(ascii: "{"))
                var first = true
                for (key, element) in object {
                    if !first { byte(UInt8(ascii: ",")) }
                    first = false
                    string(key)
                    byte(UInt8(ascii: ":"))
                    try self.value(element)
                }
                byte(UInt8(ascii: "}"))
            }
        }

        /// `{"id":..,"appId":..,"name":..,["conversationId":..,]["seq":..,]"timestamp":..,"context":{..},"payload":`
        mutating func eventHeader(_ event: Event) throws {
            raw(#"{"id":"#)
            string(event.id)
            raw(#","appId":"#)
            string(event.appId)
            raw(#","name":"#)
            string(event.name.rawValue)
            if let conversationId = event.conversationId {
                raw(#","conversationId":"#)
                string(conversationId)
            }
            if let seq = event.seq {
                raw(#","seq":"#)
                integer(seq)
            }
            raw(#","timestamp":"#)
            integer(event.timestamp)
            if let createdBy = event.context.createdBy {
                raw(#","context":{"createdBy":"#)
                string(createdBy)
                raw(#"},"payload":"#)
            } else {
                raw(#","context":{},"payload":"#)
            }
        }

        mutating func message(_ message: Message) throws {
            raw(#"{"id":"#)
            string(message.id)
            raw(#","conversationId":"#)
            string(message.conversationId)
            raw(#","seq":"#)
            integer(message.seq)
            raw(#","sender":"#)
            string(message.sender)
            if let clientMessageId = message.clientMessageId {
                raw(#","clientMessageId":"#)
                string(clientMessageId)
            }
            raw(#","parts":["#)
            for (index, part) in message.parts.enumerated() {
                if index > 0 { byte(UInt8(ascii: ",")) }
                raw(#"{"type":"#)
                string(part.type.rawValue)
                if let text = part.text {
                    raw(#","text":"#)
                    string(text)
                }
                if let data = part.data {
                    raw(#","data":"#)
                    try value(data)
                }
                if let name = part.name {
                    raw(#","name":"#)
                    string(name)
                }
                if let file = part.file {
                    raw(#","file":{"id":"#)
                    string(file.id)
                    raw(#","name":"#)
                    string(file.name)
                    raw(#","contentType":"#)
                    string(file.contentType)
                    raw(#","size":"#)
                    integer(file.size)
                    raw(#","sha256":"#)
                    string(file.sha256)
                    if let width = file.width {
                        raw(#","width":"#)
                        integer(Int64(width))
                    }
                    if let height = file.height {
                        raw(#","height":"#)
                        integer(Int64(height))
                    }
                    if let preview = file.preview {
                        raw(#","preview":"#)
                        string(preview)
                    }
                    byte(UInt8(ascii: "}"))
                }
                byte(UInt8(ascii: "}"))
            }
            byte(UInt8(ascii: "]"))
            if let metadata = message.metadata {
                raw(#","metadata":"#)
                try value(metadata)
            }
            if let alert = message.alert {
                raw(#","alert":"#)
                string(alert)
            }
            raw(#","sentAt":"#)
            integer(message.sentAt)
            if let replyTo = message.replyTo {
                raw(#","replyTo":"#)
                string(replyTo)
            }
            if let mentions = message.mentions {
                raw(#","mentions":["#)
                for (index, uid) in mentions.enumerated() {
                    if index > 0 { byte(UInt8(ascii: ",")) }
                    string(uid)
                }
                byte(UInt8(ascii: "]"))
            }
            optionalInteger(#","editedAt":"#, message.editedAt)
            optionalInteger(#","deletedAt":"#, message.deletedAt)
            if let deletedBy = message.deletedBy {
                raw(#","deletedBy":"#)
                string(deletedBy)
            }
            optionalInteger(#","replyCount":"#, message.replyCount.map(Int64.init))
            optionalInteger(#","lastReplyAt":"#, message.lastReplyAt)
            if let reactions = message.reactions {
                raw(#","reactions":"#)
                self.reactions(reactions)
            }
            if let silent = message.silent { raw(silent ? #","silent":true"# : #","silent":false"#) }
            if let system = message.system { raw(system ? #","system":true"# : #","system":false"#) }
            if let pin = message.pin {
                raw(#","pin":{"messageId":"#)
                string(pin.messageId)
                raw(#","messageSeq":"#)
                integer(pin.messageSeq)
                if let pinnedBy = pin.pinnedBy {
                    raw(#","pinnedBy":"#)
                    string(pinnedBy)
                }
                raw(#","pinnedAt":"#)
                integer(pin.pinnedAt)
                byte(UInt8(ascii: "}"))
            }
            byte(UInt8(ascii: "}"))
        }

        /// `key` and the integer, when there is one.
        mutating func optionalInteger(_ key: StaticString, _ value: Int64?) {
            guard let value else { return }
            raw(key)
            integer(value)
        }

        mutating func reactions(_ reactions: [ReactionSummary]) {
            byte(UInt8(ascii: "["))
            for (index, reaction) in reactions.enumerated() {
                if index > 0 { byte(UInt8(ascii: ",")) }
                raw(#"{"key":"#)
                string(reaction.key)
                raw(#","count":"#)
                integer(Int64(reaction.count))
                raw(reaction.reacted ? #","reacted":true}"# : #","reacted":false}"#)
            }
            byte(UInt8(ascii: "]"))
        }

        mutating func user(_ user: User) throws {
            raw(#"{"uid":"#)
            string(user.uid)
            raw(#","name":"#)
            string(user.name)
            if let avatarURL = user.avatarURL {
                raw(#","avatarURL":"#)
                string(avatarURL)
            }
            if let metadata = user.metadata {
                raw(#","metadata":"#)
                try value(metadata)
            }
            raw(#","createdAt":"#)
            integer(user.createdAt)
            raw(#","updatedAt":"#)
            integer(user.updatedAt)
            byte(UInt8(ascii: "}"))
        }

        mutating func presence(_ presence: Presence) {
            raw(#"{"uid":"#)
            string(presence.uid)
            raw(presence.online ? #","online":true"# : #","online":false"#)
            if let lastSeenAt = presence.lastSeenAt {
                raw(#","lastSeenAt":"#)
                integer(lastSeenAt)
            }
            byte(UInt8(ascii: "}"))
        }

        mutating func unread(_ summary: UnreadSummary) {
            raw(#"{"total":"#)
            integer(Int64(summary.total))
            raw(#","conversations":["#)
            for (index, conversation) in summary.conversations.enumerated() {
                if index > 0 { byte(UInt8(ascii: ",")) }
                raw(#"{"conversationId":"#)
                string(conversation.conversationId)
                raw(#","unread":"#)
                integer(Int64(conversation.unread))
                raw(#","readSeq":"#)
                integer(conversation.readSeq)
                raw(#","lastSeq":"#)
                integer(conversation.lastSeq)
                byte(UInt8(ascii: "}"))
            }
            raw("]}")
        }

        mutating func receipt(_ receipt: Receipt) {
            raw(#"{"uid":"#)
            string(receipt.uid)
            raw(#","seq":"#)
            integer(receipt.seq)
            if let messageId = receipt.messageId {
                raw(#","messageId":"#)
                string(messageId)
            }
            optionalInteger(#","timestamp":"#, receipt.timestamp)
            byte(UInt8(ascii: "}"))
        }
    }
}
