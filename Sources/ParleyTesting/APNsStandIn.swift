import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import ParleyServer
import SwiftASN1
import X509

/// A local stand-in for the APNs provider API, for tests: HTTP/2 over TLS (ALPN `h2`) on 127.0.0.1 with a
/// certificate made for the run, checking each request the way APNs does before it answers.
///
/// It makes its own signing key (``keyFile``, a `.p8`-style PEM) and CA (``trustRootsFile``), so a server
/// configured with ``apnsConfiguration(topic:)`` talks to it exactly as to Apple, through the real provider code.
///
/// Checks, each answered with APNs' status and `{"reason": ...}`:
/// - `POST /3/device/<hex token>` (else 404 `BadPath` / 405 `MethodNotAllowed`; 400 `BadDeviceToken`);
/// - `authorization: bearer <JWT>`: ES256, `kid` = the key id, `iss` = the team id, `iat` within the last hour,
///   signature valid for the key (403 `MissingProviderToken`, `InvalidProviderToken`, `ExpiredProviderToken`);
/// - `apns-topic` = the app's topic (400 `MissingTopic`, `BadTopic`), `apns-push-type: alert` (400
///   `InvalidPushType`), `apns-priority` 5 or 10 (400 `BadPriority`), `apns-collapse-id` at most 64 bytes (400
///   `BadCollapseId`), `apns-expiration` a number (400 `BadExpirationDate`);
/// - a JSON object with an `aps` dictionary (400 `PayloadEmpty`), at most 4096 bytes (413 `PayloadTooLarge`).
///
/// Then it answers what the test scripted for the token (``script(_:for:)``), or ``everyToken``, else 200 with an
/// `apns-id`. Every request, accepted or not, is recorded (``requests``, ``waitForRequests(_:)``).
public final class APNsStandIn: Sendable {
    /// An answer the test scripts.
    public enum Answer: Sendable, Hashable {
        case accept
        /// 410 `Unregistered`, with `timestamp` (epoch ms) when given.
        case unregistered(timestamp: Int64?)
        /// Any status and reason, e.g. `(429, "TooManyRequests")`, `(503, "ServiceUnavailable")`.
        case status(Int, String)
    }

    /// One request as the stand-in saw it.
    public struct Request: Sendable, Hashable {
        public var token: String
        public var headers: [String: String]
        public var payload: [UInt8]
        /// The JWT claims' `iat`, when the token could be read.
        public var issuedAt: Int64?
        /// The status answered.
        public var status: Int
        /// The reason answered with an error status; nil for 200.
        public var reason: String?

