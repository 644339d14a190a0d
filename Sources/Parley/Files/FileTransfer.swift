import Crypto
import Foundation
import NIOConcurrencyHelpers

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The attachment routes (docs/PROTOCOL.md, "Attachments") over URLSession: their bodies are raw bytes, so they are
/// not operations of the generated client. An upload streams from its file (an upload task from a file, with its
/// `Content-Length`); a download streams to a file as it arrives, hashing it on the way; neither holds a file in
/// memory.
struct FileTransfer: Sendable {
    let serverURL: URL
    /// The credentials, read at each request: the logged-in user's token, or the app's REST API key
    /// (``ParleyAdmin``).
    let credentials: @Sendable () -> (token: String?, apiKey: String?)

    /// Answers longer than this (JSON or an error body) are cut: they are not what the server sends.
    static let maxAnswerBytes = 1 << 20

    /// `POST /v1/conversations/{id}/attachments?name=NAME` with the file's bytes.
    func upload(
        file: URL, size: Int64, conversationId: String, name: String, contentType: String,
        progress: (@Sendable (FileTransferProgress) -> Void)?
    ) async throws -> Attachment {
        var request = URLRequest(
            url: try url(
                "/v1/conversations/\(Self.segment(conversationId))/attachments?name=\(Self.segment(name))"
            )
        )
        request.httpMethod = "POST"
        request.setValue(contentType, forHTTPHeaderField: "Content-Type")
        request.setValue(String(size), forHTTPHeaderField: "Content-Length")
        let answer = try await run(request, uploading: file, total: size, progress: progress)
        return try Self.decode(Attachment.self, answer)
    }

    /// `GET /v1/conversations/{id}/attachments/{attachmentId}`: the attachment and a signed link to its bytes.
    func link(_ attachmentId: String, in conversationId: String) async throws -> AttachmentLink {
        let request = URLRequest(
            url: try url(
                "/v1/conversations/\(Self.segment(conversationId))/attachments/\(Self.segment(attachmentId))"
            )
        )
        return try Self.decode(AttachmentLink.self, try await run(request, total: 0, progress: nil))
    }

