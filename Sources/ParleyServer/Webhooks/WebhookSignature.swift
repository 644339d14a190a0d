import Crypto
import Foundation

/// `X-Parley-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>`: the HMAC, keyed with the endpoint's secret, of the
/// timestamp, a dot and the raw body. A receiver recomputes it over the body it got, compares in constant time, and
/// refuses a timestamp more than five minutes away from its clock (a replayed request). docs/PROTOCOL.md has the
/// verification in Python and Swift.
public enum WebhookSignature {
    /// The header's name.
    public static let header = "X-Parley-Signature"
    /// How far a timestamp may be from the receiver's clock.
    public static let tolerance: Int64 = 300

    /// The header value for `body` sent at `timestamp` (Unix seconds).
    public static func header(secret: String, timestamp: Int64, body: [UInt8]) -> String {
        "t=\(timestamp),v1=\(hex(secret: secret, timestamp: timestamp, body: body))"
    }

    static func hex(secret: String, timestamp: Int64, body: [UInt8]) -> String {
        var signed = Array("\(timestamp).".utf8)
        signed += body
        let mac = HMAC<SHA256>.authenticationCode(for: signed, using: SymmetricKey(data: Array(secret.utf8)))
        return Secrets.hex(mac)
    }

    /// Whether `header` signs `body` with `secret` at a time within ``tolerance`` of `now` (Unix seconds): what a
    /// receiver does.
    public static func verify(header: String, body: [UInt8], secret: String, now: Int64) -> Bool {
        var timestamp: Int64?
        var signatures: [String] = []
        for part in header.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1).map(String.init)
            guard pair.count == 2 else { continue }
            if pair[0] == "t" { timestamp = Int64(pair[1]) }
            if pair[0] == "v1" { signatures.append(pair[1]) }
        }
        guard let timestamp, abs(now - timestamp) <= tolerance else { return false }
        let expected = Array(hex(secret: secret, timestamp: timestamp, body: body).utf8)
        return signatures.contains { Secrets.constantTimeEquals(Array($0.utf8), expected) }
    }
}
