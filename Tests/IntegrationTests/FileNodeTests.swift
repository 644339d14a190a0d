import Crypto
import Foundation
import ParleyProtocol
import ParleyServer
import ParleyTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Files through real server processes: two nodes sharing PostgreSQL and an S3-compatible bucket, and a 200 MiB file
/// through one node with its resident memory watched (docs/BENCHMARKS.md, appendix "Design notes", "Files").
@Suite(
    .enabled(
        if: ServerProcess.isAvailable,
        "File node tests SKIPPED: they need the parley-server binary (swift build --build-tests)."
    ),
    .serialized, .timeLimit(.minutes(3))
)
struct FileNodeTests {
    static var s3URL: String? { ProcessInfo.processInfo.environment["PARLEY_TEST_S3_URL"] }

    /// A participant uploads and sends on node A; the other downloads (whole and a range) from node B.
    @Test(
        .enabled(
            if: PostgresTestDatabase.isConfigured && s3URL != nil,
            "SKIPPED: needs PARLEY_TEST_DATABASE_URL and PARLEY_TEST_S3_URL (run scripts/test)."
        )
    )
    func anUploadOnOneNodeDownloadsFromTheOther() async throws {
        let s3 = [
            "--s3-endpoint", try #require(Self.s3URL), "--s3-bucket", "nodes-\(UInt32.random(in: 0...UInt32.max))",
            "--s3-access-key-id", "parley", "--s3-secret-access-key", "parley-secret",
        ]
        let nodes = try await MultiNodeTests.twoNodes(extraArguments: s3)
        let alice = try await nodes.a.login("alice")
        let bob = try await nodes.b.login("bob")
        let conversation = try await nodes.a.createConversation(token: alice, with: ["bob"])
        var bytes = [UInt8](repeating: 0, count: 300_000)
        for index in bytes.indices { bytes[index] = UInt8(truncatingIfNeeded: index &* 31 &+ index >> 8) }
        let uploaded = try await Self.post(
            nodes.a, "/v1/conversations/\(conversation.id)/attachments?name=notes.bin", token: alice, body: bytes
        )
        #expect(uploaded.status == 201)
        let attachment = try WireCoding.decode(Attachment.self, from: uploaded.body)
        let sent = try await nodes.a.request(
            "POST", "/v1/conversations/\(conversation.id)/messages", token: alice,
            body: SendMessageRequest(parts: [.text("notes"), .file(attachment)])
        )
        #expect(sent.status == 201)

        // Node B shows the message with its file and serves the bytes from the shared bucket.
        let history: MessagePage = try await nodes.b.request(
            "GET", "/v1/conversations/\(conversation.id)/messages", token: bob
        ).decode()
        #expect(history.messages.first?.files == [FileInfo(attachment)])
        let link: AttachmentLink = try await nodes.b.request(
            "GET", "/v1/conversations/\(conversation.id)/attachments/\(attachment.id)", token: bob
        ).decode()
        let whole = try await nodes.b.request("GET", link.url)
        #expect(whole.status == 200 && whole.body == bytes)
        let range = try await nodes.b.request("GET", link.url, headers: ["Range": "bytes=1000-1999"])
        #expect(range.status == 206 && range.body == Array(bytes[1000..<2000]))
        // A link signed by one node is good on the other (the key comes from the shared database).
        #expect(try await nodes.a.request("GET", link.url).body == bytes)
        try await nodes.stop()
    }

