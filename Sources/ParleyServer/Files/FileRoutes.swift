import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOFileSystem
import ParleyProtocol
import ParleyStore

/// Uploads and downloads of attachments (docs/PROTOCOL.md, "Attachments"). Raw bytes both ways, so these are routes of
/// their own rather than OpenAPI operations: an upload streams its body to a spool file (hashing it and checking an
/// image's type as it goes) and hands it to the blob store; a download streams a byte range out of the blob store.
///
/// - `POST /v1/conversations/{conversationId}/attachments?name=NAME` with the file as the body, its type as
///   `Content-Type` and its size as `Content-Length`: a participant's upload; 201 ``Attachment``.
/// - `GET /v1/conversations/{conversationId}/attachments/{attachmentId}`: a participant (or the app's server) gets
///   the attachment and a signed link, ``AttachmentLink``.
/// - `GET /v1/files/{appId}/{attachmentId}?expires=SECONDS&signature=HEX`: the bytes, for whoever has a valid link;
///   `Range`, `If-None-Match`, `HEAD`.
struct FileRoutes: Sendable {
    let store: any ParleyStore
    let authenticator: Authenticator
    let blobs: any BlobStore
    let settings: FileSettings
    /// Where uploads are written while they arrive.
    let spool: String
    let sends: SendRateLimiter?
    /// How long a transfer may take before its size counts (``EdgeLimits/requestBodyTimeout``).
    let transferGrace: Duration
    let time: ServerClock
    let logger: Logger
    /// The full disk's log line, once a minute at most.
    let fullDiskLog = LogThrottle()

    static let uploadSuffix = "/attachments"
    /// The image types served inline; every other type is served as a download (`Content-Disposition: attachment`),
    /// so that an uploaded HTML or SVG file never runs as a page of this server.
    static let inlineTypes = ImageHeader.checkedTypes

    /// Whether a request is an upload: `POST /v1/conversations/<one segment>/attachments` (a query is allowed).
    static func isUpload(method: String, target: String) -> Bool {
        guard method == "POST" else { return false }
        let path = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        return segments.count == 5 && segments[0].isEmpty && segments[1] == "v1" && segments[2] == "conversations"
            && !segments[3].isEmpty && segments[4] == "attachments"
    }

    func register(on router: Router<ParleyRequestContext>) {
        router.post("/v1/conversations/:conversationId/attachments") { request, context in
            try await upload(request, conversationId: try context.parameters.require("conversationId"))
        }
        router.get("/v1/conversations/:conversationId/attachments/:attachmentId") { _, context in
            try await link(
                conversationId: try context.parameters.require("conversationId"),
                attachmentId: try context.parameters.require("attachmentId")
            )
        }
        router.get("/v1/files/:appId/:attachmentId") { request, context in
            try await download(
                request, appId: try context.parameters.require("appId"),
                attachmentId: try context.parameters.require("attachmentId"), channel: context.channel
            )
        }
        router.head("/v1/files/:appId/:attachmentId") { request, context in
            try await download(
                request, appId: try context.parameters.require("appId"),
                attachmentId: try context.parameters.require("attachmentId"), channel: context.channel
            )
        }
    }

    // MARK: Upload

    func upload(_ request: Request, conversationId: String) async throws -> Response {
        let principal = try await authenticator.user(token: RequestCredentials.current.bearerToken)
        try InputRules.identifier(conversationId, "conversationId")
        guard let name = request.uri.queryParameters.get("name") else {
            throw DomainError(.badRequest, "Name the file: ?name=<file name>.")
        }
        try Self.validate(name: name)
        let contentType = try Self.mediaType(request.headers[.contentType])
        guard let length = request.headers[.contentLength].flatMap({ Int64($0) }) else {
            throw DomainError(.lengthRequired, "An upload has a Content-Length (not chunked).")
        }
        let app = try await store.app(id: principal.appId)
        let limit = FileSettings.limit(server: settings.maxFileBytes, app: app?.maxFileBytes)
        guard length <= limit else {
            throw DomainError(.fileTooLarge, "A file may have at most \(limit) bytes.")
        }
        try await participant(principal, conversationId: conversationId)
        try sends?.take(appId: principal.appId, uid: principal.uid)

        let id = Secrets.randomID(prefix: "f_")
        let spooled = spool + "/" + id
        let received: Received
        do {
            received = try await receive(request.body, into: spooled, length: length, contentType: contentType)
        } catch {
            unlink(spooled)
            throw refusal(error)
        }
        let record = AttachmentRecord(
            appId: principal.appId,
            attachment: Attachment(
                id: id, conversationId: conversationId, uploader: principal.uid, name: name, contentType: contentType,
                size: length, sha256: Secrets.hex(received.sha256), width: received.width, height: received.height,
                createdAt: time.epochMilliseconds()
            )
        )
        let key = try BlobKey(record.blobKey)
        do {
            try await blobs.put(
                key: key, file: spooled, size: length, sha256: received.sha256, contentType: contentType)
        } catch {
            throw refusal(error)
        }
        do {
            try await store.insertAttachment(record)
        } catch {
            try? await blobs.delete(key)
            throw error
        }
        return try Self.json(.created, record.attachment)
    }

