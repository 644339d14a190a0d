/// Helpers for the `{"type": "...", ...}` tagged objects of the WebSocket protocol.
struct FrameTypeKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
    static let type = FrameTypeKey(stringValue: "type")
}

extension Decoder {
    /// The `type` member of a tagged object.
    func frameType() throws -> String {
        try container(keyedBy: FrameTypeKey.self).decode(String.self, forKey: .type)
    }
}

extension Encoder {
    /// Encodes `value`'s members and a `type` member into one object.
    func encodeTagged(_ type: String, _ value: some Encodable) throws {
        try value.encode(to: self)
        var container = container(keyedBy: FrameTypeKey.self)
        try container.encode(type, forKey: .type)
    }
}
