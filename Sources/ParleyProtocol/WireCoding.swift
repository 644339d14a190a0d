import Foundation

/// The JSON coding every Parley component uses on the wire and in storage.
public enum WireCoding {
    /// A new encoder: compact, without escaped slashes.
    public static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }

    /// Encodes `value` as compact JSON bytes.
    public static func encode(_ value: some Encodable) throws -> [UInt8] {
        Array(try makeEncoder().encode(value))
    }

    /// Decodes JSON bytes.
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: some Collection<UInt8>) throws -> T {
        try JSONDecoder().decode(type, from: Data(bytes))
    }
}
