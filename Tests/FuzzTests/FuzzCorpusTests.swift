import Foundation
import ParleyFuzzTargets
import Testing

/// Every fuzz target over its seed corpus (`Fuzz/Corpus/<target>`) and every input a fuzzing run ever found
/// (`Fuzz/Regressions/<target>`): what libFuzzer checks, in every test run, without a fuzzing build.
@Suite struct FuzzCorpusTests {
    static let fuzz = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz")

    static func files(_ folder: String, _ target: FuzzTarget) -> [URL] {
        let directory = fuzz.appendingPathComponent(folder).appendingPathComponent(target.name)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted().map { directory.appendingPathComponent($0) }
    }

    @Test(arguments: FuzzTarget.all.map(\.name))
    func everySeedAndEveryFoundInputKeepsTheTargetsProperties(_ name: String) throws {
        let target = try #require(FuzzTarget.named(name))
        let seeds = Self.files("Corpus", target)
        #expect(seeds.count >= 5, "Fuzz/Corpus/\(name) holds the target's seeds")
        for file in seeds + Self.files("Regressions", target) {
            let bytes = try [UInt8](Data(contentsOf: file))
            #expect(throws: Never.self, "\(file.lastPathComponent)") { try target.run(bytes) }
        }
    }

    @Test(arguments: FuzzTarget.all.map(\.name))
    func everyTargetHasADictionaryOfItsKeywords(_ name: String) throws {
        let path = Self.fuzz.appendingPathComponent("Dictionaries/\(name).dict").path
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let entries = text.split(separator: "\n").filter { !$0.hasPrefix("#") && $0.contains("\"") }
        #expect(entries.count >= 5)
    }
}
