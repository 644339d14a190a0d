/// Limits on a message, checked by the server and, before sending, by the SDK.
public struct MessageLimits: Sendable, Hashable {
    /// Most parts in one message.
    public var maxParts: Int
    /// Most bytes of the parts, metadata and alert together, counted as UTF-8 of their JSON.
    public var maxBytes: Int

    /// Creates limits; the defaults are the server's (20 parts, 64 KiB).
    public init(maxParts: Int = 20, maxBytes: Int = 64 * 1024) {
        self.maxParts = maxParts
        self.maxBytes = maxBytes
    }

    /// The limits of a server started without options.
    public static let `default` = MessageLimits()

    /// The error code that rejects this content, or nil when it is acceptable.
    ///
    /// - `ERR_MESSAGE_EMPTY`: no parts, or only text parts without visible text and no data or file parts.
    /// - `ERR_MESSAGE_TOO_LARGE`: more than `maxParts` parts or more than `maxBytes` bytes.
    public func violation(parts: [MessagePart], metadata: JSONValue?, alert: String?) -> ErrorCode? {
        let hasContent = parts.contains { part in
            switch part.type {
            case .text: return part.text.map { !$0.allSatisfy(\.isWhitespace) } ?? false
            case .data: return part.data != nil
            case .file: return part.file != nil
            }
        }
        guard hasContent else { return .messageEmpty }
        guard parts.count <= maxParts else { return .messageTooLarge }
        guard size(parts: parts, metadata: metadata, alert: alert) <= maxBytes else { return .messageTooLarge }
        return nil
    }

    private func size(parts: [MessagePart], metadata: JSONValue?, alert: String?) -> Int {
        var total = alert?.utf8.count ?? 0
        total += metadata.map(Self.size) ?? 0
        for part in parts {
            total += (part.text?.utf8.count ?? 0) + (part.name?.utf8.count ?? 0) + (part.data.map(Self.size) ?? 0)
            if let file = part.file {
                // The id, the preview, and what the server fills in at most (keys, checksum, size, the longest name
                // and type), so that a part a sender names by id alone is within the limit once filled.
                total += 160 + 255 + 127 + file.id.utf8.count + (file.preview?.utf8.count ?? 0)
            }
        }
        return total
    }

    /// An upper bound of the UTF-8 size of a JSON value's encoding, without encoding it.
    private static func size(_ value: JSONValue) -> Int {
        switch value {
        case .null, .bool: return 5
        case .number: return 24
        case .string(let string): return string.utf8.count + 2
        case .array(let array): return array.reduce(2) { $0 + size($1) + 1 }
        case .object(let object): return object.reduce(2) { $0 + $1.key.utf8.count + 4 + size($1.value) }
        }
    }
}
