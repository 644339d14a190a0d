import Foundation

extension ClientFrame {
    /// Decodes a client frame from its JSON text, with the outcome of
    /// `JSONDecoder().decode(ClientFrame.self, from:)`: the same frame, ``UnknownFrameType`` for a `type` this
    /// version does not know, and a `DecodingError` for anything else that is not a valid frame.
    ///
    /// The frames clients send all the time (`send`, `receipt`, `typing`, `ping`), and the `connect` that opens every
    /// connection, written as plain JSON (what the SDK's encoder produces) are read by a hand-written parser, without
    /// Foundation's intermediate tree of boxed values. Everything else (a member this version does not know, a key
    /// given twice, a number written with a fraction where an integer is expected, a lone surrogate, anything
    /// malformed) goes to `JSONDecoder`, which decides; so the result never depends on which path read the frame.
    ///
    /// ```swift
    /// let frame = try ClientFrame.decode(bytes: Array(#"{"type":"ping","id":"p1"}"#.utf8))
    /// ```
    ///
    /// - Throws: ``UnknownFrameType``, or the `DecodingError` of `JSONDecoder`.
    package static func decode(bytes: some Collection<UInt8>) throws -> ClientFrame {
        let fast = bytes.withContiguousStorageIfAvailable { ClientFrameReader.frame(in: $0) }
        switch fast {
        case .some(.some(let frame)): return frame
        case .some(.none): return try JSONDecoder().decode(ClientFrame.self, from: Data(bytes))
        case .none:
            let copy = Array(bytes)
            if let frame = copy.withUnsafeBufferPointer(ClientFrameReader.frame(in:)) { return frame }
            return try JSONDecoder().decode(ClientFrame.self, from: Data(copy))
        }
    }

    /// Decodes a client frame from the text of a WebSocket text message; see ``decode(bytes:)``.
    package static func decode(text: String) throws -> ClientFrame {
        var text = text
        // A native string's UTF-8 is contiguous: no copy.
        return try text.withUTF8 { try decode(bytes: $0) }
    }
}

