import Crypto
import Foundation
import Logging
import NIOConcurrencyHelpers
import ParleyProtocol
import ParleyStore
import ParleyTesting
import Testing

@testable import ParleyServer

#if canImport(Glibc)
    import Glibc
#endif

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Uploads and downloads of attachments, on disk and on S3-compatible storage (docs/PROTOCOL.md, "Attachments").
@Suite(.timeLimit(.minutes(2))) struct FileTransferTests {
    enum Storage: String, CaseIterable, Sendable {
        case disk
        case s3
    }

    static var s3URL: URL? { ProcessInfo.processInfo.environment["PARLEY_TEST_S3_URL"].flatMap(URL.init(string:)) }
    /// Disk always; S3 when scripts/with-s3 (or you) named a server (`BlobStoreTests` says when it is skipped).
    static let storages: [Storage] = s3URL == nil ? [.disk] : [.disk, .s3]

    static func server(
        _ storage: Storage, clock: any Clock<Duration> = ContinuousClock(), logger: Logger? = nil,
        configure: @escaping (inout ServerConfiguration) -> Void = { _ in }
    ) async throws -> TestServer? {
        if storage == .s3, s3URL == nil { return nil }
        return try await TestServer.start(clock: clock, logger: logger) { configuration in
            configuration.edge.messagesPerUser = nil
            if storage == .s3, let url = Self.s3URL {
                configuration.files.storage = .s3(
                    .init(
                        endpoint: url, bucket: "files-\(UInt32.random(in: 0...UInt32.max))", region: "us-east-1",
                        accessKeyId: "parley", secretAccessKey: "parley-secret"
                    )
                )
            }
            configure(&configuration)
        }
    }

    /// A raw HTTP exchange, for what URLSession would not send (or would follow).
    static func http(
        _ server: TestServer, _ method: String, _ path: String, headers: [String: String] = [:], body: [UInt8] = []
    ) async throws -> (status: Int, headers: [String: String], body: [UInt8]) {
        var request = URLRequest(url: URL(string: server.baseURL.absoluteString + path)!)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if !body.isEmpty || method == "POST" { request.httpBody = Data(body) }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as! HTTPURLResponse
        var fields: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { fields[name.lowercased()] = value }
        }
        return (http.statusCode, fields, Array(data))
    }

    static func upload(
        _ server: TestServer, conversation: String, token: String, name: String = "report ü.pdf",
        type: String = "application/pdf", bytes: [UInt8]
    ) async throws -> (status: Int, headers: [String: String], body: [UInt8]) {
        let query = name.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? name
        return try await http(
            server, "POST", "/v1/conversations/\(conversation)/attachments?name=\(query)",
            headers: ["Authorization": "Bearer \(token)", "Content-Type": type], body: bytes
        )
    }

    static func link(_ server: TestServer, conversation: String, id: String, token: String) async throws
        -> AttachmentLink
    {
        try await server.request("GET", "/v1/conversations/\(conversation)/attachments/\(id)", token: token).decode()
    }

    static func randomBytes(_ count: Int) -> [UInt8] { TestBytes.random(count) }

    /// A PNG header: signature, then an IHDR of `width` x `height`.
    static func png(width: UInt32, height: UInt32) -> [UInt8] {
        var bytes: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13] + Array("IHDR".utf8)
        for value in [width, height] { bytes += withUnsafeBytes(of: value.bigEndian, Array.init) }
        return bytes + [8, 6, 0, 0, 0] + randomBytes(100)
    }

    @Test(arguments: storages) func aParticipantUploadsAndAnotherDownloadsWholeAndInRanges(_ storage: Storage)
        async throws
    {
        let server = try #require(try await Self.server(storage))
        let alice = try await server.login("alice")
        let bob = try await server.login("bob")
        let conversation = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        let bytes = Self.randomBytes(1024 * 1024 + 5)
        let uploaded = try await Self.upload(server, conversation: conversation.id, token: alice, bytes: bytes)
        #expect(uploaded.status == 201)
        let attachment = try WireCoding.decode(Attachment.self, from: uploaded.body)
        #expect(attachment.id.hasPrefix("f_") && attachment.uploader == "alice" && attachment.name == "report ü.pdf")
        #expect(attachment.contentType == "application/pdf" && attachment.size == Int64(bytes.count))
        #expect(attachment.sha256 == SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined())
        #expect(attachment.width == nil && attachment.conversationId == conversation.id)

        // Alice sends it; Bob asks for a link; the link alone (no credentials) downloads.
        let sent = try await server.request(
            "POST", "/v1/conversations/\(conversation.id)/messages", token: alice,
            body: SendMessageRequest(parts: [.file(attachment)])
        )
        #expect(sent.status == 201)
        let link = try await Self.link(server, conversation: conversation.id, id: attachment.id, token: bob)
        #expect(link.attachment == attachment)
        let whole = try await Self.http(server, "GET", link.url)
        #expect(whole.status == 200 && whole.body == bytes)
        #expect(whole.headers["content-type"] == "application/pdf")
        #expect(whole.headers["etag"] == "\"\(attachment.sha256)\"")
        #expect(whole.headers["content-disposition"]?.hasPrefix("attachment; filename=\"report _.pdf\"") == true)
        #expect(whole.headers["content-disposition"]?.hasSuffix("filename*=UTF-8''report%20%C3%BC.pdf") == true)
        #expect(whole.headers["x-content-type-options"] == "nosniff")
        #expect(whole.headers["content-security-policy"] == "default-src 'none'; sandbox")
        #expect(whole.headers["accept-ranges"] == "bytes")
        #expect(whole.headers["cache-control"]?.hasPrefix("private, max-age=") == true)

        let size = bytes.count
        let first = try await Self.http(server, "GET", link.url, headers: ["Range": "bytes=0-9"])
        #expect(first.status == 206 && first.body == Array(bytes[0..<10]))
        #expect(first.headers["content-range"] == "bytes 0-9/\(size)")
        let middle = try await Self.http(server, "GET", link.url, headers: ["Range": "bytes=300000-700000"])
        #expect(middle.status == 206 && middle.body == Array(bytes[300_000...700_000]))
        let tail = try await Self.http(server, "GET", link.url, headers: ["Range": "bytes=-5"])
        #expect(tail.status == 206 && tail.body == Array(bytes[(size - 5)...]))
        let open = try await Self.http(server, "GET", link.url, headers: ["Range": "bytes=\(size - 3)-"])
        #expect(open.status == 206 && open.body == Array(bytes[(size - 3)...]))
        let past = try await Self.http(server, "GET", link.url, headers: ["Range": "bytes=\(size)-"])
        #expect(past.status == 416 && past.headers["content-range"] == "bytes */\(size)")
        // Several ranges, or another unit: the whole file.
        let several = try await Self.http(server, "GET", link.url, headers: ["Range": "bytes=0-1,5-6"])
        #expect(several.status == 200 && several.body.count == size)
        let cached = try await Self.http(
            server, "GET", link.url, headers: ["If-None-Match": "\"\(attachment.sha256)\""])
        #expect(cached.status == 304 && cached.body.isEmpty)
        let head = try await Self.http(server, "HEAD", link.url)
        #expect(head.status == 200 && head.body.isEmpty && head.headers["content-length"] == "\(size)")
        try await server.stop()
    }

    @Test func imagesAreCheckedAgainstTheirBytesAndMeasured() async throws {
        let server = try #require(try await Self.server(.disk))
        let alice = try await server.login("alice")
        let conversation = try await server.createConversation(token: alice, with: [])
        let png = Self.png(width: 640, height: 480)
        let photo = try await Self.upload(
            server, conversation: conversation.id, token: alice, name: "photo.png", type: "IMAGE/PNG; q=1", bytes: png
        )
        #expect(photo.status == 201)
        let attachment = try WireCoding.decode(Attachment.self, from: photo.body)
        #expect(attachment.contentType == "image/png" && attachment.width == 640 && attachment.height == 480)
        let link = try await Self.link(server, conversation: conversation.id, id: attachment.id, token: alice)
        let shown = try await Self.http(server, "GET", link.url)
        #expect(shown.headers["content-disposition"]?.hasPrefix("inline;") == true && shown.body == png)
        #expect(shown.headers["content-security-policy"] == "default-src 'none'; style-src 'unsafe-inline'; sandbox")
        // A "PNG" that is a PDF, a "JPEG" that is a PNG: refused.
        for (type, bytes) in [("image/png", Array("%PDF-1.7 not an image".utf8)), ("image/jpeg", png)] {
            let lie = try await Self.upload(
                server, conversation: conversation.id, token: alice, name: "x", type: type, bytes: bytes
            )
            #expect(lie.status == 400 && Self.code(lie.body) == "ERR_FILE_INVALID", "\(type)")
        }
        // Nothing refused was kept: only the photo's bytes are on disk, and the spool is empty.
        let kept = try FileManager.default.subpathsOfDirectory(atPath: server.dataDirectory + "/files")
            .filter { !$0.hasSuffix(server.app.appId) }
        #expect(kept == ["\(server.app.appId)/\(attachment.id)"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: server.dataDirectory + "/spool").isEmpty)
        try await server.stop()
    }

    static func code(_ body: [UInt8]) -> String? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
            let error = object["error"] as? [String: Any]
        else { return nil }
        return error["code"] as? String
    }

    @Test func outsidersOtherAppsBadRequestsAndBadLinksAreRefused() async throws {
        let clock = ManualClock()
        let server = try #require(try await Self.server(.disk, clock: clock))
        let alice = try await server.login("alice")
        _ = try await server.login("bob")
        let carol = try await server.login("carol")
        let conversation = try await server.createConversation(token: alice, type: .direct, with: ["bob"])
        let path = "/v1/conversations/\(conversation.id)/attachments"
        let bytes = Self.randomBytes(1000)

        // Without a token; by an outsider; by a user of another app (with the same conversation id).
        #expect(try await Self.http(server, "POST", path + "?name=a", body: bytes).status == 401)
        let outsider = try await Self.upload(server, conversation: conversation.id, token: carol, bytes: bytes)
        #expect(outsider.status == 404 && Self.code(outsider.body) == "ERR_CONVERSATION_NOT_FOUND")
        let other = try await AppProvisioning.createApp(in: server.store, name: "Other")
        let mallory = try await server.request(
            "POST", "/v1/login", body: LoginRequest(appId: other.appId, uid: "mallory", authKey: other.authKey)
        ).decode(LoginResponse.self).authToken
        #expect(
            try await Self.upload(server, conversation: conversation.id, token: mallory, bytes: bytes).status == 404)
        // Bad names and types.
        for query in [
            "", "?name=", "?name=a%2Fb", "?name=a%5Cb", "?name=a%00b", "?name=" + String(repeating: "x", count: 256),
        ] {
            let answer = try await Self.http(
                server, "POST", path + query, headers: ["Authorization": "Bearer \(alice)"], body: bytes
            )
            #expect(answer.status == 400, "\(query)")
        }
        for type in ["text", "a/b/c", "a b/c", "/x"] {
            let answer = try await Self.upload(
                server, conversation: conversation.id, token: alice, type: type, bytes: bytes)
            #expect(answer.status == 400, "\(type)")
        }

        let uploaded = try await Self.upload(server, conversation: conversation.id, token: alice, bytes: bytes)
        let attachment = try WireCoding.decode(Attachment.self, from: uploaded.body)
        // Links: an outsider, another app's key, the wrong conversation.
        let linkPath = "\(path)/\(attachment.id)"
        #expect(try await server.request("GET", linkPath, token: carol).status == 404)
        #expect(try await server.request("GET", linkPath, apiKey: other.restAPIKey).status == 404)
        let elsewhere = try await server.createConversation(token: alice, with: [])
        let wrong = try await server.request(
            "GET", "/v1/conversations/\(elsewhere.id)/attachments/\(attachment.id)", token: alice
        )
        #expect(wrong.status == 404 && wrong.errorCode == .attachmentNotFound)
        // The app's server may get a link too.
        let link: AttachmentLink = try await server.request("GET", linkPath, apiKey: server.app.restAPIKey).decode()
        #expect(try await Self.http(server, "GET", link.url).body == bytes)

        // A tampered link, another app's path, no signature: 403.
        let signature = String(link.url.split(separator: "signature=")[1])
        let flipped = (signature.first == "0" ? "1" : "0") + signature.dropFirst()
        for url in [
            link.url.replacingOccurrences(of: signature, with: flipped),
            link.url.replacingOccurrences(of: server.app.appId, with: other.appId),
            link.url.replacingOccurrences(of: "expires=", with: "expires=1"),
            // A number whose milliseconds overflow Int64 (the server once multiplied it before checking).
            link.url.replacingOccurrences(
                of: #"expires=\d+"#, with: "expires=9223372036854775807", options: .regularExpression
            ),
            link.url.replacingOccurrences(of: #"expires=\d+"#, with: "expires=-5", options: .regularExpression),
            String(link.url.split(separator: "?")[0]),
            link.url.replacingOccurrences(of: attachment.id, with: "f_../../etc"),
        ] {
            let answer = try await Self.http(server, "GET", url)
            #expect(answer.status == 403 && Self.code(answer.body) == "ERR_LINK_INVALID", "\(url)")
        }
        // Past its lifetime (an hour), the link is refused; a new one works.
        clock.advance(by: .seconds(3601))
        let expired = try await Self.http(server, "GET", link.url)
        #expect(expired.status == 403 && Self.code(expired.body) == "ERR_LINK_INVALID")
        let fresh: AttachmentLink = try await server.request("GET", linkPath, token: alice).decode()
        #expect(try await Self.http(server, "GET", fresh.url).status == 200)
        // Rotating the app's keys revokes every link.
        _ = try await server.request("POST", "/v1/app/keys", apiKey: server.app.restAPIKey)
        #expect(try await Self.http(server, "GET", fresh.url).status == 403)
        try await server.stop()
    }

    /// An upload larger than the limit is refused from its head, before a byte of its body is sent; one without a
    /// length is refused too; one that stops short leaves nothing behind.
    @Test func oversizedUnsizedAndTruncatedUploadsAreRefusedEarly() async throws {
        let server = try #require(try await Self.server(.disk) { $0.files.maxFileBytes = 1024 * 1024 })
        let alice = try await server.login("alice")
        let conversation = try await server.createConversation(token: alice, with: [])
        let path = "/v1/conversations/\(conversation.id)/attachments?name=big.bin"
        func head(_ extra: String) -> String {
            "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(alice)\r\n\(extra)\r\n"
        }
        let big = try await RawSocket.connected(port: server.port)
        try await big.send(head("Content-Length: \(1024 * 1024 + 1)\r\n"))
        let refused = try await big.readResponse()
        #expect(refused.status == 413 && refused.errorCode == "ERR_FILE_TOO_LARGE")
        big.close()

        let chunked = try await RawSocket.connected(port: server.port)
        try await chunked.send(head("Transfer-Encoding: chunked\r\n"))
        let unsized = try await chunked.readResponse()
        #expect(unsized.status == 411 && unsized.errorCode == "ERR_LENGTH_REQUIRED")
        chunked.close()

        // A client that waits for `100 Continue` gets it once the head passed the edge, not when it is too large.
        let waiting = try await RawSocket.connected(port: server.port)
        try await waiting.send(head("Content-Length: 5\r\nExpect: 100-continue\r\n"))
        #expect(try await waiting.readHead() == "HTTP/1.1 100 Continue\r\n\r\n")
        try await waiting.send("hello")
        #expect(try await waiting.readResponse().status == 201)
        waiting.close()
        let tooBig = try await RawSocket.connected(port: server.port)
        try await tooBig.send(head("Content-Length: \(1024 * 1024 + 1)\r\nExpect: 100-continue\r\n"))
        #expect(try await tooBig.readResponse().status == 413)
        tooBig.close()

        // 1 MiB exactly is fine.
        let fits = try await Self.upload(
            server, conversation: conversation.id, token: alice, bytes: Self.randomBytes(1024 * 1024)
        )
        #expect(fits.status == 201)

        // Half a body, then the client goes: the server closes at once, stores nothing, and its spool file goes (the
        // handler removes it once its body ends: polled, at most 5 s).
        let short = try await RawSocket.connected(port: server.port)
        try await short.send(head("Content-Length: 1000\r\n") + String(repeating: "x", count: 500))
        short.halfClose()
        #expect(try await short.readToEnd().ending == .closed)
        let spool = server.dataDirectory + "/spool"
        let deadline = ContinuousClock.now + .seconds(5)
        while try !FileManager.default.contentsOfDirectory(atPath: spool).isEmpty, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: spool).isEmpty)
        let stored = try FileManager.default.subpathsOfDirectory(atPath: server.dataDirectory + "/files")
            .filter { $0.contains("/f_") }
        #expect(stored.count == 2)
        try await server.stop()
    }

    /// A client that asks for a file and never reads it is cut off once the transfer's time is up (the grace plus the
    /// size at the slowest rate accepted), instead of holding the connection and the blob for ever.
    @Test func aDownloadItsClientStopsTakingIsCutOff() async throws {
        let lines = NIOLockedValueBox("")
        var logger = Logger(label: "parley") { label in
            JSONLogHandler.writing(label: label) { bytes in
                lines.withLockedValue { $0 += String(decoding: bytes, as: UTF8.self) }
            }
        }
        logger.logLevel = .warning
        let server = try #require(
            try await Self.server(.disk, logger: logger) {
                $0.edge.requestBodyTimeout = .seconds(1)
                $0.files.minimumTransferRate = 16 * 1024 * 1024
            })
        let alice = try await server.login("alice")
        let conversation = try await server.createConversation(token: alice, with: [])
        // More than the kernel's buffers on both sides hold. Put in place directly: an upload this size would itself
        // be held to the short allowance on a loaded machine.
        let block = Self.randomBytes(1024 * 1024)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(40 * block.count)
        for _ in 0..<40 { bytes += block }
        let attachment = Attachment(
            id: "f_big", conversationId: conversation.id, uploader: "alice", name: "big.bin",
            contentType: "application/octet-stream", size: Int64(bytes.count),
            sha256: Secrets.hex(SHA256.hash(data: bytes)), createdAt: 1
        )
        let spool = server.dataDirectory + "/spool/big"
        try Data(bytes).write(to: URL(fileURLWithPath: spool))
        try await DiskBlobStore(root: server.dataDirectory + "/files").put(
            key: try BlobKey("\(server.app.appId)/f_big"), file: spool, size: Int64(bytes.count), sha256: [],
            contentType: attachment.contentType
        )
        try await server.store.insertAttachment(AttachmentRecord(appId: server.app.appId, attachment: attachment))
        let link = try await Self.link(server, conversation: conversation.id, id: attachment.id, token: alice)
        let reader = try await RawSocket.connected(port: server.port, receiveBuffer: 4096)
        try await reader.send("GET \(link.url) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        // 1 s + 40 MiB at 16 MiB/s: the server gives up about 3.5 s after the head went out (polled, at most 20 s).
        let deadline = ContinuousClock.now + .seconds(20)
        while !lines.withLockedValue({ $0.contains("a download failed") }), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(lines.withLockedValue { $0.contains("a download failed") })
        let (received, ending) = try await reader.readToEnd()
        #expect(received.count < bytes.count && ending != .stillOpen)
        reader.close()
        try await server.stop()
    }
}
