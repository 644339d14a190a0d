import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import ParleyProtocol
import ParleyStore

/// What became of one webhook request.
enum WebhookSendOutcome: Sendable, Equatable {
    /// A 2xx answer.
    case delivered(status: Int)
    /// Anything else: another status (redirects are not followed), a timeout, a refused or broken connection.
    case failed(status: Int?, reason: String)
}

/// Sends webhook requests (AsyncHTTPClient over HTTP/1.1 or HTTP/2, connections pooled per host).
///
/// One request: `POST <url>` with `Content-Type: application/json`, `User-Agent: Parley-Webhooks/1`,
/// `X-Parley-Delivery` (the delivery id), `X-Parley-Event` (the event name) and ``WebhookSignature/header``, and the
/// body `{"id": <delivery id>, "event": <name>, "createdAt": <epoch ms>, "data": <the Event>}`. The whole exchange,
/// answer included, is bounded by the request timeout; at most `maxResponseBytes` of the answer are read.
final class WebhookSender: Sendable {
    private let http: HTTPClient
    private let configuration: WebhookConfiguration
    private let time: ServerClock

    init(configuration: WebhookConfiguration, time: ServerClock) {
        var httpConfiguration = HTTPClient.Configuration()
        httpConfiguration.redirectConfiguration = .disallow
        httpConfiguration.timeout = .init(connect: .seconds(5))
        httpConfiguration.decompression = .disabled
        http = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: httpConfiguration)
        self.configuration = configuration
        self.time = time
    }

    func shutdown() async {
        try? await http.shutdown()
    }

    /// The body of a delivery: the stored event inside an envelope that names the delivery.
    static func body(of job: WebhookJob) -> [UInt8] {
        var body = Array(#"{"id":"#.utf8)
        body += jsonString(job.deliveryId)
        body += Array(#","event":"#.utf8)
        body += jsonString(job.event.rawValue)
        body += Array(#","createdAt":\#(job.createdAt),"data":"#.utf8)
        body += job.body
        body += Array("}".utf8)
        return body
    }

    private static func jsonString(_ value: String) -> [UInt8] {
        (try? JSONEncoder().encode(value)).map(Array.init) ?? Array("\"\"".utf8)
    }

    func send(_ job: WebhookJob) async -> WebhookSendOutcome {
        let body = Self.body(of: job)
        var request = HTTPClientRequest(url: job.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "Parley-Webhooks/1")
        request.headers.add(name: "X-Parley-Delivery", value: job.deliveryId)
        request.headers.add(name: "X-Parley-Event", value: job.event.rawValue)
        request.headers.add(
            name: WebhookSignature.header,
            value: WebhookSignature.header(secret: job.secret, timestamp: time.epochMilliseconds() / 1000, body: body)
        )
        request.body = .bytes(ByteBuffer(bytes: body))
        let prepared = request
        let timeout = configuration.requestTimeout
        let limit = configuration.maxResponseBytes
        let timeline = time.timeline
        let deadline = timeline.now() + timeout
        let http = self.http
        return await withTaskGroup(of: WebhookSendOutcome?.self) { group in
            group.addTask {
                do {
                    let response = try await http.execute(prepared, timeout: .nanoseconds(Int64(timeout.nanoseconds)))
                    // Read (and drop) at most `limit` bytes of the answer; a longer one is cut off.
                    var read = 0
                    for try await chunk in response.body {
                        read += chunk.readableBytes
                        if read > limit { break }
                    }
                    let status = Int(response.status.code)
                    return (200..<300).contains(status)
                        ? .delivered(status: status)
                        : .failed(status: status, reason: "HTTP \(status)")
                } catch is CancellationError {
                    return nil
                } catch {
                    return .failed(status: nil, reason: Self.describe(error))
                }
            }
            group.addTask {
                try? await timeline.sleepUntil(deadline)
                return Task.isCancelled ? nil : .failed(status: nil, reason: "No answer within \(timeout)")
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? .failed(status: nil, reason: "No answer within \(timeout)")
        }
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPClientError {
            switch error {
            case .connectTimeout: return "Connecting timed out"
            case .deadlineExceeded, .readTimeout: return "No answer in time"
            case .remoteConnectionClosed: return "The connection was closed before the answer"
            default: return "\(error)"
            }
        }
        let text = "\(error)"
        return text.count > 200 ? String(text.prefix(200)) : text
    }
}
