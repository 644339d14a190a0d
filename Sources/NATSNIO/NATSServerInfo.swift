#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What the server says about itself in INFO.
public struct NATSServerInfo: Sendable, Hashable, Decodable {
    /// The server's unique id (`server_id`).
    public var serverID: String
    /// The server's name (`server_name`).
    public var serverName: String?
    /// The server's version, e.g. `2.10.7`.
    public var version: String
    /// The protocol version (`proto`).
    public var proto: Int
    /// The host the server listens on.
    public var host: String?
    /// The client port.
    public var port: Int?
    /// Whether the server supports headers (HPUB/HMSG).
    public var headers: Bool
    /// The largest payload the server accepts (`max_payload`), headers included.
    public var maxPayload: Int
    /// Other servers of the cluster a client may connect to (`connect_urls`), as `host:port`.
    public var connectURLs: [String]
    /// Whether the server is in lame duck mode (`ldm`): shutting down, clients should move.
    public var lameDuckMode: Bool
    /// Whether the server requires authentication.
    public var authRequired: Bool
    /// Whether the server requires TLS.
    public var tlsRequired: Bool
    /// The id the server gave this client (`client_id`).
    public var clientID: UInt64?
    /// The cluster name.
    public var cluster: String?
    /// Whether JetStream is enabled.
    public var jetStream: Bool

    enum CodingKeys: String, CodingKey {
        case serverID = "server_id"
        case serverName = "server_name"
        case version
        case proto
        case host
        case port
        case headers
        case maxPayload = "max_payload"
        case connectURLs = "connect_urls"
        case lameDuckMode = "ldm"
        case authRequired = "auth_required"
        case tlsRequired = "tls_required"
        case clientID = "client_id"
        case cluster
        case jetStream = "jetstream"
    }

    /// Creates server info, e.g. for tests.
    /// - Parameters:
    ///   - serverID: The server id.
    ///   - version: The version.
    ///   - maxPayload: The largest payload.
    ///   - connectURLs: Other servers of the cluster.
    ///   - lameDuckMode: Whether the server is in lame duck mode.
    public init(
        serverID: String, version: String = "0.0.0", maxPayload: Int = 1 << 20, connectURLs: [String] = [],
        lameDuckMode: Bool = false
    ) {
        self.serverID = serverID
        self.version = version
        self.proto = 1
        self.headers = true
        self.maxPayload = maxPayload
        self.connectURLs = connectURLs
        self.lameDuckMode = lameDuckMode
        self.authRequired = false
        self.tlsRequired = false
        self.jetStream = false
    }

    /// Decodes INFO's JSON, tolerating missing fields.
    /// - Parameter decoder: The decoder.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.serverID = try container.decodeIfPresent(String.self, forKey: .serverID) ?? ""
        self.serverName = try container.decodeIfPresent(String.self, forKey: .serverName)
        self.version = try container.decodeIfPresent(String.self, forKey: .version) ?? ""
        self.proto = try container.decodeIfPresent(Int.self, forKey: .proto) ?? 0
        self.host = try container.decodeIfPresent(String.self, forKey: .host)
        self.port = try container.decodeIfPresent(Int.self, forKey: .port)
        self.headers = try container.decodeIfPresent(Bool.self, forKey: .headers) ?? false
        self.maxPayload = try container.decodeIfPresent(Int.self, forKey: .maxPayload) ?? (1 << 20)
        self.connectURLs = try container.decodeIfPresent([String].self, forKey: .connectURLs) ?? []
        self.lameDuckMode = try container.decodeIfPresent(Bool.self, forKey: .lameDuckMode) ?? false
        self.authRequired = try container.decodeIfPresent(Bool.self, forKey: .authRequired) ?? false
        self.tlsRequired = try container.decodeIfPresent(Bool.self, forKey: .tlsRequired) ?? false
        self.clientID = try container.decodeIfPresent(UInt64.self, forKey: .clientID)
        self.cluster = try container.decodeIfPresent(String.self, forKey: .cluster)
        self.jetStream = try container.decodeIfPresent(Bool.self, forKey: .jetStream) ?? false
    }

    /// Parses INFO's JSON.
    static func parse(json bytes: some Collection<UInt8>) throws(NATSProtocolError) -> NATSServerInfo {
        do {
            return try JSONDecoder().decode(NATSServerInfo.self, from: Data(bytes))
        } catch {
            throw NATSProtocolError("invalid INFO JSON: \(error)")
        }
    }

    /// The servers of `connect_urls` that parse, with the credentials of `server`.
    func discoveredServers(credentialsFrom server: NATSServerAddress) -> [NATSServerAddress] {
        self.connectURLs.compactMap { url in
            (try? NATSServerAddress(url: url))?.withCredentials(of: server)
        }
    }
}
