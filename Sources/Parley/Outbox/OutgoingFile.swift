import Foundation

/// The file of an outbox entry made by ``ParleyClient/queueFile(at:to:name:contentType:caption:preview:replyTo:mentions:clientMessageId:)``:
/// a copy in the SDK's storage directory, uploaded when the outbox reaches the entry, then named by the message's
/// `file` part.
public struct OutgoingFile: Sendable, Hashable, Codable {
    /// The copy's file name in the SDK's storage directory (`outbox-files-<appId>/`). The SDK removes it once the
    /// message is sent, or when the entry is cancelled.
    public var storedFileName: String
    /// The name the upload gets (shown to the receivers).
    public var name: String
    /// The media type the upload gets.
    public var contentType: String
    /// The file's size in bytes.
    public var size: Int64
    /// The sender's preview for the `file` part (a BlurHash or a `data:` URL), if any.
    public var preview: String?
    /// The upload's id (`f_...`) once the server has the file: saved before the message is sent, so that the file is
    /// not uploaded again after an app restart.
    public var attachmentId: String?
    /// How far the upload has come, while it runs (not saved).
    public var progress: FileTransferProgress?

    /// Creates an outbox file.
    public init(
        storedFileName: String, name: String, contentType: String, size: Int64, preview: String? = nil,
        attachmentId: String? = nil, progress: FileTransferProgress? = nil
    ) {
        self.storedFileName = storedFileName
        self.name = name
        self.contentType = contentType
        self.size = size
        self.preview = preview
        self.attachmentId = attachmentId
        self.progress = progress
    }

    enum CodingKeys: String, CodingKey {
        case storedFileName, name, contentType, size, preview, attachmentId
    }
}
