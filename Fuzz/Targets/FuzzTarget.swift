/// One fuzz target: a parser or guard of the server fed bytes it did not choose, with the properties the bytes must
/// not break (docs/RELIABILITY.md). A broken property throws ``FuzzFinding``; a crash is a finding too.
///
/// The same targets run under libFuzzer (`scripts/fuzz`, a build with `-sanitize=fuzzer,address`) and, in the test
/// suite, over every file of their corpus and their regressions (`FuzzCorpusTests`).
public struct FuzzTarget: Sendable {
    /// The name `scripts/fuzz` and the corpus folders use: `Fuzz/Corpus/<name>`, `Fuzz/Dictionaries/<name>.dict`.
    public let name: String
    /// What it feeds and what it checks, in one line.
    public let summary: String
    private let body: @Sendable (UnsafeRawBufferPointer) throws(FuzzFinding) -> Void

    init(
        name: String, summary: String, body: @escaping @Sendable (UnsafeRawBufferPointer) throws(FuzzFinding) -> Void
    ) {
        self.name = name
        self.summary = summary
        self.body = body
    }

    /// A target of a stream parser, which must decide the same however its bytes are cut into reads: the input's
    /// first byte sets a piece size (1 to `largestPiece`), and `read` is given the rest at once, then in pieces of that
    /// size; the two outcomes must be equal.
    init<Outcome: Equatable>(
        name: String, summary: String, largestPiece: Int,
        read: @escaping @Sendable ([UnsafeRawBufferPointer]) throws(FuzzFinding) -> Outcome
    ) {
        self.init(name: name, summary: summary) { bytes throws(FuzzFinding) in
            guard let first = bytes.first else { return }
            let stream = UnsafeRawBufferPointer(rebasing: bytes.dropFirst())
            let size = Int(first) % largestPiece + 1
            let pieces = stride(from: 0, to: stream.count, by: size).map {
                UnsafeRawBufferPointer(rebasing: stream[$0..<min(stream.count, $0 + size)])
            }
            let whole = try read([stream])
            let cut = try read(pieces)
            guard whole == cut else { throw FuzzFinding("at once: \(whole); in pieces of \(size): \(cut)") }
        }
    }

    /// Runs the target on one input.
    public func run(_ bytes: UnsafeRawBufferPointer) throws(FuzzFinding) {
        try body(bytes)
    }

    /// Runs the target on one input.
    public func run(_ bytes: [UInt8]) throws(FuzzFinding) {
        let result: Result<Void, FuzzFinding> = bytes.withUnsafeBytes { buffer in
            Result { () throws(FuzzFinding) in try body(buffer) }
        }
        try result.get()
    }

    /// Every target, in the order `scripts/fuzz` runs them.
    public static let all: [FuzzTarget] = [
        .httpRequest, .upgradeRequest, .webSocketFrames, .utf8, .clientFrame, .wireJSON, .sigV4, .natsProtocol,
        .searchQuery, .configFile,
    ]

    /// The target of that name.
    public static func named(_ name: String) -> FuzzTarget? {
        all.first { $0.name == name }
    }
}

/// A property of a target that an input broke.
public struct FuzzFinding: Error, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// Reads typed values from the front of a fuzz input (as LLVM's `FuzzedDataProvider` does), so that one input
/// drives a structured case: an empty input reads as zeros and empty strings.
struct FuzzInput {
    private let bytes: UnsafeRawBufferPointer
    private var index = 0

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    var isEmpty: Bool { index >= bytes.count }

    mutating func byte() -> UInt8 {
        guard index < bytes.count else { return 0 }
        defer { index += 1 }
        return bytes[index]
    }

    mutating func int(in range: ClosedRange<Int>) -> Int {
        let span = UInt64(range.upperBound - range.lowerBound)
        var value: UInt64 = 0
        var needed = span
        while needed > 0 {
            value = value << 8 | UInt64(byte())
            needed >>= 8
        }
        return range.lowerBound + Int(span == UInt64.max ? value : value % (span + 1))
    }

    mutating func int64() -> Int64 {
        var value: UInt64 = 0
        for _ in 0..<8 { value = value << 8 | UInt64(byte()) }
        return Int64(bitPattern: value)
    }

    mutating func bool() -> Bool { byte() & 1 == 1 }

    /// Up to `maxBytes` bytes, as a string (invalid UTF-8 repaired as Swift does).
    mutating func string(maxBytes: Int = 64) -> String {
        let count = int(in: 0...maxBytes)
        let end = min(bytes.count, index + count)
        defer { index = end }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[min(index, end)..<end]), as: UTF8.self)
    }

    /// What is left of the input.
    mutating func rest() -> [UInt8] {
        defer { index = bytes.count }
        return index < bytes.count ? Array(bytes[index...]) : []
    }
}