    /// What an upload that failed answers: a full disk (or spent quota) is 507 `ERR_STORAGE_FULL`, with one log line
    /// a minute that names the folder; anything else as it was thrown.
    private func refusal(_ error: any Error) -> any Error {
        guard Self.isNoSpace(error) else { return error }
        if fullDiskLog.take() {
            logger.error(
                "The files' disk is full (uploads are spooled to \(spool)): uploads are refused with 507 ERR_STORAGE_FULL until space is freed."
            )
        }
        return DomainError(.storageFull, "The server's storage is full: the file was not stored. Try again later.")
    }

    /// Whether an error is the file system's "no space left" (`ENOSPC`, or `EDQUOT`: a quota spent), as NIO's file
    /// system and Foundation report it, however deep it is wrapped.
    static func isNoSpace(_ error: any Error) -> Bool {
        if let error = error as? FileSystemError {
            if let call = error.cause as? FileSystemError.SystemCallError {
                return call.errno.rawValue == ENOSPC || call.errno.rawValue == EDQUOT
            }
            return error.cause.map(isNoSpace) ?? false
        }
        if let error = error as? CocoaError, error.code == .fileWriteOutOfSpace { return true }
        let error = error as NSError
        if error.domain == NSPOSIXErrorDomain { return error.code == Int(ENOSPC) || error.code == Int(EDQUOT) }
        return (error.userInfo[NSUnderlyingErrorKey] as? NSError).map(isNoSpace) ?? false
    }

    struct Received {
        var sha256: [UInt8]
        var width: Int?
        var height: Int?
    }

    /// Writes the body to `path`, hashing it; checks that it is `length` bytes and, for an image type, that its first
    /// bytes are that image.
    private func receive(_ body: RequestBody, into path: String, length: Int64, contentType: String) async throws
        -> Received
    {
        var hasher = SHA256()
        var head: [UInt8] = []
        var written: Int64 = 0
        try await FileSystem.shared.withFileHandle(
            forWritingAt: FilePath(path), options: .newFile(replaceExisting: false)
        ) { handle in
            for try await chunk in body {
                written += Int64(chunk.readableBytes)
                guard written <= length else {
                    throw DomainError(.fileInvalid, "The body is longer than its Content-Length.")
                }
                chunk.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
                if head.count < 64 * 1024 {
                    head +=
                        chunk.getBytes(at: chunk.readerIndex, length: min(chunk.readableBytes, 64 * 1024 - head.count))
                        ?? []
                }
                _ = try await handle.write(contentsOf: chunk, toAbsoluteOffset: written - Int64(chunk.readableBytes))
            }
        }
        guard written == length else {
            throw DomainError(.fileInvalid, "The body ended after \(written) of its \(length) bytes.")
        }
        var received = Received(sha256: Array(hasher.finalize()))
        switch ImageHeader.check(contentType: contentType, head: head) {
        case .mismatch:
            throw DomainError(.fileInvalid, "The bytes are not a \(contentType) image.")
        case .image(let width, let height):
            (received.width, received.height) = (width, height)
        case .unchecked:
            break
        }
        return received
    }

    /// A file name: 1-255 bytes, no control character, no `/` or `\` (it names a file, not a path).
    static func validate(name: String) throws {
        guard (1...Attachments.maxNameBytes).contains(name.utf8.count) else {
            throw DomainError(.badRequest, "name must be 1-\(Attachments.maxNameBytes) bytes.")
        }
        // Bytes, not characters: `/` followed by a combining mark is one character that is not `/`.
        guard !InputRules.hasControlCharacter(name), !name.utf8.contains(UInt8(ascii: "/")),
            !name.utf8.contains(UInt8(ascii: "\\"))
        else {
            throw DomainError(.badRequest, "name must not contain control characters, / or \\.")
        }
    }

    /// The media type of `Content-Type` without its parameters, lowercased: `type/subtype` of token characters
    /// (RFC 9110); none is `application/octet-stream`.
    static func mediaType(_ header: String?) throws -> String {
        guard let header else { return "application/octet-stream" }
        let type = header.split(separator: ";", maxSplits: 1)[0].trimmingCharacters(in: .whitespaces).lowercased()
        let parts = type.split(separator: "/", omittingEmptySubsequences: false)
        let token = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz".unicodeScalars)
        guard parts.count == 2, parts.allSatisfy({ !$0.isEmpty && $0.unicodeScalars.allSatisfy(token.contains) }),
            type.utf8.count <= Attachments.maxContentTypeBytes
        else {
            throw DomainError(.badRequest, "Content-Type must be a media type (type/subtype).")
        }
        return type
    }

