import Foundation
import Testing

/// The README's ten-line example is `Examples/ReadmeExample/main.swift`, which the build compiles: it compiles as
/// written only while the two stay the same.
@Suite struct ReadmeExampleTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test func theReadmesExampleIsTheCompiledOne() throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let example = try String(
            contentsOf: Self.root.appendingPathComponent("Examples/ReadmeExample/main.swift"), encoding: .utf8)
        let section = try #require(readme.range(of: "## The SDK in ten lines\n\n```swift\n"))
        let end = try #require(readme.range(of: "```\n", range: section.upperBound..<readme.endIndex))
        #expect(String(readme[section.upperBound..<end.lowerBound]) == example)
    }
}