        /// The payload as a JSON object.
        public var json: [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(payload))) as? [String: Any] ?? [:]
        }
    }

    public let port: Int
    public let keyId: String
    public let teamId: String
    public let topic: String
    /// The `.p8` signing key to configure the server with.
    public let keyFile: String
    /// The CA that signed the stand-in's certificate, to configure as the server's APNs trust roots.
    public let trustRootsFile: String
    public var endpoint: URL { URL(string: "https://127.0.0.1:\(port)")! }

    private let channel: any Channel
    private let directory: TemporaryDirectory
    let state: NIOLockedValueBox<StandInState>

    struct StandInState {
        var scripts: [String: [Answer]] = [:]
        var everyToken: Answer?
        var requests: [Request] = []
        var connections = 0
        var waiters: [(id: UInt64, count: Int, continuation: CheckedContinuation<[Request], Never>)] = []
        var lastWaiter: UInt64 = 0
        /// Waits given up before their continuation was kept (a task cancelled before it waited).
        var abandoned: Set<UInt64> = []
    }

    private init(
        port: Int, keyId: String, teamId: String, topic: String, keyFile: String, trustRootsFile: String,
        channel: any Channel, directory: TemporaryDirectory, state: NIOLockedValueBox<StandInState>
    ) {
        self.port = port
        self.keyId = keyId
        self.teamId = teamId
        self.topic = topic
        self.keyFile = keyFile
        self.trustRootsFile = trustRootsFile
        self.channel = channel
        self.directory = directory
        self.state = state
    }

    /// Starts a stand-in on a free port of 127.0.0.1 with a new key and certificate.
    public static func start(
        keyId: String = "KEY1234567", teamId: String = "TEAM123456", topic: String = "com.example.chat",
        port: Int = 0
    ) async throws -> APNsStandIn {
        let directory = try TemporaryDirectory(prefix: "apns-stand-in")
        let signingKey = P256.Signing.PrivateKey()
        let keyFile = directory.path + "/AuthKey_\(keyId).p8"
        try signingKey.pemRepresentation.write(toFile: keyFile, atomically: true, encoding: .utf8)

        // A CA, and the server certificate it signs for 127.0.0.1 and localhost.
        let caKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName { CommonName("Parley test APNs CA") }
        let now = Date()
        let ca = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(caKey.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(86_400),
            issuer: caName, subject: caName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: .init(caKey)
        )
        let serverKey = P256.Signing.PrivateKey()
        let serverCertificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(serverKey.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(86_400),
            issuer: caName, subject: try DistinguishedName { CommonName("127.0.0.1") },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                SubjectAlternativeNames([
                    .dnsName("localhost"), .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])),
                ])
                try ExtendedKeyUsage([.serverAuth])
            },
            issuerPrivateKey: .init(caKey)
        )
        let trustRootsFile = directory.path + "/ca.pem"
        try ca.serializeAsPEM().pemString.write(toFile: trustRootsFile, atomically: true, encoding: .utf8)

        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: [
                .certificate(
                    try NIOSSLCertificate(bytes: Array(serverCertificate.serializeAsPEM().pemString.utf8), format: .pem)
                )
            ],
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(serverKey.pemRepresentation.utf8), format: .pem))
        )
        tls.applicationProtocols = ["h2"]
        let context = try NIOSSLContext(configuration: tls)

        let state = NIOLockedValueBox(StandInState())
        let checker = RequestChecker(
            keyId: keyId, teamId: teamId, topic: topic, publicKey: signingKey.publicKey, state: state
        )
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                state.withLockedValue { $0.connections += 1 }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    _ = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                        mode: .server, connectionConfiguration: .init(), streamConfiguration: .init()
                    ) { stream in
                        stream.eventLoop.makeCompletedFuture {
                            try stream.pipeline.syncOperations.addHandlers(
                                HTTP2FramePayloadToHTTP1ServerCodec(), StreamHandler(checker: checker)
                            )
                        }
                    }
                }
            }
            .bind(host: "127.0.0.1", port: port).get()
        return APNsStandIn(
            port: channel.localAddress?.port ?? 0, keyId: keyId, teamId: teamId, topic: topic, keyFile: keyFile,
            trustRootsFile: trustRootsFile, channel: channel, directory: directory, state: state
        )
    }

    /// Stops listening (open connections are closed too).
    public func stop() async throws {
        try await channel.close()
    }

    /// Answers the next requests for `token` with `answers`, in order; then 200 again.
    public func script(_ answers: [Answer], for token: String) {
        state.withLockedValue { $0.scripts[token.lowercased(), default: []] += answers }
    }

    /// Answers every request (not scripted per token) with `answer`; nil goes back to 200.
    public func answerEveryToken(with answer: Answer?) {
        state.withLockedValue { $0.everyToken = answer }
    }

    /// Every request so far, in arrival order.
    public var requests: [Request] { state.withLockedValue { $0.requests } }

    /// TCP connections accepted so far (APNs wants providers to keep one open and send many requests over it).
    public var connectionCount: Int { state.withLockedValue { $0.connections } }

    /// Requests answered 200 so far.
    public var accepted: [Request] { requests.filter { $0.status == 200 } }

    /// Waits until at least `count` requests have arrived; returns them all. Gives up after `timeout`, or when the
    /// waiting task is cancelled (a test's time limit), and returns what arrived: the caller's expectations then fail
    /// instead of the test hanging on a push that never comes.
    public func waitForRequests(_ count: Int, timeout: Duration = .seconds(60)) async -> [Request] {
        let id = state.withLockedValue { state -> UInt64 in
            state.lastWaiter += 1
            return state.lastWaiter
        }
        // Not a child task: it runs out even when the waiting task was cancelled before its continuation was kept.
        let deadline = Task { [self] in
            guard (try? await Task.sleep(for: timeout)) != nil else { return }
            giveUp(id)
        }
        defer { deadline.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = state.withLockedValue { state -> [Request]? in
                    if state.requests.count >= count || state.abandoned.remove(id) != nil { return state.requests }
                    state.waiters.append((id, count, continuation))
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            giveUp(id)
        }
    }

    /// Ends one waiter's wait with the requests so far; one not waiting yet ends as soon as it would.
    private func giveUp(_ id: UInt64) {
        let (waiter, requests) = state.withLockedValue {
            state -> (CheckedContinuation<[Request], Never>?, [Request]) in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else {
                state.abandoned.insert(id)
                return (nil, state.requests)
            }
            return (state.waiters.remove(at: index).continuation, state.requests)
        }
        waiter?.resume(returning: requests)
    }
}

