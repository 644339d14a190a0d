import Foundation
import Parley
import Testing

/// The version in the code is the newest release of CHANGELOG.md (CONTRIBUTING.md, "Releasing").
@Suite struct ReleaseTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test func theVersionIsTheChangelogsNewestRelease() throws {
        let changelog = try String(contentsOf: Self.root.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        let headings = changelog.split(separator: "\n").filter { $0.hasPrefix("## ") }.map { $0.dropFirst(3) }
        #expect(headings.first == "Unreleased")
        let releases = headings.dropFirst().map { String($0.prefix { $0 != " " }) }
        let newest = try #require(releases.first)
        #expect(newest == ParleyRelease.version)
        // Semantic versions, newest first.
        let parsed = try releases.map { release -> [Int] in
            let parts = release.split(separator: ".").compactMap { Int($0) }
            try #require(parts.count == 3, "\(release) is not MAJOR.MINOR.PATCH")
            return parts
        }
        #expect(parsed == parsed.sorted { $0.lexicographicallyPrecedes($1) }.reversed())
    }
}
