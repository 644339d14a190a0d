import ParleyProtocol

/// An uploaded file as the store keeps it: the ``Attachment`` clients see, its app, and the message whose `file` part
/// carries it once one does. Its bytes are in the server's blob store under ``blobKey``. An
/// upload no message carries is removed after a while by the server's sweeper
/// (``ParleyStore/unattachedAttachments(createdBefore:limit:)``).
public struct AttachmentRecord: Sendable, Hashable {
    public var appId: String
    public var attachment: Attachment
    /// The message whose `file` part carries it; nil until one does.
    public var messageId: String?

    public init(appId: String, attachment: Attachment, messageId: String? = nil) {
        self.appId = appId
        self.attachment = attachment
        self.messageId = messageId
    }

    public var id: String { attachment.id }

    /// Where its bytes are: `<appId>/<id>`.
    public var blobKey: String { appId + "/" + attachment.id }
}

/// How messages take uploads: the rules every store applies in the transaction that stores a message or changes it.
///
/// A message's `file` part names an upload by id. A send or an edit may name an upload of the actor's, of the same
/// conversation, that no message carries yet: the store then sets the upload's message in the same transaction, so
/// two messages never take one upload. An edit may also keep the files the message already has; the ones it drops,
/// and every file of a deleted message, are removed: their records are marked (links to them stop at once) and the
/// server's sweeper deletes their bytes.
public enum Attachments {
    /// The longest file name, in bytes.
    public static let maxNameBytes = 255
    /// The longest content type, in bytes.
    public static let maxContentTypeBytes = 127

    /// The upload ids the `file` parts name, in order.
    public static func ids(in parts: [MessagePart]) -> [String] {
        parts.compactMap { $0.type == .file ? $0.file?.id : nil }
    }

    /// `parts` with each `file` part filled in from its upload (the sender's preview kept), once every upload it
    /// names may go into this message.
    ///
    /// - Parameters:
    ///   - records: The uploads named, by id (those not found absent).
    ///   - actor: Who sends or edits.
    ///   - keeping: The uploads the message carries already (an edit): they stay whoever uploaded them.
    ///   - taken: Uploads other messages of the same transaction took already.
    public static func resolve(
        _ parts: [MessagePart], records: [String: AttachmentRecord], appId: String, conversationId: String,
        actor: String, keeping: Set<String> = [], taken: Set<String> = []
    ) throws -> [MessagePart] {
        var seen = Set<String>()
        return try parts.map { part in
            guard part.type == .file, var file = part.file else { return part }
            guard seen.insert(file.id).inserted else {
                throw DomainError(.badRequest, "A message carries upload \(file.id) once.")
            }
            guard let record = records[file.id], record.appId == appId,
                record.attachment.conversationId == conversationId,
                keeping.contains(file.id) || record.attachment.uploader == actor
            else {
                throw DomainError(.attachmentNotFound, "No upload \(file.id) of yours in this conversation.")
            }
            if !keeping.contains(file.id) {
                guard record.messageId == nil, !taken.contains(file.id) else {
                    throw DomainError(
                        .attachmentInUse,
                        "Upload \(file.id) is in another message: upload the file again to send it again."
                    )
                }
            }
            let preview = file.preview
            file = FileInfo(record.attachment, preview: preview)
            var filled = part
            filled.file = file
            return filled
        }
    }
}
