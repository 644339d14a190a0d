import ParleyProtocol

/// An uploaded file (issue 22, being built): who uploaded it, for which conversation, what it is. Its bytes are in the
/// server's blob store under ``blobKey``; a message's `file` part will carry it (``messageId`` once one does). An
/// upload no message carries is removed after a while by the server's sweeper
/// (``ParleyStore/unattachedAttachments(createdBefore:limit:)``).
public struct AttachmentRecord: Sendable, Hashable {
    /// `f_` and random letters and digits.
    public var id: String
    public var appId: String
    public var conversationId: String
    public var uploader: String
    /// The file's name as the client gave it (at most ``Attachments/maxNameBytes``).
    public var name: String
    public var contentType: String
    public var size: Int64
    /// The SHA-256 of the bytes, lowercase hex.
    public var sha256: String
    /// Images: the size in pixels, read from the file's header.
    public var width: Int?
    public var height: Int?
    public var createdAt: Int64
    /// The message whose `file` part carries it; nil until one does.
    public var messageId: String?

    public init(
        id: String, appId: String, conversationId: String, uploader: String, name: String, contentType: String,
        size: Int64, sha256: String, width: Int? = nil, height: Int? = nil, createdAt: Int64, messageId: String? = nil
    ) {
        self.id = id
        self.appId = appId
        self.conversationId = conversationId
        self.uploader = uploader
        self.name = name
        self.contentType = contentType
        self.size = size
        self.sha256 = sha256
        self.width = width
        self.height = height
        self.createdAt = createdAt
        self.messageId = messageId
    }

    /// Where its bytes are: `<appId>/<id>`.
    public var blobKey: String { appId + "/" + id }
}

public enum Attachments {
    /// The longest file name, in bytes.
    public static let maxNameBytes = 255
    /// The longest content type, in bytes.
    public static let maxContentTypeBytes = 127
}
