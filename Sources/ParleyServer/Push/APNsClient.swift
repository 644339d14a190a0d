import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import ParleyProtocol
import ParleyStore

/// What became of one push.
enum PushSendOutcome: Sendable, Equatable {
    /// Accepted by the push service.
    case delivered
    /// The token is no longer valid for the app (APNs 410 `Unregistered`, 400 `BadDeviceToken`,
    /// `DeviceTokenNotForTopic`); `since` is when APNs last knew it invalid (epoch milliseconds) when it says.
    case invalidToken(reason: String, since: Int64?)
    /// Not sent now; try again (429, 5xx, an expired provider token, a network failure). `after` is the wait the
    /// service asked for, if any.
    case retry(reason: String, after: Duration?)
    /// Refused for good (a payload too large, a malformed header): dropped.
    case rejected(reason: String)
}

/// Sends pushes to one push service. ``APNsClient`` is the real one; tests point it at a local APNs stand-in.
protocol PushSender: Sendable {
    func send(_ job: PushJob) async -> PushSendOutcome
    func shutdown() async
}

/// The APNs provider API over HTTP/2 (AsyncHTTPClient: TLS with ALPN `h2`, one pooled connection per host with
/// many concurrent streams), with token authentication.
///
/// One request: `POST /3/device/<token>` with `authorization: bearer <JWT>`, `apns-topic`, `apns-push-type:
/// alert`, `apns-priority: 10`, `apns-expiration`, `apns-collapse-id` (the message id, so that a push sent twice
/// shows once) and the JSON payload.
final class APNsClient: PushSender {
    static let productionURL = URL(string: "https://api.push.apple.com")!
    static let sandboxURL = URL(string: "https://api.sandbox.push.apple.com")!

    private let http: HTTPClient
    private let configuration: APNsConfiguration
    private let providerToken: APNsProviderToken
    private let expiry: Duration
    private let time: ServerClock

    /// - Throws: ``PushConfigurationError`` when the key, the identifiers or the trust roots cannot be used.
    init(configuration: APNsConfiguration, expiry: Duration, time: ServerClock) throws {
        providerToken = try APNsProviderToken.load(configuration)
        var tls = TLSConfiguration.makeClientConfiguration()
        if let roots = try Self.trustRoots(configuration) { tls.trustRoots = roots }
        try Self.checkEndpoint(configuration)
        var httpConfiguration = HTTPClient.Configuration(tlsConfiguration: tls)
        httpConfiguration.httpVersion = .automatic
        httpConfiguration.timeout = .init(connect: .seconds(10))
        http = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: httpConfiguration)
        self.configuration = configuration
        self.expiry = expiry
        self.time = time
    }

    /// The configured trust roots; nil for the system's.
    static func trustRoots(_ configuration: APNsConfiguration) throws -> NIOSSLTrustRoots? {
        guard let file = configuration.trustRootsFile else { return nil }
        let certificates = try? NIOSSLCertificate.fromPEMFile(file)
        guard let certificates, !certificates.isEmpty else {
            throw PushConfigurationError("Cannot read the APNs trust roots \(file): no PEM certificate in it.")
        }
        return .certificates(certificates)
    }

    static func checkEndpoint(_ configuration: APNsConfiguration) throws {
        if let endpoint = configuration.endpoint, endpoint.scheme != "https" || endpoint.host == nil {
            throw PushConfigurationError("The APNs endpoint \(endpoint) is not an https:// URL (--apns-endpoint).")
        }
    }

    func shutdown() async {
        try? await http.shutdown()
    }

    func send(_ job: PushJob) async -> PushSendOutcome {
        let base =
            configuration.endpoint ?? (job.environment == .production ? Self.productionURL : Self.sandboxURL)
        let now = time.epochMilliseconds()
        let token: String
        do {
            token = try providerToken.token(now: now / 1000)
        } catch {
            return .retry(reason: "signing the provider token failed: \(error)", after: nil)
        }
        var request = HTTPClientRequest(url: base.absoluteString + "/3/device/" + job.token)
        request.method = .POST
        request.headers.add(name: "authorization", value: "bearer \(token)")
        request.headers.add(name: "apns-topic", value: configuration.topic)
        request.headers.add(name: "apns-push-type", value: "alert")
        request.headers.add(name: "apns-priority", value: "10")
        let expiresAt = (job.createdAt + Int64(expiry.components.seconds) * 1000) / 1000
        request.headers.add(name: "apns-expiration", value: String(expiresAt))
        if job.collapseId.utf8.count <= 64 { request.headers.add(name: "apns-collapse-id", value: job.collapseId) }
        request.headers.add(name: "content-type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: job.payload))

        let status: HTTPResponseStatus
        let headers: HTTPHeaders
        let body: ByteBuffer
        do {
            let response = try await http.execute(request, timeout: configuration.requestTimeout.timeAmount)
            status = response.status
            headers = response.headers
            body = try await response.body.collect(upTo: 64 * 1024)
        } catch {
            return .retry(reason: "\(error)", after: nil)
        }
        return Self.outcome(
            status: status, headers: headers, body: body, onExpiredToken: { providerToken.expire(token) })
    }

    /// Reads an APNs answer (status, `{"reason": ..., "timestamp": ...}`).
    static func outcome(
        status: HTTPResponseStatus, headers: HTTPHeaders, body: ByteBuffer, onExpiredToken: () -> Void
    ) -> PushSendOutcome {
        struct Answer: Decodable {
            var reason: String?
            var timestamp: Int64?
        }
        if status == .ok { return .delivered }
        let answer = try? JSONDecoder().decode(Answer.self, from: Data(body.readableBytesView))
        let reason = answer?.reason ?? "HTTP \(status.code)"
        let retryAfter = headers.first(name: "retry-after").flatMap(Int64.init).map { Duration.seconds($0) }
        switch (status.code, reason) {
        case (410, _):
            return .invalidToken(reason: reason, since: answer?.timestamp)
        case (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"):
            return .invalidToken(reason: reason, since: nil)
        case (403, "ExpiredProviderToken"):
            onExpiredToken()
            return .retry(reason: reason, after: .zero)
        case (403, _), (429, _), (500...599, _):
            return .retry(reason: reason, after: retryAfter)
        default:
            return .rejected(reason: reason)
        }
    }
}
