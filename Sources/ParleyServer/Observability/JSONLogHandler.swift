import Foundation
import Logging
import NIOConcurrencyHelpers

/// A log handler that writes one JSON object per line (`parley-server --log-format json`), for log shippers:
///
/// ```json
/// {"time":"2026-11-26T13:00:21.123Z","level":"info","label":"parley","message":"WebSocket connected","connection":"42","uid":"alice","source":"ParleyServer"}
/// ```
///
/// Metadata keys become fields (a key named like a fixed field is prefixed with `meta.`); nested metadata becomes
/// nested JSON. Requests carry `hb.request.id`, WebSocket connections `connection`. Lines are written whole, under a
/// lock, so that threads do not interleave them.
public struct JSONLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let output: Output

    /// Where lines go.
    final class Output: Sendable {
        private let lock = NIOLock()
        private let write: @Sendable ([UInt8]) -> Void

        init(write: @escaping @Sendable ([UInt8]) -> Void) { self.write = write }

        func emit(_ line: [UInt8]) { lock.withLock { write(line) } }
    }

    private static let standardErrorOutput = Output { bytes in
        bytes.withUnsafeBufferPointer { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Foundation.write(2, buffer.baseAddress! + offset, buffer.count - offset)
                if written <= 0 { return }
                offset += written
            }
        }
    }

    /// Lines on standard error.
    public static func standardError(label: String) -> JSONLogHandler {
        JSONLogHandler(label: label, output: standardErrorOutput)
    }

    /// Lines handed to `write` (tests).
    public static func writing(label: String, to write: @escaping @Sendable ([UInt8]) -> Void) -> JSONLogHandler {
        JSONLogHandler(label: label, output: Output(write: write))
    }

    private init(label: String, output: Output) {
        self.label = label
        self.output = output
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    private static let fixedFields: Set<String> = ["time", "level", "label", "message", "source"]

    public func log(event: LogEvent) {
        var fields = metadata
        if let provided = metadataProvider?.get() { fields.merge(provided) { $1 } }
        if let extra = event.metadata { fields.merge(extra) { $1 } }
        var line = "{\"time\":"
        Self.appendString(Self.timestamp(), to: &line)
        line += ",\"level\":"
        Self.appendString(event.level.rawValue, to: &line)
        line += ",\"label\":"
        Self.appendString(label, to: &line)
        line += ",\"message\":"
        Self.appendString(event.message.description, to: &line)
        for key in fields.keys.sorted() {
            line += ","
            Self.appendString(Self.fixedFields.contains(key) ? "meta." + key : key, to: &line)
            line += ":"
            Self.append(fields[key]!, to: &line)
        }
        line += ",\"source\":"
        Self.appendString(event.source, to: &line)
        line += "}\n"
        output.emit(Array(line.utf8))
    }

    private static func append(_ value: Logger.Metadata.Value, to line: inout String) {
        switch value {
        case .string(let string): appendString(string, to: &line)
        case .stringConvertible(let value): appendString(value.description, to: &line)
        case .array(let values):
            line += "["
            for (index, value) in values.enumerated() {
                if index > 0 { line += "," }
                append(value, to: &line)
            }
            line += "]"
        case .dictionary(let dictionary):
            line += "{"
            for (index, key) in dictionary.keys.sorted().enumerated() {
                if index > 0 { line += "," }
                appendString(key, to: &line)
                line += ":"
                append(dictionary[key]!, to: &line)
            }
            line += "}"
        }
    }

    /// A JSON string literal (RFC 8259): quotes, backslashes and control characters escaped.
    static func appendString(_ string: String, to line: inout String) {
        line += "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": line += "\\\""
            case "\\": line += "\\\\"
            case "\n": line += "\\n"
            case "\r": line += "\\r"
            case "\t": line += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x2028 || scalar.value == 0x2029:
                line += String(format: "\\u%04x", scalar.value)
            default: line.unicodeScalars.append(scalar)
            }
        }
        line += "\""
    }

    private static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
            parts.tm_hour, parts.tm_min, parts.tm_sec, now.tv_nsec / 1_000_000
        )
    }
}
