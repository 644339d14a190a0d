import Foundation
import ParleyFuzzTargets

/// `parley-fuzz` (docs/RELIABILITY.md). Built as usual, `parley-fuzz TARGET FILE_OR_FOLDER...` runs the target once on
/// each input, as `FuzzCorpusTests` does: the way to replay a finding without a fuzzing build. Built by `scripts/fuzz`
/// with `-sanitize=fuzzer,address` and `-D PARLEY_FUZZING`, it is libFuzzer: every argument is libFuzzer's
/// (`-max_total_time=60 CORPUS_DIR SEED_DIR ...`) and `PARLEY_FUZZ_TARGET` names the target. `--list` names them.
@main
struct ParleyFuzz {
    static func main() {
        let arguments = CommandLine.arguments
        if arguments.count == 2, arguments[1] == "--list" {
            for target in FuzzTarget.all { print("\(target.name)\t\(target.summary)") }
            exit(0)
        }
        #if PARLEY_FUZZING
            // Every argument is libFuzzer's; the target is PARLEY_FUZZ_TARGET's (LibFuzzer.target).
            var argc = CommandLine.argc
            var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
            exit(llvmFuzzerRunDriver(&argc, &argv, fuzzOneInput))
        #else
            guard arguments.count >= 2, arguments[1] != "--help", arguments[1] != "-h" else {
                print("usage: parley-fuzz TARGET FILE_OR_FOLDER... | --list")
                exit(arguments.count >= 2 ? 0 : 64)
            }
            guard let target = FuzzTarget.named(arguments[1]) else {
                FileHandle.standardError.write(Data("parley-fuzz: no target \(arguments[1]); see --list\n".utf8))
                exit(64)
            }
            exit(replay(target, paths: Array(arguments.dropFirst(2))))
        #endif
    }

    /// Runs the target on every file named, or in a folder named; 1 on the first finding.
    static func replay(_ target: FuzzTarget, paths: [String]) -> Int32 {
        var count = 0
        for path in paths {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else {
                FileHandle.standardError.write(Data("parley-fuzz: no file \(path)\n".utf8))
                return 66
            }
            let files =
                isFolder.boolValue
                ? ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted().map { "\(path)/\($0)" }
                : [path]
            for file in files {
                guard let data = FileManager.default.contents(atPath: file) else { continue }
                do {
                    try target.run(Array(data))
                } catch {
                    print("\(file): \(error)")
                    return 1
                }
                count += 1
            }
        }
        print("\(target.name): \(count) inputs, no finding")
        return 0
    }
}

#if PARLEY_FUZZING
    /// libFuzzer's driver, linked by `-sanitize=fuzzer` (compiler-rt's FuzzerInterface.h: `LLVMFuzzerRunDriver`), for
    /// a build whose entry point is this module's `main`. Where libFuzzer's own `main` is linked instead, it calls
    /// ``fuzzOneInput(_:_:)`` itself.
    @_silgen_name("LLVMFuzzerRunDriver")
    private func llvmFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt

    /// libFuzzer's entry point: one input for the target PARLEY_FUZZ_TARGET names.
    @_cdecl("LLVMFuzzerTestOneInput")
    func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        do {
            try LibFuzzer.target.run(UnsafeRawBufferPointer(start: data, count: size))
        } catch {
            // A finding is a crash to libFuzzer: it saves the input as `crash-<sha1>` and stops.
            fatalError("\(LibFuzzer.target.name): \(error)")
        }
        return 0
    }

    enum LibFuzzer {
        /// The target of PARLEY_FUZZ_TARGET, read once.
        static let target: FuzzTarget = {
            let name = ProcessInfo.processInfo.environment["PARLEY_FUZZ_TARGET"] ?? ""
            guard let target = FuzzTarget.named(name) else {
                fatalError("PARLEY_FUZZ_TARGET=\(name) names no target (scripts/fuzz sets it; `--list` names them)")
            }
            return target
        }()
    }
#endif
