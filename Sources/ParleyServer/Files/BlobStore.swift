import Foundation
import NIOCore

/// Where the bytes of attachments live (docs/BENCHMARKS.md, appendix "Design notes", "Files"): a folder of the data directory for one node
/// (``DiskBlobStore``), S3-compatible object storage for several (``S3BlobStore``). Metadata (who uploaded what, for
/// which conversation, its checksum) is in the database; a store holds only bytes under keys.
///
/// Uploads reach a store complete: the server spools a request's body to a local file first (checking its size, its
/// checksum and, for images, its type as it goes), then hands the file over. Reads stream in chunks: nothing holds a
/// whole file in memory.
public protocol BlobStore: Sendable {
    /// Stores the file at `path` (`size` bytes, whose SHA-256 is `sha256`) under `key`, replacing what was there. The
    /// store takes the file: it is gone afterwards, whether the put succeeded or not (moved into place, or sent and
    /// removed).
    func put(key: BlobKey, file path: String, size: Int64, sha256: [UInt8], contentType: String) async throws

    /// The size of what `key` holds; nil when it holds nothing.
    func size(of key: BlobKey) async throws -> Int64?

    /// Hands `write` the bytes of `range` of what `key` holds, in order, in chunks of at most a few hundred KiB;
    /// throws ``BlobStoreError/notFound`` when it holds nothing.
    func read(_ key: BlobKey, range: Range<Int64>, into write: (ByteBuffer) async throws -> Void) async throws

    /// Removes what `key` holds; nothing happens when it holds nothing.
    func delete(_ key: BlobKey) async throws
}

/// The name of a blob: `/`-separated segments of ASCII letters, digits, `_` and `-` (at most 8, each 1-100 bytes), so
/// that it is the same path on disk and in a bucket and can never climb out of either.
public struct BlobKey: Hashable, Sendable, CustomStringConvertible {
    public let description: String

    public init(_ key: String) throws {
        let segments = key.split(separator: "/", omittingEmptySubsequences: false)
        guard (1...8).contains(segments.count),
            segments.allSatisfy({ segment in
                (1...100).contains(segment.utf8.count)
                    && segment.utf8.allSatisfy { byte in
                        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A)
                            || (byte >= 0x61 && byte <= 0x7A)
                            || byte == 0x5F || byte == 0x2D
                    }
            })
        else { throw BlobStoreError.invalidKey(String(key.prefix(200))) }
        description = key
    }
}

public enum BlobStoreError: Error, Equatable, CustomStringConvertible {
    case invalidKey(String)
    case notFound(String)
    /// The object store answered with an error status (S3's error code in `message`).
    case storage(status: Int, message: String)
    /// The range is not within the blob.
    case invalidRange

    public var description: String {
        switch self {
        case .invalidKey(let key): return "Not a blob key: \(key)"
        case .notFound(let key): return "No blob \(key)"
        case .storage(let status, let message): return "Object storage answered \(status): \(message)"
        case .invalidRange: return "The range is outside the blob."
        }
    }
}