/// The hand-written fast path of ``ClientFrame/decode(bytes:)``: reads the common frames and returns nil for
/// anything it does not read exactly as `JSONDecoder` would (the caller then asks `JSONDecoder`).
///
/// It accepts only strict RFC 8259 JSON (no comments, no trailing commas, no leading zeros, no bytes that are not
/// UTF-8), and within it only what it can map with certainty: known members of known frame types, each key once,
/// integers written as integers and within range, finite numbers not rounded to zero, escapes that form Unicode
/// scalars (no lone surrogate), and nesting no deeper than ``maxDepth``.
package struct ClientFrameReader {
    /// Deeper JSON values are left to `JSONDecoder` (which has a limit of its own).
    static let maxDepth = 32

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0

    private init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    /// The frame, or nil when `JSONDecoder` must decide.
    package static func frame(in bytes: UnsafeBufferPointer<UInt8>) -> ClientFrame? {
        var reader = ClientFrameReader(bytes)
        guard let members = reader.topLevelObject() else { return nil }
        return Self.frame(members, reader: reader)
    }

    // MARK: Frames

    /// A value as read: numbers keep their text (their meaning depends on the member).
    enum Node {
        case null
        case bool(Bool)
        case number(Range<Int>)
        case string(String)
        case array([Node])
        case object([(key: String, value: Node)])
    }

    private static func frame(_ members: [(key: String, value: Node)], reader: ClientFrameReader) -> ClientFrame? {
        guard case .string(let type)? = members.first(where: { $0.key == "type" })?.value else { return nil }
        let fields = Fields(members: members)
        switch type {
        case "send":
            guard
                fields.only([
                    "type", "ref", "conversationId", "clientMessageId", "parts", "metadata", "alert", "replyTo",
                    "mentions", "silent",
                ]),
                let ref = fields.string("ref"), let conversationId = fields.string("conversationId"),
                let clientMessageId = fields.optionalString("clientMessageId"),
                let partNodes = fields.array("parts"), let metadata = fields.optionalJSON("metadata", reader),
                let alert = fields.optionalString("alert"), let replyTo = fields.optionalString("replyTo"),
                let mentions = fields.optionalStrings("mentions"), let silent = fields.optionalBool("silent")
            else { return nil }
            var parts: [MessagePart] = []
            parts.reserveCapacity(partNodes.count)
            for node in partNodes {
                guard let part = messagePart(node, reader: reader) else { return nil }
                parts.append(part)
            }
            return .send(
                SendFrame(
                    ref: ref, conversationId: conversationId, clientMessageId: clientMessageId, parts: parts,
                    metadata: metadata, alert: alert, replyTo: replyTo, mentions: mentions, silent: silent
                )
            )
        case "receipt":
            guard fields.only(["type", "ref", "conversationId", "deliveredSeq", "readSeq"]),
                let ref = fields.optionalString("ref"), let conversationId = fields.string("conversationId"),
                let deliveredSeq = fields.optionalInt64("deliveredSeq", reader),
                let readSeq = fields.optionalInt64("readSeq", reader)
            else { return nil }
            return .receipt(
                ReceiptFrame(ref: ref, conversationId: conversationId, deliveredSeq: deliveredSeq, readSeq: readSeq)
            )
        case "typing":
            guard fields.only(["type", "conversationId", "isTyping"]),
                let conversationId = fields.string("conversationId"), let isTyping = fields.bool("isTyping")
            else { return nil }
            return .typing(TypingFrame(conversationId: conversationId, isTyping: isTyping))
        case "ping":
            guard fields.only(["type", "id"]), let id = fields.optionalString("id") else { return nil }
            return .ping(PingFrame(id: id))
        case "connect":
            guard fields.only(["type", "protocolVersion", "subscribePresenceForAllUsers", "resume", "token"]),
                let protocolVersion = fields.int64("protocolVersion", reader).flatMap(Int.init(exactly:)),
                let subscribe = fields.optionalBool("subscribePresenceForAllUsers"),
                let resume = resumeRequest(fields.value("resume"), reader: reader),
                let token = fields.optionalString("token")
            else { return nil }
            return .connect(
                ConnectFrame(
                    protocolVersion: protocolVersion, subscribePresenceForAllUsers: subscribe, resume: resume,
                    token: token
                )
            )
        default:
            // Unknown types: JSONDecoder decides.
            return nil
        }
    }

    /// A connect frame's `resume`: `.some(nil)` when absent or `null`; nil when JSONDecoder must decide (a member it
    /// would ignore, a conversation named twice: keys equal as Swift strings would be one dictionary key).
    private static func resumeRequest(_ node: Node?, reader: ClientFrameReader) -> ResumeRequest?? {
        switch node {
        case nil, .null?:
            return .some(nil)
        case .object(let members)?:
            let fields = Fields(members: members)
            guard fields.only(["userSeq", "conversations"]), let userSeq = fields.int64("userSeq", reader),
                case .object(let entries)? = fields.value("conversations")
            else { return nil }
            var conversations: [String: Int64] = [:]
            conversations.reserveCapacity(entries.count)
            for (conversationId, value) in entries {
                guard case .number(let range) = value, let seq = reader.int64(range),
                    conversations.updateValue(seq, forKey: conversationId) == nil
                else { return nil }
            }
            return .some(ResumeRequest(userSeq: userSeq, conversations: conversations))
        default:
            return nil
        }
    }

    private static func messagePart(_ node: Node, reader: ClientFrameReader) -> MessagePart? {
        guard case .object(let members) = node else { return nil }
        let fields = Fields(members: members)
        guard fields.only(["type", "text", "data", "name", "file"]), let typeName = fields.string("type"),
            let kind = MessagePart.Kind(rawValue: typeName), let text = fields.optionalString("text"),
            let data = fields.optionalJSON("data", reader), let name = fields.optionalString("name")
        else { return nil }
        var file: FileInfo?
        switch fields.value("file") {
        case nil, .null?: break
        case .object(let members)?:
            guard let info = fileInfo(Fields(members: members), reader: reader) else { return nil }
            file = info
        default: return nil
        }
        return MessagePart(type: kind, text: text, data: data, name: name, file: file)
    }

    /// A `file` part's file as ``FileInfo/init(from:)`` decodes it: the id, and defaults for what a sender leaves out.
    private static func fileInfo(_ fields: Fields, reader: ClientFrameReader) -> FileInfo? {
        guard fields.only(["id", "name", "contentType", "size", "sha256", "width", "height", "preview"]),
            let id = fields.string("id"), let name = fields.optionalString("name"),
            let contentType = fields.optionalString("contentType"), let size = fields.optionalInt64("size", reader),
            let sha256 = fields.optionalString("sha256"), let width = fields.optionalInt64("width", reader),
            let height = fields.optionalInt64("height", reader), let preview = fields.optionalString("preview")
        else { return nil }
        return FileInfo(
            id: id, name: name ?? "", contentType: contentType ?? "application/octet-stream", size: size ?? 0,
            sha256: sha256 ?? "", width: width.map { Int($0) }, height: height.map { Int($0) }, preview: preview
        )
    }

    /// The members of one object, looked up by key. Lookups that find a value of the wrong kind return nil (the
    /// whole frame is then left to `JSONDecoder`); an optional member's result is `.some(nil)` when it is absent or
    /// `null`, as `decodeIfPresent` does.
    private struct Fields {
        let members: [(key: String, value: Node)]

        /// Whether every key is one of `known` and appears once.
        func only(_ known: [String]) -> Bool {
            for (position, member) in members.enumerated() {
                guard known.contains(member.key) else { return false }
                for earlier in members[..<position] where earlier.key == member.key { return false }
            }
            return true
        }

        func value(_ key: String) -> Node? {
            members.first(where: { $0.key == key })?.value
        }

        func string(_ key: String) -> String? {
            guard case .string(let value)? = value(key) else { return nil }
            return value
        }

        func bool(_ key: String) -> Bool? {
            guard case .bool(let value)? = value(key) else { return nil }
            return value
        }

        func array(_ key: String) -> [Node]? {
            guard case .array(let value)? = value(key) else { return nil }
            return value
        }

        func int64(_ key: String, _ reader: ClientFrameReader) -> Int64? {
            guard case .number(let range)? = value(key) else { return nil }
            return reader.int64(range)
        }

        func optionalBool(_ key: String) -> Bool?? {
            switch value(key) {
            case nil, .null?: return .some(nil)
            case .bool(let value)?: return .some(value)
            default: return nil
            }
        }

        func optionalString(_ key: String) -> String?? {
            switch value(key) {
            case nil, .null?: return .some(nil)
            case .string(let value)?: return .some(value)
            default: return nil
            }
        }

        /// An optional array of strings; nil (JSONDecoder decides) when an element is not a string.
        func optionalStrings(_ key: String) -> [String]?? {
            switch value(key) {
            case nil, .null?: return .some(nil)
            case .array(let nodes)?:
                var strings: [String] = []
                strings.reserveCapacity(nodes.count)
                for node in nodes {
                    guard case .string(let string) = node else { return nil }
                    strings.append(string)
                }
                return .some(strings)
            default: return nil
            }
        }

        func optionalInt64(_ key: String, _ reader: ClientFrameReader) -> Int64?? {
            switch value(key) {
            case nil, .null?: return .some(nil)
            case .number(let range)?: return reader.int64(range).map { .some($0) }
            default: return nil
            }
        }

        func optionalJSON(_ key: String, _ reader: ClientFrameReader) -> JSONValue?? {
            switch value(key) {
            case nil, .null?: return .some(nil)
            case let node?: return reader.json(node).map { .some($0) }
            }
        }
    }

    /// A JSON value as `JSONValue.init(from:)` decodes it.
    private func json(_ node: Node) -> JSONValue? {
        switch node {
        case .null: return .null
        case .bool(let value): return .bool(value)
        case .number(let range): return double(range).map(JSONValue.number)
        case .string(let value): return .string(value)
        case .array(let nodes):
            var values: [JSONValue] = []
            values.reserveCapacity(nodes.count)
            for node in nodes {
                guard let value = json(node) else { return nil }
                values.append(value)
            }
            return .array(values)
        case .object(let members):
            var values: [String: JSONValue] = [:]
            values.reserveCapacity(members.count)
            for member in members {
                // A key given twice: left to JSONDecoder.
                guard values[member.key] == nil, let value = json(member.value) else { return nil }
                values[member.key] = value
            }
            return .object(values)
        }
    }

    /// An integer written without fraction or exponent, within Int64.
    private func int64(_ range: Range<Int>) -> Int64? {
        var position = range.lowerBound
        let negative = bytes[position] == UInt8(ascii: "-")
        if negative { position += 1 }
        var value: Int64 = 0
        while position < range.upperBound {
            let byte = bytes[position]
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            let digit = Int64(byte - UInt8(ascii: "0"))
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (next, overflow2) =
                negative ? times10.subtractingReportingOverflow(digit) : times10.addingReportingOverflow(digit)
            guard !overflow1, !overflow2 else { return nil }
            value = next
            position += 1
        }
        return value
    }

    /// A finite double, correctly rounded from the number's text.
    private func double(_ range: Range<Int>) -> Double? {
        let digits = UnsafeBufferPointer(rebasing: bytes[range])
        guard let value = Double(String(decoding: digits, as: UTF8.self)), value.isFinite else { return nil }
        if value == 0 {
            // A number too small to be told from zero (its digits before any exponent are not all zeros): left to
            // JSONDecoder.
            let mantissa = digits.prefix { $0 != UInt8(ascii: "e") && $0 != UInt8(ascii: "E") }
            if mantissa.contains(where: { $0 >= UInt8(ascii: "1") && $0 <= UInt8(ascii: "9") }) { return nil }
        }
        return value
    }

    // MARK: Parsing

    private mutating func topLevelObject() -> [(key: String, value: Node)]? {
        skipWhitespace()
        guard peek() == UInt8(ascii: "{"), case .object(let members)? = value(depth: 0) else { return nil }
        skipWhitespace()
        guard index == bytes.count else { return nil }
        return members
    }

    private func peek() -> UInt8? {
        index < bytes.count ? bytes[index] : nil
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): index += 1
            default: return
            }
        }
    }

    private mutating func value(depth: Int) -> Node? {
        guard depth <= Self.maxDepth, let byte = peek() else { return nil }
        switch byte {
        case UInt8(ascii: "{"): return object(depth: depth)
        case UInt8(ascii: "["): return array(depth: depth)
        case UInt8(ascii: "\""): return string().map(Node.string)
        case UInt8(ascii: "t"): return literal("true", .bool(true))
        case UInt8(ascii: "f"): return literal("false", .bool(false))
        case UInt8(ascii: "n"): return literal("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return number()
        default: return nil
        }
    }

    private mutating func literal(_ word: StaticString, _ node: Node) -> Node? {
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count else { return nil }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return nil }
        index += count
        return node
    }

    private mutating func object(depth: Int) -> Node? {
        index += 1  // {
        var members: [(key: String, value: Node)] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard peek() == UInt8(ascii: "\""), let key = string() else { return nil }
            skipWhitespace()
            guard peek() == UInt8(ascii: ":") else { return nil }
            index += 1
            skipWhitespace()
            guard let value = value(depth: depth + 1) else { return nil }
            members.append((key, value))
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                return .object(members)
            default: return nil
            }
        }
    }

    private mutating func array(depth: Int) -> Node? {
        index += 1  // [
        var elements: [Node] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            guard let value = value(depth: depth + 1) else { return nil }
            elements.append(value)
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                return .array(elements)
            default: return nil
            }
        }
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, kept as text.
    private mutating func number() -> Node? {
        let start = index
        let negative = peek() == UInt8(ascii: "-")
        if negative { index += 1 }
        guard let first = peek(), isDigit(first) else { return nil }
        index += 1
        if first != UInt8(ascii: "0") { skipDigits() }
        var fraction = false
        if peek() == UInt8(ascii: ".") {
            index += 1
            guard let digit = peek(), isDigit(digit) else { return nil }
            skipDigits()
            fraction = true
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            // Foundation's JSONDecoder on Linux refuses `0e1` (valid JSON; `-0e1` and `0.0e1` it reads): left to it,
            // so that both paths agree (found by the client-frame fuzz target, docs/RELIABILITY.md).
            if first == UInt8(ascii: "0"), !negative, !fraction { return nil }
            index += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
            guard let digit = peek(), isDigit(digit) else { return nil }
            skipDigits()
        }
        // A digit right after a leading zero ("01") is not JSON.
        if let next = peek(), isDigit(next) { return nil }
        return .number(start..<index)
    }

    private func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    private mutating func skipDigits() {
        while let byte = peek(), isDigit(byte) { index += 1 }
    }

    /// A string; nil for raw control characters, bytes that are not UTF-8, unknown escapes and lone surrogates.
    private mutating func string() -> String? {
        index += 1  // "
        let start = index
        // The common case: no escapes.
        var isASCII = true
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let content = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                return isASCII ? String(decoding: content, as: UTF8.self) : Self.utf8(content)
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { return nil }
            if byte >= 0x80 { isASCII = false }
            index += 1
        }
        guard index < bytes.count else { return nil }
        var decoded = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return decoded.withUnsafeBufferPointer(Self.utf8)
            case UInt8(ascii: "\\"):
                index += 1
                guard let escape = peek() else { return nil }
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(escape)
                case UInt8(ascii: "b"): decoded.append(0x08)
                case UInt8(ascii: "f"): decoded.append(0x0C)
                case UInt8(ascii: "n"): decoded.append(0x0A)
                case UInt8(ascii: "r"): decoded.append(0x0D)
                case UInt8(ascii: "t"): decoded.append(0x09)
                case UInt8(ascii: "u"):
                    guard let scalar = unicodeEscape() else { return nil }
                    UTF8.encode(scalar) { decoded.append($0) }
                default: return nil
                }
            default:
                if byte < 0x20 { return nil }
                decoded.append(byte)
                index += 1
            }
        }
        return nil
    }

    /// The scalar of `XXXX` (after `\u`), or of a surrogate pair `XXXX\uYYYY`.
    private mutating func unicodeEscape() -> Unicode.Scalar? {
        guard let high = hex4() else { return nil }
        switch high {
        case 0xD800...0xDBFF:
            guard peek() == UInt8(ascii: "\\"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u") else {
                return nil
            }
            index += 2
            guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
            return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
        case 0xDC00...0xDFFF: return nil
        default: return Unicode.Scalar(high)
        }
    }

    private mutating func hex4() -> UInt32? {
        guard bytes.count - index >= 4 else { return nil }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    /// The bytes as a string, or nil when they are not valid UTF-8 (decoding would have replaced something).
    private static func utf8(_ content: UnsafeBufferPointer<UInt8>) -> String? {
        let string = String(decoding: content, as: UTF8.self)
        guard string.utf8.elementsEqual(content) else { return nil }
        return string
    }
}
