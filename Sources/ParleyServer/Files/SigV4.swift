import Crypto
import Foundation

/// AWS Signature Version 4 for S3 requests (the `Authorization` header form), with swift-crypto: what every
/// S3-compatible store (AWS, MinIO, Ceph, moto) checks. The payload is signed by its SHA-256 (the caller computes it:
/// uploads are hashed while they are spooled), never `UNSIGNED-PAYLOAD`.
package struct SigV4: Sendable {
    let accessKeyId: String
    let secretAccessKey: String
    let region: String
    var service = "s3"

    static let emptyPayloadHash = Secrets.hex(SHA256.hash(data: [UInt8]()))

    /// The headers to add to a request (`x-amz-date`, `x-amz-content-sha256`, `Authorization`), given the request's own
    /// headers that are signed with them (`host`, and any `range` or `content-type`).
    func sign(
        method: String, url: URL, headers: [(String, String)], payloadHash: String, date: Date
    ) -> [(String, String)] {
        let (amzDate, day) = Self.timestamps(date)
        var signed = headers.map { ($0.0.lowercased(), Self.trimmed($0.1)) }
        signed.append(("x-amz-content-sha256", payloadHash))
        signed.append(("x-amz-date", amzDate))
        signed.sort { $0.0 < $1.0 }
        let signedHeaders = signed.map(\.0).joined(separator: ";")
        let canonicalRequest = [
            method,
            Self.canonicalPath(url),
            Self.canonicalQuery(url),
            signed.map { "\($0.0):\($0.1)\n" }.joined(),
            signedHeaders,
            payloadHash,
        ].joined(separator: "\n")
        let scope = "\(day)/\(region)/\(service)/aws4_request"
        let stringToSign = [
            "AWS4-HMAC-SHA256", amzDate, scope, Secrets.hex(SHA256.hash(data: Array(canonicalRequest.utf8))),
        ].joined(separator: "\n")
        let signature = Secrets.hex(
            HMAC<SHA256>.authenticationCode(for: Array(stringToSign.utf8), using: signingKey(day)))
        return [
            ("x-amz-content-sha256", payloadHash),
            ("x-amz-date", amzDate),
            (
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=\(accessKeyId)/\(scope), SignedHeaders=\(signedHeaders), Signature=\(signature)"
            ),
        ]
    }

    private func signingKey(_ day: String) -> SymmetricKey {
        func mac(_ key: SymmetricKey, _ text: String) -> SymmetricKey {
            SymmetricKey(data: Array(HMAC<SHA256>.authenticationCode(for: Array(text.utf8), using: key)))
        }
        let dateKey = mac(SymmetricKey(data: Array("AWS4\(secretAccessKey)".utf8)), day)
        return mac(mac(mac(dateKey, region), service), "aws4_request")
    }

    /// `yyyyMMdd'T'HHmmss'Z'` and `yyyyMMdd`, in UTC.
    static func timestamps(_ date: Date) -> (String, String) {
        var seconds = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let day = String(format: "%04d%02d%02d", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday)
        return (day + String(format: "T%02d%02d%02dZ", parts.tm_hour, parts.tm_min, parts.tm_sec), day)
    }

    /// Each segment of the path URI-encoded once (S3 does not normalise or double-encode).
    package static func canonicalPath(_ url: URL) -> String {
        let path = url.path.isEmpty ? "/" : url.path
        return path.split(separator: "/", omittingEmptySubsequences: false).map { encode(String($0)) }
            .joined(separator: "/")
    }

    package static func canonicalQuery(_ url: URL) -> String {
        guard let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems else { return "" }
        return items.map { (encode($0.name), encode($0.value ?? "")) }.sorted { $0 < $1 }
            .map { "\($0.0)=\($0.1)" }.joined(separator: "&")
    }

    /// RFC 3986 unreserved characters stay; every other byte is `%XX` (upper case).
    package static func encode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case 0x41...0x5A, 0x61...0x7A, 0x30...0x39, 0x2D, 0x2E, 0x5F, 0x7E:
                out.unicodeScalars.append(UnicodeScalar(byte))
            default: out += String(format: "%%%02X", byte)
            }
        }
        return out
    }

    static func trimmed(_ value: String) -> String {
        value.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ")
    }

}