/// Checks one request as APNs would and picks the answer; records it.
struct RequestChecker: Sendable {
    let keyId: String
    let teamId: String
    let topic: String
    let publicKey: P256.Signing.PublicKey
    let state: NIOLockedValueBox<APNsStandIn.StandInState>

    func answer(method: HTTPMethod, uri: String, headers: HTTPHeaders, body: [UInt8]) -> (
        Int, String?, [String: String]
    ) {
        var flat: [String: String] = [:]
        for (name, value) in headers { flat[name.lowercased()] = value }
        let token = uri.hasPrefix("/3/device/") ? String(uri.dropFirst("/3/device/".count)) : ""
        let issuedAt = headers.first(name: "authorization").flatMap(Self.claims)?.iat
        let (status, reason) = check(method: method, uri: uri, token: token, headers: headers, body: body)
        var request = APNsStandIn.Request(
            token: token.lowercased(), headers: flat, payload: body, issuedAt: issuedAt, status: status, reason: reason
        )
        var timestamp: Int64?
        let (woken, requests) = state.withLockedValue { state in
            if status == 200 {
                // The test's script decides the answer to a request that passed every check.
                var answer = state.everyToken ?? .accept
                if var scripted = state.scripts[request.token], !scripted.isEmpty {
                    answer = scripted.removeFirst()
                    state.scripts[request.token] = scripted
                }
                switch answer {
                case .accept: break
                case .unregistered(let since):
                    request.status = 410
                    request.reason = "Unregistered"
                    timestamp = since
                case .status(let code, let reason):
                    request.status = code
                    request.reason = reason
                }
            }
            state.requests.append(request)
            let count = state.requests.count
            let woken = state.waiters.filter { $0.count <= count }.map(\.continuation)
            state.waiters.removeAll { $0.count <= count }
            return (woken, state.requests)
        }
        for continuation in woken { continuation.resume(returning: requests) }
        let answer = request.reason.map { reason in
            timestamp.map { #"{"reason":"\#(reason)","timestamp":\#($0)}"# } ?? #"{"reason":"\#(reason)"}"#
        }
        return (request.status, answer, ["apns-id": UUID().uuidString])
    }

    private func check(method: HTTPMethod, uri: String, token: String, headers: HTTPHeaders, body: [UInt8]) -> (
        Int, String?
    ) {
        guard uri.hasPrefix("/3/device/") else { return (404, "BadPath") }
        guard method == .POST else { return (405, "MethodNotAllowed") }
        guard token.count >= 16, token.count.isMultiple(of: 2), token.allSatisfy(\.isHexDigit) else {
            return (400, "BadDeviceToken")
        }
        guard let authorization = headers.first(name: "authorization") else { return (403, "MissingProviderToken") }
        switch verify(authorization) {
        case .valid: break
        case .invalid: return (403, "InvalidProviderToken")
        case .expired: return (403, "ExpiredProviderToken")
        }
        guard let topic = headers.first(name: "apns-topic") else { return (400, "MissingTopic") }
        guard topic == self.topic else { return (400, "BadTopic") }
        guard headers.first(name: "apns-push-type") == "alert" else { return (400, "InvalidPushType") }
        if let priority = headers.first(name: "apns-priority"), !["5", "10", "1"].contains(priority) {
            return (400, "BadPriority")
        }
        if let collapse = headers.first(name: "apns-collapse-id"), collapse.utf8.count > 64 {
            return (400, "BadCollapseId")
        }
        if let expiration = headers.first(name: "apns-expiration"), Int64(expiration) == nil {
            return (400, "BadExpirationDate")
        }
        guard body.count <= 4096 else { return (413, "PayloadTooLarge") }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any],
            object["aps"] is [String: Any]
        else { return (400, "PayloadEmpty") }
        return (200, nil)
    }