    /// Downloads the bytes of `link` to `destination` (a file, created or replaced once the download is complete and
    /// checked, or an existing folder: the file then goes into it under its own name). Returns where the file is;
    /// nothing is left at the destination on failure.
    func save(
        _ link: AttachmentLink, to destination: URL, progress: (@Sendable (FileTransferProgress) -> Void)?
    ) async throws -> URL {
        var target = destination
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: destination.path, isDirectory: &isDirectory), isDirectory.boolValue {
            try ParleyClient.validateFileName(link.attachment.name)
            guard link.attachment.name != ".", link.attachment.name != ".." else {
                throw ParleyError(.invalidArgument, "The file's name cannot name a file here; give a file name.")
            }
            target = destination.appendingPathComponent(link.attachment.name)
        }
        let temporary = target.deletingLastPathComponent()
            .appendingPathComponent(".\(UUID().uuidString).parley-download")
        try await download(link, into: temporary, progress: progress)
        guard rename(temporary.path, target.path) == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(at: temporary)
            throw ParleyError(.storageError, "The download could not be saved at \(target.path).", underlying: reason)
        }
        return target
    }

    /// Downloads the bytes of `link` into `file` (created or replaced), checking their size and SHA-256 against the
    /// attachment; on any failure `file` is removed.
    func download(
        _ link: AttachmentLink, into file: URL, progress: (@Sendable (FileTransferProgress) -> Void)?
    ) async throws {
        var request = URLRequest(url: try url(link.url, authenticated: false))
        request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        let expected = link.attachment
        do {
            let answer = try await run(request, into: file, total: expected.size, progress: progress)
            guard answer.status == 200 else {
                throw ParleyError(
                    .unexpectedResponse, "The server answered \(answer.status) to a download.", status: answer.status
                )
            }
            let sha256 = answer.sha256.map { String(format: "%02x", $0) }.joined()
            guard answer.received == expected.size, sha256 == expected.sha256.lowercased() else {
                throw ParleyError(
                    .fileMismatch,
                    "The downloaded bytes do not match the file (\(answer.received) of \(expected.size) bytes, "
                        + "SHA-256 \(sha256 == expected.sha256.lowercased() ? "equal" : "different")): download again."
                )
            }
        } catch {
            try? FileManager.default.removeItem(at: file)
            throw error
        }
    }

    // MARK: Requests

    /// `path` (`/v1/...`, with its query) under the server URL's own path; an absolute URL stays as it is.
    func url(_ path: String) throws -> URL { try url(path, authenticated: true) }

    private func url(_ path: String, authenticated: Bool) throws -> URL {
        if path.hasPrefix("http://") || path.hasPrefix("https://") {
            guard let absolute = URL(string: path) else {
                throw ParleyError(.unexpectedResponse, "The server gave an invalid link.")
            }
            return absolute
        }
        var base = serverURL.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        guard let url = URL(string: base + (path.hasPrefix("/") ? path : "/" + path)) else {
            throw ParleyError(.invalidArgument, "Not a valid URL: \(path).")
        }
        return url
    }

    /// `text` percent-encoded for a path segment or a query value: only unreserved characters stay as they are.
    static func segment(_ text: String) -> String {
        var allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }

    struct Answer: Sendable {
        var status: Int
        /// The body, when it was not written to a file (or was an error).
        var body: [UInt8]
        /// Bytes written to the file.
        var received: Int64
        /// SHA-256 of the bytes written to the file.
        var sha256: [UInt8]
    }

    /// Runs one request: its body from `upload` (streamed), its answer into `sink` when it succeeds (streamed and
    /// hashed) or into memory. An error status becomes the ``ParleyError`` its body describes.
    private func run(
        _ request: URLRequest, uploading upload: URL? = nil, into sink: URL? = nil, total: Int64,
        progress: (@Sendable (FileTransferProgress) -> Void)?
    ) async throws -> Answer {
        var request = request
        // A signed link needs no credentials, and is not given them.
        if request.url.map({ !$0.path.hasPrefix("/v1/files/") }) ?? true {
            let (token, apiKey) = credentials()
            if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
            if let apiKey { request.setValue(apiKey, forHTTPHeaderField: "X-Parley-Api-Key") }
        }
        let delegate = TransferDelegate(sink: sink, total: total, progress: progress)
        let configuration = URLSessionConfiguration.ephemeral
        // Between two pieces of data (the server may take a while to store a large upload before it answers); a whole
        // transfer may take as long as it needs.
        configuration.timeoutIntervalForRequest = 120
        let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let task: URLSessionTask
        if let upload {
            #if canImport(FoundationNetworking)
                // swift-corelibs-foundation's file body pauses libcurl while it reads the next piece and unpauses it
                // when the piece comes, with a `try!`: a transfer that ended meanwhile (an answer before the whole
                // body, a cut connection) crashes the process (EasyHandle.swift, libcurl error 43). A body from
                // memory never pauses; mapped, the file's pages are read as they are sent, not copied into memory.
                let body: Data
                do {
                    body = try Data(contentsOf: upload, options: .alwaysMapped)
                } catch {
                    throw ParleyError(.fileUnreadable, "The file could not be read.", underlying: "\(error)")
                }
                task = session.uploadTask(with: request, from: body)
            #else
                task = session.uploadTask(with: request, fromFile: upload)
            #endif
        } else {
            task = session.dataTask(with: request)
        }
        let answer: Answer
        do {
            answer = try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    delegate.start(continuation)
                    task.resume()
                }
            } onCancel: {
                task.cancel()
            }
        } catch {
            if Task.isCancelled { throw CancellationError() }
            if let error = error as? ParleyError { throw error }
            throw ParleyError(.serverUnreachable, "The server could not be reached.", underlying: "\(error)")
        }
        if answer.status >= 400 {
            if let decoded = try? WireCoding.decode(ErrorResponse.self, from: answer.body) {
                throw ParleyError(
                    decoded.error.code, decoded.error.message, status: answer.status,
                    retryAfter: decoded.error.retryAfterMs.map { .milliseconds($0) }
                )
            }
            throw ParleyError(
                .unexpectedResponse, "The server answered \(answer.status) without an error body.",
                status: answer.status
            )
        }
        return answer
    }

    private static func decode<T: Decodable>(_ type: T.Type, _ answer: Answer) throws -> T {
        do {
            return try WireCoding.decode(type, from: answer.body)
        } catch {
            throw ParleyError(
                .unexpectedResponse, "The server's answer could not be read.", status: answer.status,
                underlying: "\(error)"
            )
        }
    }
}

