import Foundation

extension ParleyClient {
    // MARK: Uploading

    /// Uploads a file for a conversation and returns the server's `Attachment`; a message names it with a `file`
    /// part (`MessagePart.file(_:preview:)`). Most apps call ``sendFile(at:to:name:contentType:caption:preview:replyTo:mentions:clientMessageId:)``
    /// instead, which uploads and sends through the durable outbox.
    ///
    /// The file is streamed from disk (never read into memory). An upload that no message carries is removed by the
    /// server after a day (by default).
    ///
    /// ```swift
    /// let attachment = try await client.uploadFile(at: url, to: conversationId) { print($0.fraction) }
    /// try await client.sendMessage(parts: [.file(attachment)], to: .conversation(conversationId))
    /// ```
    ///
    /// - Parameters:
    ///   - fileURL: The file to upload.
    ///   - conversationId: The conversation whose messages may carry it.
    ///   - name: The name receivers see; the file's own name by default.
    ///   - contentType: The media type; guessed from the extension by default (`application/octet-stream` when
    ///     unknown).
    ///   - progress: Called as the bytes go out (every 1 % or 64 KiB, and at the end), on a URLSession queue.
    /// - Throws: `ERR_FILE_UNREADABLE` (missing, a folder, not readable), `ERR_INVALID_ARGUMENT` (a bad name or
    ///   type); from the server `ERR_FILE_TOO_LARGE`, `ERR_FILE_INVALID` (an image type whose bytes are not that
    ///   image), `ERR_CONVERSATION_NOT_FOUND` (not a participant), `ERR_RATE_LIMITED`; `ERR_SERVER_UNREACHABLE`.
    public func uploadFile(
        at fileURL: URL, to conversationId: String, name: String? = nil, contentType: String? = nil,
        progress: (@Sendable (FileTransferProgress) -> Void)? = nil
    ) async throws -> Attachment {
        _ = try requireSession()
        let size = try Self.inspectFile(at: fileURL)
        let name = name ?? fileURL.lastPathComponent
        try Self.validateFileName(name)
        let contentType = contentType ?? MediaTypes.guess(forFileName: name)
        try Self.validateContentType(contentType)
        return try await fileTransfer.upload(
            file: fileURL, size: size, conversationId: conversationId, name: name, contentType: contentType,
            progress: progress
        )
    }

    // MARK: Sending

    /// Sends a file (with an optional caption) and returns the message as stored: queues it with
    /// ``queueFile(at:to:name:contentType:caption:preview:replyTo:mentions:clientMessageId:)`` and waits for the
    /// outcome. Cancelling the waiting task stops the wait, not the message.
    ///
    /// ```swift
    /// let message = try await client.sendFile(at: reportURL, to: .user("bob"), caption: "The report")
    /// print(message.files[0].size)
    /// ```
    ///
    /// - Throws: what ``queueFile(at:to:name:contentType:caption:preview:replyTo:mentions:clientMessageId:)``
    ///   throws; the server's refusal of the upload (`ERR_FILE_TOO_LARGE`, `ERR_FILE_INVALID` ...) or of the
    ///   message, as ``sendMessage(parts:to:metadata:alert:replyTo:mentions:clientMessageId:)`` does.
    @discardableResult
    public func sendFile(
        at fileURL: URL, to receiver: Receiver, name: String? = nil, contentType: String? = nil,
        caption: String? = nil, preview: String? = nil, replyTo: String? = nil, mentions: [String]? = nil,
        clientMessageId: String = TimeOrderedUUID.make().uuidString
    ) async throws -> Message {
        let queued = try makeFileOutgoing(
            fileURL, to: receiver, name: name, contentType: contentType, caption: caption, preview: preview,
            replyTo: replyTo, mentions: mentions, clientMessageId: clientMessageId
        )
        guard let message = try await outbox.perform(queued).message else {
            throw ParleyError(.unexpectedResponse, "The server's answer carries no message.")
        }
        return message
    }

