import Crypto
import Foundation
import NIOConcurrencyHelpers

/// The APNs provider token: a JWT signed with ES256 by the team's `.p8` key, sent as `authorization: bearer`.
///
/// APNs rejects a token older than an hour (`ExpiredProviderToken`) and one replaced more often than every 20
/// minutes (`TooManyProviderTokenUpdates`), so one token is shared by every request and made again after
/// ``refreshAfter``, or when APNs says it expired.
final class APNsProviderToken: Sendable {
    static let refreshAfter: Int64 = 50 * 60

    private let key: P256.Signing.PrivateKey
    let keyId: String
    let teamId: String
    private let cached = NIOLockedValueBox<(token: String, issuedAt: Int64)?>(nil)

    init(key: P256.Signing.PrivateKey, keyId: String, teamId: String) {
        self.key = key
        self.keyId = keyId
        self.teamId = teamId
    }

    /// Loads and checks the key file and identifiers.
    ///
    /// - Throws: ``PushConfigurationError`` naming what is wrong (never the key itself).
    static func load(_ configuration: APNsConfiguration) throws -> APNsProviderToken {
        guard isAppleIdentifier(configuration.keyId) else {
            throw PushConfigurationError(
                "APNs key id \"\(configuration.keyId)\" is not 10 letters or digits (--apns-key-id).")
        }
        guard isAppleIdentifier(configuration.teamId) else {
            throw PushConfigurationError(
                "APNs team id \"\(configuration.teamId)\" is not 10 letters or digits (--apns-team-id).")
        }
        guard !configuration.topic.isEmpty else {
            throw PushConfigurationError("APNs topic (the app's bundle id) is empty (--apns-topic).")
        }
        let pem: String
        do {
            pem = try String(contentsOfFile: configuration.keyFile, encoding: .utf8)
        } catch {
            throw PushConfigurationError(
                "Cannot read the APNs key file \(configuration.keyFile): \(error.localizedDescription)")
        }
        let key: P256.Signing.PrivateKey
        do {
            key = try P256.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw PushConfigurationError(
                "The APNs key file \(configuration.keyFile) is not a P-256 private key in PEM (the .p8 file from Apple)."
            )
        }
        return APNsProviderToken(key: key, keyId: configuration.keyId, teamId: configuration.teamId)
    }

    private static func isAppleIdentifier(_ value: String) -> Bool {
        value.utf8.count == 10
            && value.utf8.allSatisfy { (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) }
    }

    /// The token to send at `now` (Unix seconds): the cached one while it is younger than ``refreshAfter``.
    func token(now: Int64) throws -> String {
        if let current = cached.withLockedValue({ $0 }), now - current.issuedAt < Self.refreshAfter,
            now >= current.issuedAt
        {
            return current.token
        }
        let token = try sign(issuedAt: now)
        cached.withLockedValue { $0 = (token, now) }
        return token
    }

    /// Forgets `token` (APNs answered `ExpiredProviderToken`), so the next request signs a new one.
    func expire(_ token: String) {
        cached.withLockedValue { cached in
            if cached?.token == token { cached = nil }
        }
    }

    func sign(issuedAt: Int64) throws -> String {
        let header = #"{"alg":"ES256","kid":"\#(keyId)"}"#
        let claims = #"{"iss":"\#(teamId)","iat":\#(issuedAt)}"#
        let signingInput = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        // JWS ES256: the raw 64-byte r || s, not DER.
        let signature = try key.signature(for: Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(Array(signature.rawRepresentation))
    }
}

/// Base64 with the URL alphabet and no padding (RFC 7515).
enum Base64URL {
    static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