/// Follows one task of its own session: counts what is sent, keeps a short answer in memory, or writes a successful
/// answer to a file while hashing it. URLSession calls it on its serial delegate queue; every mutable thing is in
/// `state`, behind a lock, so that the continuation can be set from the caller's task.
private final class TransferDelegate: NSObject, URLSessionDataDelegate, Sendable {
    struct State: Sendable {
        var continuation: CheckedContinuation<FileTransfer.Answer, any Error>?
        var status = 0
        var body: [UInt8] = []
        /// The descriptor of the sink while the answer is written to it.
        var output: Int32?
        var hasher = SHA256()
        var received: Int64 = 0
        var reported: Int64 = -1
        var failure: ParleyError?
    }

    private let state = NIOLockedValueBox(State())
    private let sink: URL?
    private let total: Int64
    private let progress: (@Sendable (FileTransferProgress) -> Void)?
    /// Progress is reported every `step` bytes (and at the end), not for every packet.
    private let step: Int64

    init(sink: URL?, total: Int64, progress: (@Sendable (FileTransferProgress) -> Void)?) {
        self.sink = sink
        self.total = total
        self.progress = progress
        self.step = max(64 * 1024, total / 100)
    }

    func start(_ continuation: CheckedContinuation<FileTransfer.Answer, any Error>) {
        state.withLockedValue { $0.continuation = continuation }
    }

    /// Reports `done` bytes when they are a step past the last report, or all of them.
    private func report(_ done: Int64) {
        guard let progress else { return }
        let due = state.withLockedValue { state -> Bool in
            guard done != state.reported, done - state.reported >= step || done >= total else { return false }
            state.reported = done
            return true
        }
        if due { progress(FileTransferProgress(completedBytes: done, totalBytes: total)) }
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        report(min(totalBytesSent, total))
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        var failure: ParleyError?
        if let sink, (200..<300).contains(status) {
            let descriptor = open(sink.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            if descriptor < 0 {
                failure = ParleyError(
                    .storageError, "The download could not be written to \(sink.path).",
                    underlying: String(cString: strerror(errno))
                )
            }
            state.withLockedValue { state in
                state.status = status
                state.output = descriptor < 0 ? nil : descriptor
                state.failure = failure
            }
        } else {
            state.withLockedValue { $0.status = status }
        }
        completionHandler(failure == nil ? .allow : .cancel)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let written = state.withLockedValue { state -> Int64? in
            guard let output = state.output else {
                if state.body.count < FileTransfer.maxAnswerBytes {
                    state.body += data.prefix(FileTransfer.maxAnswerBytes)
                }
                return nil
            }
            let complete = data.withUnsafeBytes { bytes -> Bool in
                var offset = 0
                while offset < bytes.count {
                    let count = write(output, bytes.baseAddress! + offset, bytes.count - offset)
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { return false }
                    offset += count
                }
                return true
            }
            guard complete else {
                state.failure = ParleyError(
                    .storageError, "The download could not be written.", underlying: String(cString: strerror(errno))
                )
                close(output)
                state.output = nil
                return -1
            }
            state.hasher.update(data: data)
            state.received += Int64(data.count)
            return state.received
        }
        if written == -1 {
            dataTask.cancel()
        } else if let written {
            report(written)
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let (continuation, result) = state.withLockedValue {
            state -> (CheckedContinuation<FileTransfer.Answer, any Error>?, Result<FileTransfer.Answer, any Error>) in
            if let output = state.output {
                close(output)
                state.output = nil
            }
            defer { state.continuation = nil }
            let answer = FileTransfer.Answer(
                status: state.status, body: state.body, received: state.received,
                sha256: sink != nil ? Array(state.hasher.finalize()) : []
            )
            if let failure = state.failure { return (state.continuation, .failure(failure)) }
            // An error answer read before the connection failed (a refused upload: the server answers at once and
            // closes) says more than the failure.
            if let error, !(state.status >= 400 && !state.body.isEmpty) {
                return (state.continuation, .failure(error))
            }
            return (state.continuation, .success(answer))
        }
        continuation?.resume(with: result)
    }
}
