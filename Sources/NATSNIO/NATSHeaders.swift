import NIOCore

/// The headers of a NATS message: ordered, multi-valued name/value pairs, plus the status of the
/// `NATS/1.0 503 No Responders` line the server uses for status messages.
///
/// Names keep their case; look-ups ignore ASCII case.
/// ```swift
/// var headers: NATSHeaders = ["Parley-Event": "message.created"]
/// headers.append("a", for: "Parley-Tag")
/// headers.append("b", for: "Parley-Tag")
/// headers.values(for: "parley-tag")  // ["a", "b"]
/// ```
public struct NATSHeaders: Sendable, Hashable, ExpressibleByDictionaryLiteral, CustomStringConvertible {
    /// One header line.
    public struct Field: Sendable, Hashable {
        /// The name, as sent.
        public var name: String
        /// The value.
        public var value: String

        /// Creates a field.
        /// - Parameters:
        ///   - name: The name: printable ASCII without `:`.
        ///   - value: The value: no CR or LF.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The fields in order, duplicates included.
    public var fields: [Field]
    /// The status code of the first line (`NATS/1.0 503`), e.g. 503 for "no responders"; `nil` for a plain block.
    public var status: Int?
    /// The description after the status code (`No Responders`), if any.
    public var statusDescription: String?

    /// Creates an empty header block.
    public init() {
        self.fields = []
    }

    /// Creates headers from fields, in order.
    /// - Parameter fields: The fields.
    public init(_ fields: [Field]) {
        self.fields = fields
    }

    /// Creates headers from a literal; the same name may appear more than once.
    /// - Parameter elements: The name/value pairs, in order.
    public init(dictionaryLiteral elements: (String, String)...) {
        self.fields = elements.map { Field(name: $0.0, value: $0.1) }
    }

    /// The first value for a name (ASCII case ignored), or `nil`.
    public subscript(name: String) -> String? {
        self.fields.first { $0.name.equalsIgnoringASCIICase(name) }?.value
    }

    /// All values for a name (ASCII case ignored), in order.
    /// - Parameter name: The header name.
    /// - Returns: The values, possibly empty.
    public func values(for name: String) -> [String] {
        self.fields.filter { $0.name.equalsIgnoringASCIICase(name) }.map(\.value)
    }

    /// Appends a value for a name, keeping the values already there.
    /// - Parameters:
    ///   - value: The value.
    ///   - name: The header name.
    public mutating func append(_ value: String, for name: String) {
        self.fields.append(Field(name: name, value: value))
    }

    /// Replaces every value of a name with one value.
    /// - Parameters:
    ///   - value: The value.
    ///   - name: The header name.
    public mutating func set(_ value: String, for name: String) {
        self.remove(name)
        self.append(value, for: name)
    }

    /// Removes every value of a name.
    /// - Parameter name: The header name.
    public mutating func remove(_ name: String) {
        self.fields.removeAll { $0.name.equalsIgnoringASCIICase(name) }
    }

    /// Whether there are no fields and no status.
    public var isEmpty: Bool { self.fields.isEmpty && self.status == nil }

    /// The header block as it goes on the wire, CRLFs shown as `\r\n`.
    public var description: String {
        var buffer = ByteBuffer()
        self.write(into: &buffer)
        return String(buffer: buffer).replacingCRLF()
    }

    // MARK: - Wire format

    /// Checks that every name and value can be encoded.
    func validate() throws(NATSError) {
        for field in self.fields {
            guard !field.name.isEmpty,
                field.name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") })
            else {
                throw NATSError(.invalidHeaders, "invalid header name '\(field.name)'")
            }
            guard field.value.utf8.allSatisfy({ $0 != 0x0D && $0 != 0x0A }) else {
                throw NATSError(.invalidHeaders, "header '\(field.name)' has a value with CR or LF")
            }
        }
        if let description = self.statusDescription,
            !description.utf8.allSatisfy({ $0 != 0x0D && $0 != 0x0A })
        {
            throw NATSError(.invalidHeaders, "status description with CR or LF")
        }
    }

    /// The number of bytes ``write(into:)`` writes.
    var encodedLength: Int {
        var length = 8 + 2 + 2  // "NATS/1.0" CRLF ... CRLF
        if let status = self.status {
            length += 1 + status.decimalDigitCount
            if let description = self.statusDescription, !description.isEmpty {
                length += 1 + description.utf8.count
            }
        }
        for field in self.fields {
            length += field.name.utf8.count + 2 + field.value.utf8.count + 2
        }
        return length
    }

    /// Writes `NATS/1.0[ status[ description]]\r\n(name: value\r\n)*\r\n`.
    func write(into buffer: inout ByteBuffer) {
        buffer.writeStaticString("NATS/1.0")
        if let status = self.status {
            buffer.writeInteger(UInt8(ascii: " "))
            buffer.writeDecimal(status)
            if let description = self.statusDescription, !description.isEmpty {
                buffer.writeInteger(UInt8(ascii: " "))
                buffer.writeString(description)
            }
        }
        buffer.writeStaticString("\r\n")
        for field in self.fields {
            buffer.writeString(field.name)
            buffer.writeStaticString(": ")
            buffer.writeString(field.value)
            buffer.writeStaticString("\r\n")
        }
        buffer.writeStaticString("\r\n")
    }

    /// Parses a header block as received in HMSG.
    /// - Throws: A description of what is wrong.
    static func parse(_ block: ByteBuffer) throws(NATSProtocolError) -> NATSHeaders {
        var headers = NATSHeaders()
        var lines = block.readableBytesView.split(separator: 0x0A, omittingEmptySubsequences: false).makeIterator()
        guard let first = lines.next().map(Self.trimCR) else {
            throw NATSProtocolError("empty header block")
        }
        let prefix = Array("NATS/".utf8)
        guard first.count >= prefix.count, first.prefix(prefix.count).elementsEqual(prefix) else {
            throw NATSProtocolError("header block does not start with NATS/")
        }
        // "NATS/1.0", "NATS/1.0 503", "NATS/1.0 503 No Responders"
        if let space = first.firstIndex(where: Self.isBlank) {
            let afterVersion = first[space...].drop(while: Self.isBlank)
            let codeBytes = afterVersion.prefix(while: { $0 >= 0x30 && $0 <= 0x39 })
            if !codeBytes.isEmpty {
                guard codeBytes.count <= 4 else { throw NATSProtocolError("invalid header status") }
                headers.status = Int(String(decoding: codeBytes, as: UTF8.self))
                let description = afterVersion[codeBytes.endIndex...].drop(while: Self.isBlank)
                if !description.isEmpty {
                    headers.statusDescription = String(decoding: description, as: UTF8.self)
                }
            } else if !afterVersion.isEmpty {
                headers.statusDescription = String(decoding: afterVersion, as: UTF8.self)
            }
        }
        while let rawLine = lines.next() {
            let line = Self.trimCR(rawLine)
            if line.isEmpty { continue }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else {
                throw NATSProtocolError("header line without ':'")
            }
            let name = String(decoding: line[..<colon], as: UTF8.self)
            let value = line[line.index(after: colon)...].drop(while: Self.isBlank)
            headers.fields.append(Field(name: name, value: String(decoding: value, as: UTF8.self)))
        }
        return headers
    }

    private static func trimCR(_ line: ByteBufferView.SubSequence) -> ByteBufferView.SubSequence {
        line.last == 0x0D ? line.dropLast() : line
    }

    private static func isBlank(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t")
    }
}