    private func participant(_ principal: UserPrincipal, conversationId: String) async throws {
        guard
            let (row, role) = try await store.conversation(
                appId: principal.appId, id: conversationId, viewer: principal.uid
            ), row.deletedAt == nil, role != nil
        else { throw DomainError.conversationNotFound(conversationId) }
    }

    // MARK: Links

    func link(conversationId: String, attachmentId: String) async throws -> Response {
        let caller = try await authenticator.caller(RequestCredentials.current)
        try InputRules.identifier(conversationId, "conversationId")
        try InputRules.identifier(attachmentId, "attachmentId")
        if case .user(let principal) = caller {
            try await participant(principal, conversationId: conversationId)
        }
        // Until a message carries it, an upload is its uploader's alone.
        guard let record = try await store.attachment(appId: caller.appId, id: attachmentId),
            record.attachment.conversationId == conversationId,
            record.messageId != nil || caller.isUser(record.attachment.uploader) != false
        else { throw DomainError(.attachmentNotFound, "No attachment \(attachmentId) in \(conversationId).") }
        let expires = (time.epochMilliseconds() + settings.linkLifetime.wholeMilliseconds) / 1000
        let signature = try await signature(appId: record.appId, attachmentId: record.id, expires: expires)
        let url =
            "/v1/files/\(record.appId)/\(record.id)?expires=\(expires)&signature=\(Secrets.hex(signature))"
        return try Self.json(
            .ok, AttachmentLink(attachment: record.attachment, url: url, expiresAt: expires * 1000)
        )
    }

    /// HMAC-SHA256 of `appId`, `attachmentId` and `expires` with a key derived from the app's REST API key hash: the
    /// same on every node, and rotating the app's keys revokes every link.
    private func signature(appId: String, attachmentId: String, expires: Int64) async throws -> [UInt8] {
        guard let app = try await store.app(id: appId) else { throw Self.invalidLink }
        let key = SymmetricKey(data: SHA256.hash(data: Array("parley file links\n".utf8) + app.restAPIKeyHash))
        let text = "\(appId)\n\(attachmentId)\n\(expires)"
        return Array(HMAC<SHA256>.authenticationCode(for: Array(text.utf8), using: key))
    }

    /// Bytes of a download handed to the event loop between two waits for it (``OutboundPacer``): at most 2 MiB wait
    /// for the loop, and a wait per MiB costs less CPU than one per chunk (docs/BENCHMARKS.md, "Downloads paced").
    static let downloadWindow = 1024 * 1024

    static let invalidLink = DomainError(.linkInvalid, "The download link is invalid or expired: ask for a new one.")

    // MARK: Download

    func download(_ request: Request, appId: String, attachmentId: String, channel: any Channel) async throws
        -> Response
    {
        guard let expiresText = request.uri.queryParameters.get("expires"), let expires = Int64(expiresText),
            let signatureText = request.uri.queryParameters.get("signature"), signatureText.utf8.count == 64,
            let given = Self.bytes(hex: signatureText), (try? BlobKey(appId + "/" + attachmentId)) != nil
        else { throw Self.invalidLink }
        // Compared in seconds: `expires` is the client's number, and multiplying it could overflow.
        guard expires > time.epochMilliseconds() / 1000 else { throw Self.invalidLink }
        let expected = try await signature(appId: appId, attachmentId: attachmentId, expires: expires)
        guard Secrets.constantTimeEquals(given, expected) else { throw Self.invalidLink }
        guard let record = try await store.attachment(appId: appId, id: attachmentId) else {
            throw DomainError(.attachmentNotFound, "The attachment was removed.")
        }
        let file = record.attachment
        let size = file.size
        let etag = "\"\(file.sha256)\""
        var headers: HTTPFields = [
            .contentType: file.contentType, .eTag: etag, .acceptRanges: "bytes",
            .cacheControl: "private, max-age=\(max(0, expires - time.epochMilliseconds() / 1000))",
            HTTPField.Name("X-Content-Type-Options")!: "nosniff",
            HTTPField.Name("Content-Security-Policy")!: Self.contentSecurityPolicy(file),
            HTTPField.Name("Content-Disposition")!: Self.disposition(file),
        ]
        if let known = request.headers[.ifNoneMatch],
            known.split(separator: ",").contains(where: {
                $0.trimmingCharacters(in: .whitespaces) == etag
            })
        {
            return Response(status: .notModified, headers: headers)
        }
        var status = HTTPResponse.Status.ok
        var range: Range<Int64> = 0..<size
        if let header = request.headers[.range], request.headers[.ifRange].map({ $0 == etag }) ?? true {
            switch Self.range(header, size: size) {
            case .whole:
                break
            case .part(let part):
                status = .partialContent
                range = part
                headers[.contentRange] = "bytes \(part.lowerBound)-\(part.upperBound - 1)/\(size)"
            case .unsatisfiable:
                headers[.contentRange] = "bytes */\(size)"
                headers[.contentLength] = "0"
                return Response(status: .rangeNotSatisfiable, headers: headers)
            }
        }
        headers[.contentLength] = "\(range.count)"
        guard request.method != .head else { return Response(status: status, headers: headers) }
        let key = try BlobKey(record.blobKey)
        let blobs = self.blobs
        let logger = self.logger
        let bytes = range
        // A client that stops reading would hold the connection (and the blob open) for ever: the body must be taken
        // within the grace plus its length at the slowest rate accepted, or the connection is closed.
        let deadline =
            transferGrace + .seconds(Int64(bytes.count / max(settings.minimumTransferRate, 1)))
        return Response(
            status: status, headers: headers,
            body: ResponseBody(contentLength: bytes.count) { writer in
                let cutOff = channel.eventLoop.scheduleTask(in: deadline.timeAmount) { channel.close(promise: nil) }
                defer { cutOff.cancel() }
                do {
                    var pacer = OutboundPacer(eventLoop: channel.eventLoop, window: Self.downloadWindow)
                    try await blobs.read(key, range: bytes) { chunk in
                        let count = chunk.readableBytes
                        try await writer.write(chunk)
                        try await pacer.wrote(count)
                    }
                } catch {
                    // The head is out: all the client can be told is that the body ended early.
                    logger.warning("Files: a download failed", metadata: ["attachment": "\(key)", "error": "\(error)"])
                    throw error
                }
                try await writer.finish(nil)
            }
        )
    }

