import ParleyProtocol

/// An uploaded file as the store keeps it (issue 22, being built): the ``Attachment`` clients see, its app, and the
/// message whose `file` part carries it once one does. Its bytes are in the server's blob store under ``blobKey``. An
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

public enum Attachments {
    /// The longest file name, in bytes.
    public static let maxNameBytes = 255
    /// The longest content type, in bytes.
    public static let maxContentTypeBytes = 127
}
