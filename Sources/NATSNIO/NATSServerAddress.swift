/// The address of one NATS server, with the credentials to present to it.
///
/// Parse one from a URL with ``init(url:)`` or a list with ``NATSConfiguration/parseServers(_:)``:
/// ```swift
/// let address = try NATSServerAddress(url: "nats://user:pass@nats1.internal:4222")
/// ```
/// ``description`` hides the password and the token.
public struct NATSServerAddress: Sendable, Hashable, CustomStringConvertible {
    /// The default NATS client port.
    public static let defaultPort = 4222

    /// The host name or IP address (IPv6 without brackets).
    public var host: String
    /// The TCP port.
    public var port: Int
    /// The user name (`user:pass@`), if any.
    public var user: String?
    /// The password (`user:pass@`), if any.
    public var password: String?
    /// The authentication token (`token@`), if any.
    public var token: String?

    /// Creates an address.
    /// - Parameters:
    ///   - host: The host name or IP address.
    ///   - port: The TCP port, 4222 by default.
    ///   - user: The user name for user/password authentication.
    ///   - password: The password for user/password authentication.
    ///   - token: The token for token authentication.
    public init(
        host: String, port: Int = NATSServerAddress.defaultPort, user: String? = nil, password: String? = nil,
        token: String? = nil
    ) {
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.token = token
    }

    /// Parses a `nats://[user:password@|token@]host[:port]` URL.
    ///
    /// The scheme may be left out (`host:port`). The port defaults to 4222. User, password and token may be
    /// percent-encoded. IPv6 hosts are written in brackets: `nats://[::1]:4222`.
    /// - Parameter url: The URL.
    /// - Throws: ``NATSError`` with code `tlsNotSupported` for `tls://`, `invalidURL` for anything else that is
    ///   not a valid NATS URL; the message names the bad part.
    public init(url: String) throws(NATSError) {
        var rest = Substring(url.trimmingASCIIWhitespace())
        guard !rest.isEmpty else {
            throw NATSError(.invalidURL, "empty server URL")
        }
        if let schemeEnd = rest.firstRange(of: "://") {
            let scheme = rest[..<schemeEnd.lowerBound].lowercased()
            switch scheme {
            case "nats":
                break
            case "tls":
                throw NATSError(.tlsNotSupported, "TLS not supported yet: '\(Self.redacted(url))'")
            default:
                throw NATSError(.invalidURL, "unsupported scheme '\(scheme)' in '\(Self.redacted(url))': use nats://")
            }
            rest = rest[schemeEnd.upperBound...]
        }
        if let slash = rest.firstIndex(of: "/") {
            guard rest[slash...].allSatisfy({ $0 == "/" }) else {
                throw NATSError(.invalidURL, "unexpected path '\(rest[slash...])' in '\(Self.redacted(url))'")
            }
            rest = rest[..<slash]
        }
        var user: String?
        var password: String?
        var token: String?
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at]
            rest = rest[rest.index(after: at)...]
            if let colon = credentials.firstIndex(of: ":") {
                user = try Self.percentDecoded(credentials[..<colon], url: url)
                password = try Self.percentDecoded(credentials[credentials.index(after: colon)...], url: url)
            } else {
                token = try Self.percentDecoded(credentials, url: url)
            }
            if user?.isEmpty == true, password?.isEmpty == true {
                user = nil
                password = nil
            }
            if token?.isEmpty == true {
                throw NATSError(.invalidURL, "empty credentials before '@' in '\(Self.redacted(url))'")
            }
        }
        let host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else {
                throw NATSError(.invalidURL, "unterminated IPv6 host '\(rest)' in '\(Self.redacted(url))'")
            }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let afterHost = rest[rest.index(after: close)...]
            if !afterHost.isEmpty {
                guard afterHost.hasPrefix(":") else {
                    throw NATSError(.invalidURL, "unexpected '\(afterHost)' after host in '\(Self.redacted(url))'")
                }
                portText = afterHost.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        guard !host.isEmpty else {
            throw NATSError(.invalidURL, "missing host in '\(Self.redacted(url))'")
        }
        guard host.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F && $0 != UInt8(ascii: "@") }) else {
            throw NATSError(.invalidURL, "invalid host '\(host)' in '\(Self.redacted(url))'")
        }
        var port = Self.defaultPort
        if let portText {
            guard let parsed = Int(portText), (1...65_535).contains(parsed) else {
                throw NATSError(.invalidURL, "invalid port '\(portText)' in '\(Self.redacted(url))'")
            }
            port = parsed
        }
        self.init(host: String(host), port: port, user: user, password: password, token: token)
    }

    /// `nats://host:port`, with credentials shown as `***`.
    public var description: String {
        let hostPart = self.host.contains(":") ? "[\(self.host)]" : self.host
        var credentials = ""
        if let user = self.user {
            credentials = "\(user):***@"
        } else if self.token != nil {
            credentials = "***@"
        }
        return "nats://\(credentials)\(hostPart):\(self.port)"
    }

    /// Whether two addresses name the same server (same host and port), whatever their credentials.
    func isSameServer(as other: NATSServerAddress) -> Bool {
        self.port == other.port && self.host.lowercased() == other.host.lowercased()
    }

    /// The same server with the credentials of `other`, used for servers learned from INFO `connect_urls`.
    func withCredentials(of other: NATSServerAddress) -> NATSServerAddress {
        NATSServerAddress(
            host: self.host, port: self.port, user: other.user, password: other.password,
            token: other.token)
    }

    private static func redacted(_ url: String) -> String {
        guard let at = url.lastIndex(of: "@") else { return url }
        let start = url.firstRange(of: "://")?.upperBound ?? url.startIndex
        guard start <= at else { return url }
        return String(url[..<start]) + "***" + String(url[at...])
    }

    private static func percentDecoded(_ text: Substring, url: String) throws(NATSError) -> String {
        guard text.contains("%") else { return String(text) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(Self.hexValue), let low = iterator.next().flatMap(Self.hexValue)
            else {
                throw NATSError(.invalidURL, "invalid percent-encoding in credentials of '\(Self.redacted(url))'")
            }
            bytes.append(high << 4 | low)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