    /// 200 MiB up and down through one node: the server streams it (spool file, blob store), so its resident memory
    /// stays near where it started.
    @Test func twoHundredMebibytesTravelWithFlatServerMemory() async throws {
        let directory = try TemporaryDirectory(prefix: "parley-large")
        let store = try openSQLiteStore(in: directory.path)
        let app = try await AppProvisioning.createApp(in: store, name: "Large files")
        try await store.close()
        let server = try await ServerProcess.start(
            label: "large", app: app,
            arguments: [
                "--data-dir", directory.path, "--max-file-bytes", "\(256 * 1024 * 1024)",
                "--messages-per-second-per-user",
                "0",
            ]
        )
        let alice = try await server.login("alice")
        let conversation = try await server.createConversation(token: alice, with: [])
        let mebibyte = TestBytes.random(1024 * 1024)
        let count = 200
        var expected = SHA256()
        for _ in 0..<count { expected.update(data: mebibyte) }
        let digest = expected.finalize().map { String(format: "%02x", $0) }.joined()

        // Warm up: a small upload first, so the baseline includes what any upload allocates once.
        _ = try await Self.post(
            server, "/v1/conversations/\(conversation.id)/attachments?name=warm.bin", token: alice, body: mebibyte)
        let baseline = try #require(server.residentBytes)
        var peak = baseline
        let socket = try await RawSocket.connected(port: server.port)
        try await socket.send(
            "POST /v1/conversations/\(conversation.id)/attachments?name=big.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + "Authorization: Bearer \(alice)\r\nContent-Type: application/octet-stream\r\n"
                + "Content-Length: \(count * mebibyte.count)\r\n\r\n"
        )
        for _ in 0..<count {
            try await socket.send(mebibyte)
            peak = max(peak, server.residentBytes ?? 0)
        }
        let answer = try await socket.readResponse()
        socket.close()
        #expect(answer.status == 201)
        let attachment = try WireCoding.decode(Attachment.self, from: answer.body)
        #expect(attachment.size == Int64(count * mebibyte.count) && attachment.sha256 == digest)
        let grownUp = peak - baseline

        _ = try await server.request(
            "POST", "/v1/conversations/\(conversation.id)/messages", token: alice,
            body: SendMessageRequest(parts: [.file(attachment)]))
        let link: AttachmentLink = try await server.request(
            "GET", "/v1/conversations/\(conversation.id)/attachments/\(attachment.id)", token: alice
        ).decode()
        let downloadBaseline = try #require(server.residentBytes)
        let download = try await RawSocket.connected(port: server.port)
        try await download.send("GET \(link.url) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        let head = try await download.readHead()
        #expect(head.hasPrefix("HTTP/1.1 200"))
        let received = try await FileTransferBytes.drain(download) { server.residentBytes }
        download.close()
        #expect(received.count == Int64(count * mebibyte.count) && received.sha256 == digest)
        let grownDown = received.peakResident - downloadBaseline
        // Streaming holds a few chunks at a time; a server holding the file would grow by 200 MiB. A download holds
        // at most 8 chunks read ahead (2 MiB), 2 MiB waiting for the event loop (`OutboundPacer`) and the socket's
        // pending bytes: 4-8 MiB measured. Before the pacer the loop's queue grew with its lag: 12-47 MiB here, 58 in CI.
        #expect(grownUp < 48 * 1024 * 1024, "the upload grew the server by \(grownUp / 1024) KiB")
        #expect(grownDown < 20 * 1024 * 1024, "the download grew the server by \(grownDown / 1024) KiB")
        print("200 MiB: server RSS +\(grownUp / 1024) KiB uploading, +\(grownDown / 1024) KiB downloading")
        await server.stop()
    }

    static func post(_ server: any ParleyEndpoint, _ path: String, token: String, body: [UInt8]) async throws
        -> (status: Int, body: [UInt8])
    {
        var request = URLRequest(url: URL(string: server.baseURL.absoluteString + path)!)
        request.httpMethod = "POST"
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(body)
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, Array(data))
    }
}

struct FileNodeError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A download read without a per-byte loop (debug builds are slow at those).
enum FileTransferBytes {
    /// Reads a socket to its end on a thread of its own, hashing as it goes and sampling `resident` every 8 MiB.
    static func drain(_ socket: RawSocket, resident: @escaping @Sendable () -> Int?) async throws
        -> (count: Int64, sha256: String, peakResident: Int)
    {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                var hasher = SHA256()
                var count: Int64 = 0
                var peak = resident() ?? 0
                var buffer = [UInt8](repeating: 0, count: 256 * 1024)
                var sinceSample = 0
                while true {
                    let read = buffer.withUnsafeMutableBytes { Glibc.read(socket.descriptor, $0.baseAddress, $0.count) }
                    if read < 0 {
                        continuation.resume(throwing: FileNodeError("read failed: errno \(errno)"))
                        return
                    }
                    if read == 0 { break }
                    buffer.withUnsafeBytes {
                        hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[..<read]))
                    }
                    count += Int64(read)
                    sinceSample += read
                    if sinceSample >= 8 * 1024 * 1024 {
                        sinceSample = 0
                        peak = max(peak, resident() ?? 0)
                    }
                }
                let digest = hasher.finalize().map { String(format: "%02x", $0) }.joined()
                continuation.resume(returning: (count, digest, peak))
            }
            thread.start()
        }
    }
}
