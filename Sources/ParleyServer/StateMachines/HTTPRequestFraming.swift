/// Follows where each HTTP/1.1 request of a connection starts and ends in its byte stream (RFC 9112 sections 2-7), so
/// that ``HTTPRequestHeadGuard`` checks every request line (and times every head) however requests are split across
/// reads or pipelined together in one.
///
/// It reads what it needs and nothing more: request lines (given to the guard whole), the end of each head, and the
/// body's framing from `Content-Length` or `Transfer-Encoding: chunked` (chunk-size lines and trailers, both bounded).
/// Framing that NIO's decoder or ``HTTPRequestGuard`` refuses anyway (two lengths, a length with `Transfer-Encoding`,
/// codings other than `chunked`, obs-fold, an unparsable chunk size) and an upgrade request (WebSocket frames follow
/// it) end the following: the rest of the connection is ``State/opaque`` and left to them.
struct HTTPRequestFraming {
    enum State: Equatable {
        /// Between requests: no byte of the next one yet.
        case idle
        case requestLine
        case headerFields
        /// A body of `Content-Length` bytes, this many still to come.
        case body(remaining: Int)
        case chunkLine
        case chunkData(remaining: Int)
        /// The CRLF after a chunk's data.
        case chunkDataEnd
        case trailers
        /// Not followed any more (see the type's description).
        case opaque
    }

    enum Refusal: Equatable {
        case requestLineTooLong
        /// A CR not followed by LF, or a line of the head or of the chunked framing ended by a bare LF.
        case bareLineEnding
        case chunkLineTooLong
        case trailersTooLarge
        /// A header line longer than the field limit, more header bytes than the head's limit, or more lines than
        /// the count limit: refused at the byte that passes the limit, so that NIO's decoder (whose checks of the
        /// same limits run when its parser hands it a piece, which depends on how the bytes were cut) never
        /// decides it.
        case headersTooLarge
    }

    enum Event: Equatable {
        /// The first byte of a request.
        case requestStarted
        /// A request line, without its CRLF.
        case requestLine([UInt8])
        case headEnded
        case requestEnded
        case refused(Refusal)
    }

    /// Longest chunk-size line (the size and its extensions): a peer cannot stream an endless extension.
    static let maxChunkLineBytes = 4 * 1024
    /// Header lines are kept up to this many bytes: enough for the few fields the framing reads.
    private static let keptHeaderLineBytes = 1024

    private(set) var state: State = .idle
    private let maxRequestLineBytes: Int
    private let maxTrailerBytes: Int
    private let maxHeaderFieldBytes: Int
    private let maxHeaderBytes: Int
    private let maxHeaderCount: Int
    /// The current head's header bytes (lines without their CRLF) and lines so far.
    private var headerBytes = 0
    private var headerCount = 0
    /// The current line, up to its limit (header lines: their first ``keptHeaderLineBytes``).
    private var line: [UInt8] = []
    private var lineLength = 0
    private var crPending = false
    private var trailerBytes = 0
    private var head = HeadFraming()

    init(
        maxRequestLineBytes: Int, maxTrailerBytes: Int, maxHeaderFieldBytes: Int = .max, maxHeaderBytes: Int = .max,
        maxHeaderCount: Int = .max
    ) {
        self.maxRequestLineBytes = maxRequestLineBytes
        self.maxTrailerBytes = maxTrailerBytes
        self.maxHeaderFieldBytes = maxHeaderFieldBytes
        self.maxHeaderBytes = maxHeaderBytes
        self.maxHeaderCount = maxHeaderCount
    }

    /// Whether a request's head is being read.
    var isReadingHead: Bool { state == .requestLine || state == .headerFields }

    /// Reads from `index` until the next event, or to the end of `bytes` (nil). `index` is left after the byte that
    /// made the event.
    mutating func next(_ bytes: UnsafeRawBufferPointer, _ index: inout Int) -> Event? {
        while index < bytes.count {
            switch state {
            case .opaque:
                index = bytes.count
                return nil
            case .idle:
                state = .requestLine
                startLine()
                head = HeadFraming()
                headerBytes = 0
                headerCount = 0
                return .requestStarted
            case .body(let remaining):
                let taken = min(remaining, bytes.count - index)
                index += taken
                if taken == remaining {
                    state = .idle
                    return .requestEnded
                }
                state = .body(remaining: remaining - taken)
            case .chunkData(let remaining):
                let taken = min(remaining, bytes.count - index)
                index += taken
                state = taken == remaining ? .chunkDataEnd : .chunkData(remaining: remaining - taken)
                if taken == remaining { startLine() }
            case .requestLine, .headerFields, .chunkLine, .chunkDataEnd, .trailers:
                let byte = bytes[index]
                index += 1
                if let event = take(byte) { return event }
            }
        }
        return nil
    }

    private mutating func startLine() {
        line.removeAll(keepingCapacity: true)
        lineLength = 0
        crPending = false
    }