    enum RangeAnswer: Equatable {
        case whole
        case part(Range<Int64>)
        case unsatisfiable
    }

    /// One byte range of `Range: bytes=...` (RFC 9110 section 14): `a-b`, `a-`, `-n`. Several ranges, another unit
    /// or a malformed header are answered with the whole file (allowed); a range past the end is 416.
    static func range(_ header: String, size: Int64) -> RangeAnswer {
        let trimmed = header.trimmingCharacters(in: .whitespaces)
        guard trimmed.lowercased().hasPrefix("bytes="), !trimmed.contains(",") else { return .whole }
        let spec = trimmed.dropFirst(6).trimmingCharacters(in: .whitespaces)
        let bounds = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard bounds.count == 2 else { return .whole }
        let first = bounds[0].trimmingCharacters(in: .whitespaces)
        let last = bounds[1].trimmingCharacters(in: .whitespaces)
        guard first.allSatisfy(\.isNumber), last.allSatisfy(\.isNumber), !(first.isEmpty && last.isEmpty),
            first.count <= 18, last.count <= 18
        else { return .whole }
        if first.isEmpty {
            let suffix = Int64(last)!
            guard suffix > 0, size > 0 else { return .unsatisfiable }
            return .part(max(0, size - suffix)..<size)
        }
        let start = Int64(first)!
        guard start < size else { return .unsatisfiable }
        let end = last.isEmpty ? size - 1 : min(Int64(last)!, size - 1)
        guard end >= start else { return .whole }
        return .part(start..<(end + 1))
    }

    /// Nothing runs and nothing loads (`sandbox`); an image shown inline may have the inline styles a browser's image
    /// viewer sets on its own page (no script can run to use them).
    static func contentSecurityPolicy(_ file: Attachment) -> String {
        inlineTypes.contains(file.contentType)
            ? "default-src 'none'; style-src 'unsafe-inline'; sandbox" : "default-src 'none'; sandbox"
    }

    /// Images inline; everything else as a download; the name in RFC 6266 form (ASCII fallback and UTF-8).
    static func disposition(_ file: Attachment) -> String {
        let kind = inlineTypes.contains(file.contentType) ? "inline" : "attachment"
        let ascii = String(
            file.name.unicodeScalars.map { $0.isASCII && $0 != "\"" && $0 != "%" ? Character($0) : "_" })
        return "\(kind); filename=\"\(ascii)\"; filename*=UTF-8''\(SigV4.encode(file.name))"
    }

    static func bytes(hex: String) -> [UInt8]? {
        var bytes: [UInt8] = []
        var high: UInt8?
        for byte in hex.utf8 {
            guard let value = HTTPRequestGuard.hexValue(byte) else { return nil }
            if let first = high {
                bytes.append(first << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        return high == nil ? bytes : nil
    }

    static func json(_ status: HTTPResponse.Status, _ value: some Encodable) throws -> Response {
        Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: try WireCoding.encode(value)))
        )
    }
}
