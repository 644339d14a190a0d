import Foundation
import ParleyServer

extension FuzzTarget {
    /// What the S3 signer (`SigV4`) reads from object URLs and keys: `encode` keeps exactly RFC 3986's unreserved
    /// characters and writes every other byte as `%XX`, so decoding gives the text back; the canonical path and query
    /// of any URL Foundation parses are made of encoded parts only.
    static let sigV4 = FuzzTarget(
        name: "sigv4",
        summary: "SigV4.encode reversible and unreserved-only; canonical path and query of any parsed URL"
    ) { bytes throws(FuzzFinding) in
        let text = String(decoding: bytes, as: UTF8.self)
        let encoded = SigV4.encode(text)
        guard let decoded = SigV4Case.percentDecoded(encoded), decoded == Array(text.utf8) else {
            throw FuzzFinding("encode(\(text.debugDescription)) = \(encoded.debugDescription) does not decode back")
        }
        guard let url = URL(string: text) else { return }
        let path = SigV4.canonicalPath(url)
        guard path.split(separator: "/", omittingEmptySubsequences: false).allSatisfy({ SigV4Case.isEncoded($0) })
        else {
            throw FuzzFinding("canonical path \(path.debugDescription) of \(text.debugDescription)")
        }
        let query = SigV4.canonicalQuery(url)
        guard
            query.isEmpty
                || query.split(separator: "&", omittingEmptySubsequences: false).allSatisfy({ pair in
                    let sides = pair.split(separator: "=", omittingEmptySubsequences: false)
                    return sides.count == 2 && sides.allSatisfy { SigV4Case.isEncoded($0) }
                })
        else {
            throw FuzzFinding("canonical query \(query.debugDescription) of \(text.debugDescription)")
        }
    }
}

enum SigV4Case {
    static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            true
        default: false
        }
    }

    /// Unreserved characters and `%XX` with upper-case hex digits, nothing else.
    static func isEncoded(_ text: Substring) -> Bool {
        percentDecoded(text) != nil
    }

    /// The bytes `%XX` escapes stand for; nil when the text holds anything but unreserved characters and escapes.
    static func percentDecoded(_ text: some StringProtocol) -> [UInt8]? {
        var result: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            if isUnreserved(byte) {
                result.append(byte)
                continue
            }
            guard byte == UInt8(ascii: "%"), let high = iterator.next().flatMap(hex),
                let low = iterator.next().flatMap(hex)
            else { return nil }
            result.append(high << 4 | low)
        }
        return result
    }

    private static func hex(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
