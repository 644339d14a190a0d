/// An uploaded file (docs/PROTOCOL.md, "Attachments"): what `POST /v1/conversations/{id}/attachments` answers.
public struct Attachment: Codable, Sendable, Hashable {
    /// `f_...`: what a message's `file` part names.
    public var id: String
    /// The conversation the file was uploaded to; only its messages may carry it.
    public var conversationId: String
    /// Who uploaded it: the only user who may attach it to a message.
    public var uploader: String
    /// The file name the uploader gave.
    public var name: String
    /// The media type the uploader gave (for images, checked against the bytes).
    public var contentType: String
    /// The size in bytes.
    public var size: Int64
    /// SHA-256 of the bytes, lowercase hex.
    public var sha256: String
    /// Images (PNG, JPEG, GIF, WebP): the size in pixels, read from the file.
    public var width: Int?
    /// Images: the height in pixels, read from the file.
    public var height: Int?
    /// When the file was uploaded (epoch ms).
    public var createdAt: Int64

    /// Creates an attachment from its stored fields.
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
    /// The file.
    public var attachment: Attachment
    /// Absolute path of the bytes on this server (`/v1/files/...?expires=...&signature=...`); ranges and caching
    /// headers are supported.
    public var url: String
    /// When the link stops working, epoch milliseconds.
    public var expiresAt: Int64

    /// Creates a link to an attachment.
    public init(attachment: Attachment, url: String, expiresAt: Int64) {
        self.attachment = attachment
        self.url = url
        self.expiresAt = expiresAt
    }
}

/// The file of a message's `file` part (docs/PROTOCOL.md, "Attachments").
///
/// A sender names their upload by ``id`` (and may add a ``preview``); the server replaces the rest with what it
/// stored at the upload, so a receiver can trust the name, type, size, checksum and dimensions. The bytes are behind
/// `GET /v1/conversations/{conversationId}/attachments/{id}` (a signed link).
public struct FileInfo: Codable, Sendable, Hashable {
    /// The upload's id (`f_...`).
    public var id: String
    /// The file name the uploader gave.
    public var name: String
    /// The media type the uploader gave (for images, checked against the bytes).
    public var contentType: String
    /// The size in bytes.
    public var size: Int64
    /// SHA-256 of the bytes, lowercase hex.
    public var sha256: String
    /// Images: the size in pixels.
    public var width: Int?
    /// Images: the height in pixels.
    public var height: Int?
    /// A small preview given by the sender (a BlurHash, or a `data:` URL of a thumbnail): at most
    /// ``maxPreviewBytes`` bytes, counted in the message's size.
    public var preview: String?

    /// The longest preview, in UTF-8 bytes.
    public static let maxPreviewBytes = 16 * 1024

    /// Creates a file description from its fields.
    public init(
        id: String, name: String, contentType: String, size: Int64, sha256: String, width: Int? = nil,
        height: Int? = nil, preview: String? = nil
    ) {
        self.id = id
        self.name = name
        self.contentType = contentType
        self.size = size
        self.sha256 = sha256
        self.width = width
        self.height = height
        self.preview = preview
    }

    /// The file of an upload, as a message's `file` part describes it, with an optional preview.
    public init(_ attachment: Attachment, preview: String? = nil) {
        self.init(
            id: attachment.id, name: attachment.name, contentType: attachment.contentType, size: attachment.size,
            sha256: attachment.sha256, width: attachment.width, height: attachment.height, preview: preview
        )
    }

    /// A sender may name only the id (and a preview): the server fills in the rest.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        name = try container.decodeIfPresent(String.self, forKey: .name) ?? ""
        contentType = try container.decodeIfPresent(String.self, forKey: .contentType) ?? "application/octet-stream"
        size = try container.decodeIfPresent(Int64.self, forKey: .size) ?? 0
        sha256 = try container.decodeIfPresent(String.self, forKey: .sha256) ?? ""
        width = try container.decodeIfPresent(Int.self, forKey: .width)
        height = try container.decodeIfPresent(Int.self, forKey: .height)
        preview = try container.decodeIfPresent(String.self, forKey: .preview)
    }

    /// Whether the file is an image the server checked (PNG, JPEG, GIF, WebP).
    public var isImage: Bool { width != nil && contentType.hasPrefix("image/") }
}
