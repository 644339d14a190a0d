import ArgumentParser
import Foundation
import NIOConcurrencyHelpers
import ParleyServerSettings

extension FuzzTarget {
    /// The server's config file loader (`SettingSources`: JSON, or YAML for `.yaml`, through Yams, JSONSerialization
    /// and swift-configuration), fed any file: it must load it and read options of every type, or refuse it with a
    /// `ValidationError` that names the file or the option (one line an operator can act on), never another error.
    static let configFile = FuzzTarget(
        name: "config-file",
        summary: "SettingSources on any JSON or YAML file: options read, or a ValidationError naming what is wrong"
    ) { bytes throws(FuzzFinding) in
        let yaml = (bytes.first ?? 0) & 1 == 1
        let path = ConfigFileCase.path(yaml: yaml)
        guard FileManager.default.createFile(atPath: path, contents: Data(bytes.dropFirst())) else {
            throw FuzzFinding("could not write \(path)")
        }
        defer { unlink(path) }
        let outcome = ConfigFileCase.blocking { try await ConfigFileCase.load(path) }
        switch outcome {
        case .success:
            break
        case .failure(let error as ValidationError):
            let message = error.description
            guard message.contains(path) || message.contains("PARLEY_") || message.contains("--"),
                !message.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            else {
                throw FuzzFinding("a refusal that names neither the file nor an option: \(message.debugDescription)")
            }
        case .failure(let error):
            throw FuzzFinding("\(type(of: error)) instead of a ValidationError: \(error)")
        }
    }
}

enum ConfigFileCase {
    /// One file per process (libFuzzer runs one input at a time), in the temporary folder.
    static func path(yaml: Bool) -> String {
        URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent(
            "parley-fuzz-config-\(getpid())." + (yaml ? "yaml" : "json")
        ).path
    }

    /// Loads the file and reads options of each type, as `parley-server` reads them, then refuses unknown keys.
    static func load(_ path: String) async throws {
        let settings = try await SettingSources.load(configFile: path)
        _ = try await settings.int(nil, "port", default: 8080)
        _ = try await settings.int(nil, "max-file-bytes", default: 1 << 20)
        _ = try await settings.string(nil, "hostname", default: "127.0.0.1")
        _ = try await settings.string(nil, "database-url", secret: true)
        _ = try await settings.double(nil, "webhook-timeout-seconds", default: 10)
        _ = try await settings.bool(nil, "console", default: true)
        _ = try await settings.strings(nil, "trusted-proxy")
        try settings.checkEveryFileKeyIsKnown()
    }

    /// Runs async work to its end from libFuzzer's synchronous callback.
    static func blocking(_ work: @escaping @Sendable () async throws -> Void) -> Result<Void, any Error> {
        let result = NIOLockedValueBox<Result<Void, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let outcome: Result<Void, any Error>
            do {
                try await work()
                outcome = .success(())
            } catch {
                outcome = .failure(error)
            }
            result.withLockedValue { $0 = outcome }
            done.signal()
        }
        done.wait()
        return result.withLockedValue { $0 }!
    }
}