    /// One byte of a line-oriented part.
    private mutating func take(_ byte: UInt8) -> Event? {
        if crPending, byte != UInt8(ascii: "\n") { return refuse(.bareLineEnding) }
        if byte == UInt8(ascii: "\n") {
            guard crPending else { return refuse(.bareLineEnding) }
            return lineEnded()
        }
        if byte == UInt8(ascii: "\r") {
            crPending = true
            return nil
        }
        lineLength += 1
        switch state {
        case .requestLine:
            guard lineLength <= maxRequestLineBytes else { return refuse(.requestLineTooLong) }
            line.append(byte)
        case .headerFields:
            if lineLength == 1 { headerCount += 1 }
            headerBytes += 1
            guard lineLength <= maxHeaderFieldBytes, headerBytes <= maxHeaderBytes, headerCount <= maxHeaderCount
            else { return refuse(.headersTooLarge) }
            if lineLength <= Self.keptHeaderLineBytes {
                line.append(byte)
            } else if lineLength == Self.keptHeaderLineBytes + 1 {
                head.truncated(line)
            }
        case .chunkLine:
            guard lineLength <= Self.maxChunkLineBytes else { return refuse(.chunkLineTooLong) }
            line.append(byte)
        case .chunkDataEnd:
            // Data longer than its chunk size: NIO's decoder refuses it.
            state = .opaque
        case .trailers:
            trailerBytes += 1
            guard trailerBytes <= maxTrailerBytes else { return refuse(.trailersTooLarge) }
        default:
            break
        }
        return nil
    }

    private mutating func lineEnded() -> Event? {
        defer { startLine() }
        switch state {
        case .requestLine:
            // Empty lines before a request line are ignored (RFC 9112 section 2.2).
            guard lineLength > 0 else { return nil }
            state = .headerFields
            return .requestLine(line)
        case .headerFields:
            guard lineLength == 0 else {
                head.field(line)
                return nil
            }
            state = head.bodyFraming
            if state == .idle { return .requestEnded }
            return .headEnded
        case .chunkLine:
            guard let size = Self.chunkSize(line) else {
                state = .opaque
                return nil
            }
            state = size == 0 ? .trailers : .chunkData(remaining: size)
            trailerBytes = 0
            return nil
        case .chunkDataEnd:
            state = .chunkLine
            return nil
        case .trailers:
            guard lineLength == 0 else { return nil }
            state = .idle
            return .requestEnded
        default:
            return nil
        }
    }

    private mutating func refuse(_ refusal: Refusal) -> Event {
        state = .opaque
        return .refused(refusal)
    }

    /// The size a chunk-size line gives (its hex digits, before any extension); nil for one without digits or too large.
    static func chunkSize(_ line: [UInt8]) -> Int? {
        var size = 0
        var digits = 0
        for byte in line {
            guard let value = HTTPRequestGuard.hexValue(byte) else { break }
            digits += 1
            guard digits <= 15 else { return nil }
            size = size << 4 | Int(value)
        }
        return digits == 0 ? nil : size
    }
}

/// The fields of one head that decide how its body is framed.
private struct HeadFraming {
    private var lengths: [Int?] = []
    private var codings: [[UInt8]]?
    private var transferEncodings = 0
    /// Framing the decoder or the request guard refuses, or an upgrade: the framing is not followed past this head.
    private var unfollowable = false

    /// The state after the head: a body of its length, a chunked body, none, or ``HTTPRequestFraming/State/opaque``.
    var bodyFraming: HTTPRequestFraming.State {
        if unfollowable || lengths.count > 1 || transferEncodings > 1 { return .opaque }
        if let codings {
            return lengths.isEmpty && codings.count == 1 && codings[0] == Array("chunked".utf8) ? .chunkLine : .opaque
        }
        guard let length = lengths.first else { return .idle }
        guard let length else { return .opaque }
        return length == 0 ? .idle : .body(remaining: length)
    }

    mutating func field(_ line: [UInt8]) {
        guard let first = line.first else { return }
        // obs-fold: refused by the request guard.
        if first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") {
            unfollowable = true
            return
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return }
        let name = line[..<colon]
        let value = Self.trimmed(line[(colon + 1)...])
        if Self.named(name, "content-length") {
            guard value.count <= 18, !value.isEmpty, value.allSatisfy({ (0x30...0x39).contains($0) }) else {
                lengths.append(nil)
                return
            }
            lengths.append(value.reduce(0) { $0 * 10 + Int($1 - 0x30) })
        } else if Self.named(name, "transfer-encoding") {
            transferEncodings += 1
            codings = value.split(separator: UInt8(ascii: ",")).map { Array(Self.trimmed($0)).map(Self.lowercased) }
        } else if Self.named(name, "upgrade") {
            // WebSocket frames follow an accepted upgrade; other protocols are ignored (the request is served).
            let lowercased = value.map(Self.lowercased)
            if lowercased.count >= 9,
                (0...(lowercased.count - 9)).contains(where: {
                    lowercased[$0..<($0 + 9)].elementsEqual("websocket".utf8)
                })
            {
                unfollowable = true
            }
        }
    }

    /// A header line longer than what is kept: only a field the framing reads matters.
    mutating func truncated(_ kept: [UInt8]) {
        guard let colon = kept.firstIndex(of: UInt8(ascii: ":")) else { return }
        let name = kept[..<colon]
        if Self.named(name, "content-length") || Self.named(name, "transfer-encoding") || Self.named(name, "upgrade") {
            unfollowable = true
        }
    }

    private static func named(_ name: ArraySlice<UInt8>, _ lowercase: String) -> Bool {
        name.count == lowercase.utf8.count && zip(name, lowercase.utf8).allSatisfy { lowercased($0) == $1 }
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 32 : byte
    }

    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        let blank: (UInt8) -> Bool = { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        guard let start = bytes.firstIndex(where: { !blank($0) }), let end = bytes.lastIndex(where: { !blank($0) })
        else { return bytes[bytes.startIndex..<bytes.startIndex] }
        return bytes[start...end]
    }
}
