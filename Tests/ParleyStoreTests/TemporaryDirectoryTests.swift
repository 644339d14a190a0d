import Foundation
import Testing

@testable import ParleyTesting

/// Tests' temporary directories are removed together when the test process exits (``TemporaryDirectories``).
@Suite struct TemporaryDirectoryTests {
    @Test func everyDirectoryMadeIsRecordedForTheProcessToRemove() throws {
        let directory = try TemporaryDirectory(prefix: "parley-temporary")
        #expect(TemporaryDirectories.made.recorded.contains(directory.path))
        directory.remove()
    }

    @Test func removingAllRemovesEachDirectoryWithItsFilesOnce() throws {
        let directories = TemporaryDirectories()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("parley-remove-all-\(UUID())")
        let paths = ["a", "b"].map { root.appendingPathComponent($0).path }
        for path in paths {
            try FileManager.default.createDirectory(atPath: path + "/nested", withIntermediateDirectories: true)
            try Data("data".utf8).write(to: URL(fileURLWithPath: path + "/nested/file"))
        }
        #expect(directories.record(paths[0]))
        #expect(!directories.record(paths[1]))
        #expect(directories.recorded == paths)
        try FileManager.default.removeItem(atPath: paths[1])  // gone already: skipped

        directories.removeAll()
        for path in paths { #expect(!FileManager.default.fileExists(atPath: path)) }
        #expect(directories.recorded.isEmpty)
        directories.removeAll()
        try FileManager.default.removeItem(at: root)
    }
}
