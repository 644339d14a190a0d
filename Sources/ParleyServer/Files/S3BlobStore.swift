import AsyncHTTPClient
import Foundation
import NIOCore
import NIOFileSystem
import NIOHTTP1

/// Blobs as objects of one bucket of S3-compatible storage (AWS S3, MinIO, Ceph, moto), addressed path-style
/// (`ENDPOINT/BUCKET/KEY`) and signed with SigV4: the attachments of a deployment with several nodes, which all read
/// and write the same bucket. Uploads stream from the spooled file with their length and SHA-256 signed; reads are
/// ranged GETs streamed to the caller.
public final class S3BlobStore: BlobStore {
    public struct Configuration: Sendable {
        /// `http(s)://host:port`, without the bucket.
        public var endpoint: URL
        public var bucket: String
        public var region: String
        public var accessKeyId: String
        public var secretAccessKey: String
        /// How long one request may take (a put: per 16 MiB of the file, at least this).
        public var requestTimeout: Duration = .seconds(30)

        public init(endpoint: URL, bucket: String, region: String, accessKeyId: String, secretAccessKey: String) {
            self.endpoint = endpoint
            self.bucket = bucket
            self.region = region
            self.accessKeyId = accessKeyId
            self.secretAccessKey = secretAccessKey
        }
    }

    let configuration: Configuration
    private let signer: SigV4
    private let client: HTTPClient
    static let chunk = ByteCount.kibibytes(256)

    public init(configuration: Configuration, client: HTTPClient = .shared) {
        self.configuration = configuration
        self.signer = SigV4(
            accessKeyId: configuration.accessKeyId, secretAccessKey: configuration.secretAccessKey,
            region: configuration.region
        )
        self.client = client
    }

    private func url(_ key: BlobKey?) -> URL {
        var url = configuration.endpoint.appendingPathComponent(configuration.bucket)
        if let key { url = url.appendingPathComponent(key.description) }
        return url
    }

    /// A signed request; `headers` are signed with it.
    private func request(
        _ method: HTTPMethod, _ url: URL, headers: [(String, String)] = [], payloadHash: String = SigV4.emptyPayloadHash
    ) -> HTTPClientRequest {
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = method
        let port = url.port.map { ":\($0)" } ?? ""
        let signedHeaders = [("host", (url.host ?? "") + port)] + headers
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        for (name, value) in signer.sign(
            method: method.rawValue, url: url, headers: signedHeaders, payloadHash: payloadHash, date: Date()
        ) {
            request.headers.add(name: name, value: value)
        }
        return request
    }

    /// Creates the bucket unless it exists (for a new deployment, and the tests).
    public func ensureBucket() async throws {
        let head = try await client.execute(request(.HEAD, url(nil)), timeout: timeout(0))
        guard head.status != .ok else { return }
        let created = try await client.execute(request(.PUT, url(nil)), timeout: timeout(0))
        guard created.status == .ok || created.status == .conflict else {
            throw BlobStoreError.storage(status: Int(created.status.code), message: try await Self.text(created))
        }
    }

    public func put(key: BlobKey, file: String, size: Int64, sha256: [UInt8], contentType: String) async throws {
        defer { unlink(file) }
        try await FileSystem.shared.withFileHandle(forReadingAt: FilePath(file)) { handle in
            var put = request(
                .PUT, url(key), headers: [("content-type", contentType), ("content-length", "\(size)")],
                payloadHash: Secrets.hex(sha256)
            )
            put.headers.remove(name: "content-length")
            put.body = .stream(handle.readChunks(in: 0..<size, chunkLength: Self.chunk), length: .known(size))
            let response = try await client.execute(put, timeout: timeout(size))
            guard response.status == .ok else {
                throw BlobStoreError.storage(status: Int(response.status.code), message: try await Self.text(response))
            }
            _ = try await response.body.collect(upTo: 64 * 1024)
        }
    }

    public func size(of key: BlobKey) async throws -> Int64? {
        let response = try await client.execute(request(.HEAD, url(key)), timeout: timeout(0))
        switch response.status {
        case .ok: return response.headers.first(name: "content-length").flatMap { Int64($0) }
        case .notFound: return nil
        default: throw BlobStoreError.storage(status: Int(response.status.code), message: "HEAD \(key)")
        }
    }

    public func read(_ key: BlobKey, range: Range<Int64>, into write: (ByteBuffer) async throws -> Void) async throws {
        guard !range.isEmpty else { return }
        let get = request(.GET, url(key), headers: [("range", "bytes=\(range.lowerBound)-\(range.upperBound - 1)")])
        let response = try await client.execute(get, timeout: timeout(range.upperBound - range.lowerBound))
        switch response.status {
        case .partialContent, .ok:
            var remaining = range.upperBound - range.lowerBound
            for try await chunk in response.body {
                guard remaining > 0 else { break }
                let slice = chunk.getSlice(at: chunk.readerIndex, length: min(chunk.readableBytes, Int(remaining)))!
                remaining -= Int64(slice.readableBytes)
                try await write(slice)
            }
            guard remaining == 0 else {
                throw BlobStoreError.storage(status: Int(response.status.code), message: "the object ended early")
            }
        case .notFound:
            throw BlobStoreError.notFound(key.description)
        case .rangeNotSatisfiable:
            throw BlobStoreError.invalidRange
        default:
            throw BlobStoreError.storage(status: Int(response.status.code), message: try await Self.text(response))
        }
    }

    public func delete(_ key: BlobKey) async throws {
        let response = try await client.execute(request(.DELETE, url(key)), timeout: timeout(0))
        guard response.status == .noContent || response.status == .ok || response.status == .notFound else {
            throw BlobStoreError.storage(status: Int(response.status.code), message: try await Self.text(response))
        }
    }

    /// The request timeout, plus a second per 16 MiB of payload.
    private func timeout(_ bytes: Int64) -> TimeAmount {
        .milliseconds(Int64(configuration.requestTimeout.components.seconds) * 1000 + bytes / (16 * 1024 * 1024) * 1000)
    }

    /// The start of an error answer's body (S3's XML names the code), for the error.
    private static func text(_ response: HTTPClientResponse) async throws -> String {
        let body = try await response.body.collect(upTo: 64 * 1024)
        let text = String(buffer: body)
        if let start = text.range(of: "<Code>"),
            let end = text.range(of: "</Code>", range: start.upperBound..<text.endIndex)
        {
            return String(text[start.upperBound..<end.lowerBound])
        }
        return String(text.prefix(200))
    }
}
