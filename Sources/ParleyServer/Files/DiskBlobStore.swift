import Foundation
import NIOCore
import NIOFileSystem

/// Blobs as files below a folder (by default `files/` in the data directory): one node's attachments. A put moves the
/// spooled upload into place (a rename on the same file system; else a copy under a temporary name, then a rename), so
/// a reader never sees half a file.
public struct DiskBlobStore: BlobStore {
    public let root: String
    static let chunk = ByteCount.kibibytes(256)

    public init(root: String) throws {
        self.root = root
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    func path(_ key: BlobKey) -> String { root + "/" + key.description }

    public func put(key: BlobKey, file: String, size: Int64, sha256: [UInt8], contentType: String) async throws {
        let destination = path(key)
        let folder = (destination as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { unlink(file) }
        // The same file system: one rename, nothing copied.
        if rename(file, destination) == 0 { return }
        let temporary = folder + "/.incoming-" + UUID().uuidString
        do {
            try FileManager.default.copyItem(atPath: file, toPath: temporary)
            guard rename(temporary, destination) == 0 else {
                throw BlobStoreError.storage(status: 0, message: "rename: \(String(cString: strerror(errno)))")
            }
        } catch {
            unlink(temporary)
            throw error
        }
    }

    public func size(of key: BlobKey) async throws -> Int64? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path(key)) else { return nil }
        return (attributes[.size] as? NSNumber)?.int64Value
    }

    public func read(_ key: BlobKey, range: Range<Int64>, into write: (ByteBuffer) async throws -> Void) async throws {
        do {
            try await FileSystem.shared.withFileHandle(forReadingAt: FilePath(path(key))) { handle in
                let size = try await handle.info().size
                guard range.lowerBound >= 0, range.upperBound <= size else { throw BlobStoreError.invalidRange }
                for try await chunk in handle.readChunks(in: range, chunkLength: Self.chunk) {
                    try await write(chunk)
                }
            }
        } catch let error as FileSystemError where error.code == .notFound {
            throw BlobStoreError.notFound(key.description)
        }
    }

    public func delete(_ key: BlobKey) async throws {
        guard unlink(path(key)) == 0 || errno == ENOENT else {
            throw BlobStoreError.storage(status: 0, message: "unlink: \(String(cString: strerror(errno)))")
        }
    }
}
