/// An uploaded file (docs/PROTOCOL.md, "Attachments"): what `POST /v1/conversations/{id}/attachments` answers.
public struct Attachment: Codable, Sendable, Hashable {
    /// `f_...`: what a message's `file` part names.
    public var id: String
    public var conversationId: String
    /// Who uploaded it: the only user who may attach it to a message.
    public var uploader: String
    public var name: String
    /// The media type the uploader gave (for images, checked against the bytes).
    public var contentType: String
    public var size: Int64
    /// SHA-256 of the bytes, lowercase hex.
    public var sha256: String
    /// Images (PNG, JPEG, GIF, WebP): the size in pixels, read from the file.
    public var width: Int?
    public var height: Int?
    public var createdAt: Int64

    public init(
        id: String, conversationId: String, uploader: String, name: String, contentType: String, size: Int64,
        sha256: String, width: Int? = nil, height: Int? = nil, createdAt: Int64
    ) {
        self.id = id
        self.conversationId = conversationId
        self.uploader = uploader
        self.name = name
        self.contentType = contentType
        self.size = size
        self.sha256 = sha256
        self.width = width
        self.height = height
        self.createdAt = createdAt
    }
}

/// An attachment with a short-lived download link (`GET /v1/conversations/{id}/attachments/{attachmentId}`): the
/// link needs no credentials (an `<img src>`, a CDN), so it expires.
public struct AttachmentLink: Codable, Sendable, Hashable {
    public var attachment: Attachment
    /// Absolute path of the bytes on this server (`/v1/files/...?expires=...&signature=...`); ranges and caching
    /// headers are supported.
    public var url: String
    /// When the link stops working, epoch milliseconds.
    public var expiresAt: Int64

    public init(attachment: Attachment, url: String, expiresAt: Int64) {
        self.attachment = attachment
        self.url = url
        self.expiresAt = expiresAt
    }
}
