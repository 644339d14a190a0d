import Foundation
import NIOConcurrencyHelpers

/// A fresh directory under the system's temporary folder, for one test's files.
///
/// It lasts until ``remove()`` or until the test process exits, whichever comes first: a server's data directory
/// outlives the server (tests restart servers over their data, and read its files after a stop), so nothing tied to
/// one test can tell when it is done with it. The process removes every directory it made when it exits normally
/// (`atexit`), unless `PARLEY_KEEP_TEST_DATA` is set, to look at a failed run's files. Before, each run of the whole
/// suite left about 650 directories behind, 370 MB (200 MB of them from the large-file test).
public struct TemporaryDirectory: Sendable {
    public let path: String
    public var url: URL { URL(fileURLWithPath: path, isDirectory: true) }

    public init(prefix: String = "parley-test") throws {
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(prefix)-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        self.path = path
        if TemporaryDirectories.made.record(path), ProcessInfo.processInfo.environment["PARLEY_KEEP_TEST_DATA"] == nil {
            atexit { TemporaryDirectories.made.removeAll() }
        }
    }

    /// Deletes the directory and everything in it.
    public func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// Directories to remove together: ``TemporaryDirectory`` records every one it makes in one of these, which the process
/// empties when it exits.
final class TemporaryDirectories: Sendable {
    static let made = TemporaryDirectories()

    init() {}

    /// nil until the first directory (the exit handler is installed then).
    private let paths = NIOLockedValueBox<[String]?>(nil)

    /// Remembers `path`; returns whether it is the first one.
    @discardableResult func record(_ path: String) -> Bool {
        paths.withLockedValue { paths in
            guard paths != nil else {
                paths = [path]
                return true
            }
            paths!.append(path)
            return false
        }
    }

    /// Removes every directory made so far (and what is in it); what is gone already is skipped.
    func removeAll() {
        let paths = paths.withLockedValue { paths in
            defer { paths = [] }
            return paths ?? []
        }
        for path in paths { try? FileManager.default.removeItem(atPath: path) }
    }

    /// The directories made and not yet removed by ``removeAll()``.
    var recorded: [String] { paths.withLockedValue { $0 ?? [] } }
}