    /// Queues a file message in the durable outbox and returns at once.
    ///
    /// The file is copied into the SDK's storage directory before this returns, so the app may delete its own copy.
    /// When the outbox reaches the entry (in order with the other messages) it uploads the copy, reporting progress
    /// on the entry (``OutgoingMessage/uploadProgress`` in ``outboxUpdates()`` and the outbox listeners), saves the
    /// upload's id in the entry, sends the message (a `file` part, then the caption as a text part) with the entry's
    /// client message id, and removes the copy. A file uploaded once is not uploaded again after a restart; an upload
    /// the server no longer has (removed after a long time offline) is made again once. The message is stored exactly
    /// once, across reconnections, server restarts and app restarts. ``cancelMessage(clientMessageId:)`` removes the
    /// entry and its copy, also while the file is being uploaded (the upload stops); once the upload is done and the
    /// message is being sent it throws `ERR_OUTBOX_MESSAGE_SENDING`.
    ///
    /// - Parameters:
    ///   - fileURL: The file to send; copied before this returns.
    ///   - receiver: A user (their direct conversation) or a conversation.
    ///   - name: The name receivers see; the file's own name by default.
    ///   - contentType: The media type; guessed from the extension by default.
    ///   - caption: A text sent with the file, in the same message.
    ///   - preview: A BlurHash or a `data:` URL of a thumbnail, at most `FileInfo.maxPreviewBytes` bytes.
    ///   - replyTo: The id of the message this one replies to (the first message of a thread).
    ///   - mentions: uids the message mentions.
    ///   - clientMessageId: The entry's id, and the message's: a retry with it never makes a second message.
    /// - Throws: `ERR_NOT_LOGGED_IN`; `ERR_FILE_UNREADABLE`; `ERR_INVALID_ARGUMENT` (a bad name, type or preview);
    ///   `ERR_MESSAGE_TOO_LARGE` (the caption); `ERR_STORAGE` (the copy or the outbox could not be written).
    @discardableResult
    public func queueFile(
        at fileURL: URL, to receiver: Receiver, name: String? = nil, contentType: String? = nil,
        caption: String? = nil, preview: String? = nil, replyTo: String? = nil, mentions: [String]? = nil,
        clientMessageId: String = TimeOrderedUUID.make().uuidString
    ) throws -> OutgoingMessage {
        let queued = try makeFileOutgoing(
            fileURL, to: receiver, name: name, contentType: contentType, caption: caption, preview: preview,
            replyTo: replyTo, mentions: mentions, clientMessageId: clientMessageId
        )
        do {
            try outbox.add(queued)
        } catch {
            if let file = queued.file { try? FileManager.default.removeItem(at: outbox.storedFile(file)) }
            throw error
        }
        return queued
    }