    private enum Verdict { case valid, invalid, expired }

    private func verify(_ authorization: String) -> Verdict {
        guard authorization.hasPrefix("bearer ") else { return .invalid }
        let jwt = authorization.dropFirst("bearer ".count)
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Self.base64URL(parts[0]), let signature = Self.base64URL(parts[2]),
            let header = (try? JSONSerialization.jsonObject(with: Data(headerBytes))) as? [String: Any],
            header["alg"] as? String == "ES256", header["kid"] as? String == keyId,
            let claims = Self.claims(authorization), claims.iss == teamId,
            let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature),
            publicKey.isValidSignature(ecdsa, for: Array((parts[0] + "." + parts[1]).utf8))
        else { return .invalid }
        let now = Int64(Date().timeIntervalSince1970)
        if claims.iat > now + 60 { return .invalid }
        return now - claims.iat > 3600 ? .expired : .valid
    }

    static func claims(_ authorization: String) -> (iss: String, iat: Int64)? {
        let parts = authorization.dropFirst("bearer ".count).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let bytes = base64URL(parts[1]),
            let claims = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any],
            let iss = claims["iss"] as? String, let iat = (claims["iat"] as? NSNumber)?.int64Value
        else { return nil }
        return (iss, iat)
    }

    static func base64URL(_ text: Substring) -> [UInt8]? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.utf8.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64).map(Array.init)
    }
}

/// One HTTP/2 stream: collects the request, answers it.
private final class StreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let checker: RequestChecker
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []

    init(checker: RequestChecker) {
        self.checker = checker
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body(var buffer):
            body += buffer.readBytes(length: buffer.readableBytes) ?? []
        case .end:
            guard let head else { return }
            let (status, reason, extra) = checker.answer(
                method: head.method, uri: head.uri, headers: head.headers, body: body)
            var headers = HTTPHeaders()
            for (name, value) in extra { headers.add(name: name, value: value) }
            let payload = reason.map { ByteBuffer(string: $0) }
            if payload != nil { headers.add(name: "content-type", value: "application/json") }
            headers.add(name: "content-length", value: String(payload?.readableBytes ?? 0))
            context.write(
                wrapOutboundOut(
                    .head(HTTPResponseHead(version: .http2, status: .init(statusCode: status), headers: headers))),
                promise: nil
            )
            if let payload { context.write(wrapOutboundOut(.body(.byteBuffer(payload))), promise: nil) }
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}

extension APNsStandIn {
    /// A server's APNs configuration for this stand-in: its key, ids, topic, address and CA.
    public func apnsConfiguration() -> APNsConfiguration {
        var configuration = APNsConfiguration(keyFile: keyFile, keyId: keyId, teamId: teamId, topic: topic)
        configuration.endpoint = endpoint
        configuration.trustRootsFile = trustRootsFile
        return configuration
    }
}
