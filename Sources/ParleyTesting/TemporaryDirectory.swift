import Foundation

/// A fresh directory under the system's temporary folder, for one test's files.
public struct TemporaryDirectory: Sendable {
    public let path: String
    public var url: URL { URL(fileURLWithPath: path, isDirectory: true) }

    public init(prefix: String = "parley-test") throws {
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(prefix)-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        self.path = path
    }

    /// Deletes the directory and everything in it.
    public func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}
