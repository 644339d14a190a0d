import Foundation
import ParleyProtocol
import ParleyStore

/// The raw credentials of a request, read from its headers.
struct RequestCredentials: Sendable {
    /// From `Authorization: Bearer <token>`.
    var bearerToken: String?
    /// From `X-Parley-Api-Key`.
    var apiKey: String?
    /// The client's IP address (the connection's peer).
    var clientAddress: String?

    @TaskLocal static var current = RequestCredentials()

    init(bearerToken: String? = nil, apiKey: String? = nil, clientAddress: String? = nil) {
        self.bearerToken = bearerToken
        self.apiKey = apiKey
        self.clientAddress = clientAddress
    }

    /// Parses an `Authorization` header value.
    static func bearer(fromAuthorization header: String?) -> String? {
        guard let header else { return nil }
        let parts = header.utf8.split(separator: UInt8(ascii: " "), maxSplits: 1)
        guard parts.count == 2, parts[0].count == 6,
            zip(parts[0], "bearer".utf8).allSatisfy({ $0 | 0x20 == $1 })  // ASCII letters, any case
        else { return nil }
        // Spaces and tabs around the token (Foundation's `trimmingCharacters(in:)` cost 8 µs per WebSocket).
        let isBlank = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        guard let first = parts[1].firstIndex(where: { !isBlank($0) }),
            let last = parts[1].lastIndex(where: { !isBlank($0) })
        else { return nil }
        return String(Substring(parts[1][first...last]))
    }
}