    /// An outbox entry for a file: checked, and the file copied into the outbox's folder.
    private func makeFileOutgoing(
        _ fileURL: URL, to receiver: Receiver, name: String?, contentType: String?, caption: String?,
        preview: String?, replyTo: String?, mentions: [String]?, clientMessageId: String
    ) throws -> OutgoingMessage {
        _ = try requireSession()
        _ = try Self.inspectFile(at: fileURL)
        let name = name ?? fileURL.lastPathComponent
        try Self.validateFileName(name)
        let contentType = contentType ?? MediaTypes.guess(forFileName: name)
        try Self.validateContentType(contentType)
        if let preview, preview.utf8.count > FileInfo.maxPreviewBytes {
            throw ParleyError(.invalidArgument, "A preview has at most \(FileInfo.maxPreviewBytes) bytes.")
        }
        let caption = caption.flatMap { $0.isEmpty ? nil : [MessagePart.text($0)] } ?? []
        // The limits apply to the message as it will be sent: the file's part (its size does not depend on the id)
        // and the caption.
        let placeholder = MessagePart(
            type: .file,
            file: FileInfo(id: "f_", name: name, contentType: contentType, size: 0, sha256: "", preview: preview)
        )
        var queued = try makeOutgoing(
            .send, parts: [placeholder] + caption, to: receiver, replyTo: replyTo, mentions: mentions,
            id: clientMessageId
        )
        queued.parts = caption
        let storedName = UUID().uuidString
        let copy = outbox.filesDirectory.appendingPathComponent(storedName)
        do {
            try FileManager.default.createDirectory(at: outbox.filesDirectory, withIntermediateDirectories: true)
            try FileManager.default.copyItem(at: fileURL, to: copy)
        } catch {
            try? FileManager.default.removeItem(at: copy)
            throw ParleyError(.storageError, "The file could not be copied for the outbox.", underlying: "\(error)")
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: copy.path)[.size] as? NSNumber)?.int64Value
        queued.file = OutgoingFile(
            storedFileName: storedName, name: name, contentType: contentType, size: size ?? 0, preview: preview
        )
        return queued
    }

    /// The outbox's step for a send with a file: uploads it unless the entry has an upload already (saving its id
    /// before anything else), then sends the message; when the server no longer has the upload, uploads again once.
    func sendWithFile(_ outgoing: OutgoingMessage, to conversationId: String) async throws -> OutboxOutcome {
        var outgoing = outgoing
        var uploaded = false
        if outgoing.file?.attachmentId == nil {
            outgoing = try await uploadOutgoingFile(outgoing, to: conversationId)
            uploaded = true
        }
        do {
            return try await sendOutgoing(outgoing, to: conversationId)
        } catch let error as ParleyError where error.code == .attachmentNotFound && !uploaded {
            logger.info("Outbox: the upload of \(outgoing.clientMessageId) is gone; uploading the file again.")
            try outbox.recordUpload(outgoing.clientMessageId, attachmentId: nil)
            outgoing = try await uploadOutgoingFile(outgoing, to: conversationId)
            return try await sendOutgoing(outgoing, to: conversationId)
        }
    }

    private func uploadOutgoingFile(_ outgoing: OutgoingMessage, to conversationId: String) async throws
        -> OutgoingMessage
    {
        guard let file = outgoing.file else { return outgoing }
        let copy = outbox.storedFile(file)
        let size: Int64
        do {
            size = try Self.inspectFile(at: copy)
        } catch {
            throw ParleyError(
                .fileUnreadable, "The outbox's copy of \(file.name) is gone: queue the file again.",
                underlying: "\(error)"
            )
        }
        let id = outgoing.clientMessageId
        let outbox = self.outbox
        let transfer = fileTransfer
        // In a task of its own, so that cancelling the entry (the app's cancelMessage) stops the upload alone.
        let upload = Task {
            try await transfer.upload(
                file: copy, size: size, conversationId: conversationId, name: file.name, contentType: file.contentType,
                progress: { outbox.reportProgress(id, $0) }
            )
        }
        guard outbox.uploadStarted(id, stop: { upload.cancel() }) else {
            upload.cancel()
            throw ParleyError(.messageCancelled, "The message was cancelled.")
        }
        let attachment = try await withTaskCancellationHandler {
            try await upload.value
        } onCancel: {
            upload.cancel()
        }
        // Throws when the app cancelled the entry meanwhile: the upload then stays unused (the server removes it).
        try outbox.recordUpload(id, attachmentId: attachment.id)
        var updated = outgoing
        updated.file?.attachmentId = attachment.id
        return updated
    }

    // MARK: Downloading

    /// A short-lived link to a file's bytes (an hour by default), with the attachment it names. The link needs no
    /// credentials (give it to an image view or a player); resolve it against the server URL, or use
    /// ``downloadFile(_:in:to:progress:)-(String,_,_,_)``.
    ///
    /// - Throws: `ERR_ATTACHMENT_NOT_FOUND` (no such file in this conversation), `ERR_CONVERSATION_NOT_FOUND` (not a
    ///   participant).
    public func fileLink(_ fileId: String, in conversationId: String) async throws -> AttachmentLink {
        _ = try requireSession()
        return try await fileTransfer.link(fileId, in: conversationId)
    }

    /// Downloads a file of a message to `destination`, streaming it to disk, and checks its size and SHA-256
    /// against what the server recorded at the upload. Returns where the file is.
    ///
    /// ```swift
    /// let file = message.files[0]
    /// let saved = try await client.downloadFile(file.id, in: message.conversationId, to: downloads) {
    ///     print($0.fraction)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - fileId: The file's id (`FileInfo.id`, `f_...`).
    ///   - conversationId: The conversation of the message that carries it.
    ///   - destination: A file (created, or replaced once the download is complete and checked), or an existing
    ///     folder: the file then goes into it under its own name.
    ///   - progress: Called as bytes arrive (every 1 % or 64 KiB, and at the end).
    /// - Throws: what ``fileLink(_:in:)`` throws; `ERR_FILE_MISMATCH` (the bytes are not the file's: download
    ///   again); `ERR_STORAGE` (the destination could not be written); `ERR_SERVER_UNREACHABLE`. Nothing is left at
    ///   the destination on failure.
    @discardableResult
    public func downloadFile(
        _ fileId: String, in conversationId: String, to destination: URL,
        progress: (@Sendable (FileTransferProgress) -> Void)? = nil
    ) async throws -> URL {
        try await fileTransfer.save(try await fileLink(fileId, in: conversationId), to: destination, progress: progress)
    }

    /// ``downloadFile(_:in:to:progress:)-(String,_,_,_)`` for a message's `FileInfo`.
    @discardableResult
    public func downloadFile(
        _ file: FileInfo, in conversationId: String, to destination: URL,
        progress: (@Sendable (FileTransferProgress) -> Void)? = nil
    ) async throws -> URL {
        try await downloadFile(file.id, in: conversationId, to: destination, progress: progress)
    }

    // MARK: Checks

    var fileTransfer: FileTransfer {
        let state = self.state
        return FileTransfer(serverURL: settings.serverURL) { (state.withLockedValue { $0.session?.authToken }, nil) }
    }

    /// The size of a regular, readable file.
    static func inspectFile(at fileURL: URL) throws -> Int64 {
        guard fileURL.isFileURL else {
            throw ParleyError(.fileUnreadable, "\(fileURL) is not a file URL.")
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: fileURL.path, isDirectory: &isDirectory) else {
            throw ParleyError(.fileUnreadable, "No file at \(fileURL.path).")
        }
        guard !isDirectory.boolValue else {
            throw ParleyError(.fileUnreadable, "\(fileURL.path) is a folder, not a file.")
        }
        guard FileManager.default.isReadableFile(atPath: fileURL.path),
            let size = (try? FileManager.default.attributesOfItem(atPath: fileURL.path)[.size] as? NSNumber)?
                .int64Value
        else {
            throw ParleyError(.fileUnreadable, "\(fileURL.path) cannot be read.")
        }
        return size
    }

    /// The server's rule for names: 1-255 bytes of UTF-8, no control characters, `/` or `\`.
    static func validateFileName(_ name: String) throws {
        let control = name.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }
        guard (1...255).contains(name.utf8.count), !control, !name.contains("/"), !name.contains("\\") else {
            throw ParleyError(
                .invalidArgument,
                "A file name is 1-255 bytes without control characters, / or \\: \(name.debugDescription)."
            )
        }
    }

    /// A media type: `type/subtype`, without spaces.
    static func validateContentType(_ type: String) throws {
        let mediaType = type.split(separator: ";", maxSplits: 1).first ?? ""
        let halves = mediaType.split(separator: "/", omittingEmptySubsequences: false)
        guard halves.count == 2, halves.allSatisfy({ !$0.isEmpty && !$0.contains(" ") }) else {
            throw ParleyError(.invalidArgument, "A content type is a media type (type/subtype), not \(type).")
        }
    }
}

/// The codes of files.
extension ErrorCode {
    /// A file to upload or send is missing, a folder, or not readable (or the outbox's copy of it is gone). Check
    /// the path; queue the file again.
    public static let fileUnreadable: ErrorCode = "ERR_FILE_UNREADABLE"
    /// A downloaded file's size or SHA-256 differs from the upload's (a broken transfer or proxy). Download again.
    public static let fileMismatch: ErrorCode = "ERR_FILE_MISMATCH"
}
