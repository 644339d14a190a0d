/// How far an upload or a download has come.
///
/// ```swift
/// let attachment = try await client.uploadFile(at: url, to: conversationId) { progress in
///     print("\(Int(progress.fraction * 100)) %")
/// }
/// ```
public struct FileTransferProgress: Sendable, Hashable, Codable {
    /// Bytes sent (an upload) or received (a download) so far.
    public var completedBytes: Int64
    /// The file's size.
    public var totalBytes: Int64

    /// Creates a progress.
    public init(completedBytes: Int64, totalBytes: Int64) {
        self.completedBytes = completedBytes
        self.totalBytes = totalBytes
    }

    /// `completedBytes / totalBytes`, from 0 to 1 (1 for an empty file).
    public var fraction: Double {
        guard totalBytes > 0 else { return 1 }
        return min(1, max(0, Double(completedBytes) / Double(totalBytes)))
    }

    /// Whether every byte went through.
    public var isComplete: Bool { completedBytes >= totalBytes }
}
