import NIOCore

/// Parses the server's operations (INFO, MSG, HMSG, PING, PONG, +OK, -ERR) from bytes that may arrive in any
/// fragmentation. Pure: no I/O, no allocation beyond the operations it returns.
///
/// Bounded: a control line longer than ``maxControlLineLength`` or a declared payload over ``payloadLimit`` is a
/// protocol error, found before the bytes are buffered. After an error every call throws it again.
package struct NATSProtocolParser {
    /// The longest control line accepted (INFO with many `connect_urls` can be long).
    package static let maxControlLineLength = 64 * 1024
    /// The payload limit used before INFO says otherwise, and its floor.
    static let minimumPayloadLimit = 64 << 20

    /// The largest payload (headers included) a MSG or HMSG may declare: max(INFO `max_payload`, 64 MiB).
    private(set) var payloadLimit = Self.minimumPayloadLimit

    private enum State {
        case controlLine(scanned: Int)
        case payload(Pending)
        case failed(NATSProtocolError)
    }

    private struct Pending {
        var subject: String
        var sid: UInt64
        var replyTo: String?
        var headerLength: Int?
        var totalLength: Int
    }

    private var state = State.controlLine(scanned: 0)

    package init() {}

    /// Parses the next operation from the front of `buffer`, consuming its bytes.
    /// - Returns: The operation, or `nil` when more bytes are needed (the bytes stay in `buffer`).
    /// - Throws: ``NATSProtocolError`` for anything that is not valid protocol or breaks a bound.
    package mutating func next(from buffer: inout ByteBuffer) throws(NATSProtocolError) -> NATSServerOperation? {
        switch self.state {
        case .failed(let error):
            throw error
        case .controlLine(let scanned):
            do {
                return try self.parseControlLine(from: &buffer, scanned: scanned)
            } catch {
                self.state = .failed(error)
                throw error
            }
        case .payload(let pending):
            do {
                return try self.parsePayload(pending, from: &buffer)
            } catch {
                self.state = .failed(error)
                throw error
            }
        }
    }

    /// A control line, parsed inside the buffer's bytes.
    private enum ControlLine {
        case incomplete(scanned: Int)
        case message(Pending, consumed: Int)
        case operation(NATSServerOperation, consumed: Int)
    }

    /// Up to six field ranges of a control line, without allocating.
    private struct Fields {
        var count = 0
        var starts: (Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0)
        var ends: (Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0)

        mutating func append(_ start: Int, _ end: Int) {
            switch self.count {
            case 0: (self.starts.0, self.ends.0) = (start, end)
            case 1: (self.starts.1, self.ends.1) = (start, end)
            case 2: (self.starts.2, self.ends.2) = (start, end)
            case 3: (self.starts.3, self.ends.3) = (start, end)
            case 4: (self.starts.4, self.ends.4) = (start, end)
            case 5: (self.starts.5, self.ends.5) = (start, end)
            default: break
            }
            self.count += 1
        }

        func range(_ index: Int) -> Range<Int> {
            switch index {
            case 0: self.starts.0..<self.ends.0
            case 1: self.starts.1..<self.ends.1
            case 2: self.starts.2..<self.ends.2
            case 3: self.starts.3..<self.ends.3
            case 4: self.starts.4..<self.ends.4
            default: self.starts.5..<self.ends.5
            }
        }
    }

    private mutating func parseControlLine(
        from buffer: inout ByteBuffer, scanned: Int
    ) throws(NATSProtocolError) -> NATSServerOperation? {
        let payloadLimit = self.payloadLimit
        let line = try buffer.withUnsafeReadableBytes { bytes throws(NATSProtocolError) -> ControlLine in
            try Self.parseLine(bytes, scanned: scanned, payloadLimit: payloadLimit)
        }
        switch line {
        case .incomplete(let scanned):
            self.state = .controlLine(scanned: scanned)
            return nil
        case .operation(let operation, let consumed):
            buffer.moveReaderIndex(forwardBy: consumed)
            self.state = .controlLine(scanned: 0)
            if case .info(let info) = operation {
                self.payloadLimit = max(Self.minimumPayloadLimit, info.maxPayload)
            }
            return operation
        case .message(let pending, let consumed):
            buffer.moveReaderIndex(forwardBy: consumed)
            return try self.parsePayload(pending, from: &buffer)
        }
    }

    private static func parseLine(
        _ bytes: UnsafeRawBufferPointer, scanned: Int, payloadLimit: Int
    ) throws(NATSProtocolError) -> ControlLine {
        var newline = scanned
        let count = bytes.count
        while newline < count, bytes[newline] != UInt8(ascii: "\n") {
            newline += 1
        }
        guard newline < count else {
            if count > Self.maxControlLineLength + 1 {
                throw NATSProtocolError("control line longer than \(Self.maxControlLineLength) bytes")
            }
            return .incomplete(scanned: count)
        }
        if newline > Self.maxControlLineLength + 1 {
            throw NATSProtocolError("control line longer than \(Self.maxControlLineLength) bytes")
        }
        let consumed = newline + 1
        var end = newline
        if end > 0, bytes[end - 1] == UInt8(ascii: "\r") {
            end -= 1
        }
        // Split into fields; the rest after the first field is kept for INFO and -ERR.
        var fields = Fields()
        var index = 0
        var restStart = end
        while index < end {
            while index < end, Self.isBlank(bytes[index]) { index += 1 }
            guard index < end else { break }
            if fields.count == 1 {
                restStart = index
            }
            let start = index
            while index < end, !Self.isBlank(bytes[index]) { index += 1 }
            fields.append(start, index)
            if fields.count > 6 { break }
        }
        guard fields.count > 0 else {
            throw NATSProtocolError("empty control line")
        }
        let op = fields.range(0)
        let first = bytes[op.lowerBound] | 0x20  // lower-case letters; '+' and '-' keep their value
        let opLength = op.count
        if opLength == 3, first == UInt8(ascii: "m"), Self.matches(bytes, op, "MSG") {
            guard fields.count == 4 || fields.count == 5 else {
                throw NATSProtocolError("MSG with \(fields.count - 1) arguments")
            }
            let size = try Self.parseSize(bytes, fields.range(fields.count - 1), limit: payloadLimit)
            let pending = Pending(
                subject: Self.string(bytes, fields.range(1)),
                sid: try Self.parseSID(bytes, fields.range(2)),
                replyTo: fields.count == 5 ? Self.string(bytes, fields.range(3)) : nil,
                headerLength: nil,
                totalLength: size
            )
            return .message(pending, consumed: consumed)
        }
        if opLength == 4, first == UInt8(ascii: "h"), Self.matches(bytes, op, "HMSG") {
            guard fields.count == 5 || fields.count == 6 else {
                throw NATSProtocolError("HMSG with \(fields.count - 1) arguments")
            }
            let headerLength = try Self.parseSize(bytes, fields.range(fields.count - 2), limit: payloadLimit)
            let totalLength = try Self.parseSize(bytes, fields.range(fields.count - 1), limit: payloadLimit)
            guard headerLength <= totalLength else {
                throw NATSProtocolError("HMSG header size \(headerLength) over total size \(totalLength)")
            }
            let pending = Pending(
                subject: Self.string(bytes, fields.range(1)),
                sid: try Self.parseSID(bytes, fields.range(2)),
                replyTo: fields.count == 6 ? Self.string(bytes, fields.range(3)) : nil,
                headerLength: headerLength,
                totalLength: totalLength
            )
            return .message(pending, consumed: consumed)
        }
        if opLength == 4, Self.matches(bytes, op, "PING") {
            return .operation(.ping, consumed: consumed)
        }
        if opLength == 4, Self.matches(bytes, op, "PONG") {
            return .operation(.pong, consumed: consumed)
        }
        if opLength == 4, Self.matches(bytes, op, "INFO") {
            let info = try NATSServerInfo.parse(json: UnsafeRawBufferPointer(rebasing: bytes[restStart..<end]))
            return .operation(.info(info), consumed: consumed)
        }
        if opLength == 3, Self.matches(bytes, op, "+OK") {
            return .operation(.ok, consumed: consumed)
        }
        if opLength == 4, Self.matches(bytes, op, "-ERR") {
            var range = restStart..<end
            while range.count > 0, Self.isBlank(bytes[range.upperBound - 1]) {
                range = range.lowerBound..<(range.upperBound - 1)
            }
            if range.count >= 2, bytes[range.lowerBound] == UInt8(ascii: "'"),
                bytes[range.upperBound - 1] == UInt8(ascii: "'")
            {
                range = (range.lowerBound + 1)..<(range.upperBound - 1)
            }
            return .operation(.error(Self.string(bytes, range)), consumed: consumed)
        }
        let shown = Self.string(bytes, op.lowerBound..<min(op.upperBound, op.lowerBound + 16))
        throw NATSProtocolError("unknown operation '\(shown.replacingCRLF())'")
    }

    private mutating func parsePayload(
        _ pending: Pending, from buffer: inout ByteBuffer
    ) throws(NATSProtocolError) -> NATSServerOperation? {
        guard buffer.readableBytes >= pending.totalLength + 2 else {
            self.state = .payload(pending)
            return nil
        }
        var body = buffer.readSlice(length: pending.totalLength)!
        let terminator = buffer.readInteger(as: UInt16.self)!
        guard terminator == 0x0D0A else {
            throw NATSProtocolError("message payload not followed by CRLF")
        }
        self.state = .controlLine(scanned: 0)
        var headers: NATSHeaders?
        if let headerLength = pending.headerLength {
            let block = body.readSlice(length: headerLength)!
            headers = try NATSHeaders.parse(block)
        }
        return .message(
            NATSMessage(
                subject: pending.subject, sid: pending.sid, replyTo: pending.replyTo, headers: headers, payload: body
            )
        )
    }

    private static func string(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }

    private static func parseSize(
        _ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, limit: Int
    ) throws(NATSProtocolError) -> Int {
        guard let value = Self.parseDecimal(bytes, range, maxDigits: 18) else {
            throw NATSProtocolError("invalid size '\(Self.string(bytes, range.prefix(20)))'")
        }
        guard value <= limit else {
            throw NATSProtocolError("declared payload of \(value) bytes over the limit of \(limit)")
        }
        return Int(value)
    }

    private static func parseSID(
        _ bytes: UnsafeRawBufferPointer, _ range: Range<Int>
    ) throws(NATSProtocolError) -> UInt64 {
        guard let value = Self.parseDecimal(bytes, range, maxDigits: 19) else {
            throw NATSProtocolError("invalid sid '\(Self.string(bytes, range.prefix(20)))'")
        }
        return value
    }

    private static func parseDecimal(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, maxDigits: Int) -> UInt64? {
        guard !range.isEmpty, range.count <= maxDigits else { return nil }
        var value: UInt64 = 0
        for index in range {
            let digit = bytes[index] &- UInt8(ascii: "0")
            guard digit <= 9 else { return nil }
            value = value * 10 + UInt64(digit)
        }
        return value
    }

    @inline(__always)
    private static func isBlank(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t")
    }

    /// Case-insensitive comparison of an operation name with an upper-case ASCII literal of the same length.
    private static func matches(_ bytes: UnsafeRawBufferPointer, _ op: Range<Int>, _ name: StaticString) -> Bool {
        name.withUTF8Buffer { expected in
            guard expected.count == op.count else { return false }
            for offset in 0..<expected.count {
                let actual = bytes[op.lowerBound + offset]
                let upper = (actual >= UInt8(ascii: "a") && actual <= UInt8(ascii: "z")) ? actual - 32 : actual
                guard upper == expected[offset] else { return false }
            }
            return true
        }
    }
}
