import ArgumentParser
import Configuration
import Foundation
import NIOConcurrencyHelpers
import SystemPackage
import Yams

/// Where the options of `parley-server` come from, first match wins: the command line, the environment (`PARLEY_`
/// and the flag's name in capitals with underscores: `--max-request-body-bytes` is `PARLEY_MAX_REQUEST_BODY_BYTES`),
/// the config file (`--config FILE` or `PARLEY_CONFIG`: JSON, or YAML for `.yaml`/`.yml`, whose keys are the flags'
/// names: `max-request-body-bytes: 2097152`), then the default. README.md has the table of every option.
///
/// A key in the file that no option reads is refused (``checkEveryFileKeyIsKnown()``): a typo does not silently leave
/// a default in place. A value of the wrong type, in the environment or the file, stops the start with its name.
package struct SettingSources: Sendable {
    private let reader: ConfigReader
    private let file: String?
    private let fileKeys: [String]
    private let used = NIOLockedValueBox(Set<String>())

    package static let environmentPrefix = "parley"

    private init(reader: ConfigReader, file: String?, fileKeys: [String]) {
        self.reader = reader
        self.file = file
        self.fileKeys = fileKeys
    }

    /// The environment, and the config file when one is named.
    package static func load(configFile: String?) async throws -> SettingSources {
        let environment = KeyMappingProvider(upstream: EnvironmentVariablesProvider()) {
            $0.prepending(ConfigKey([environmentPrefix]))
        }
        guard let path = configFile ?? ProcessInfo.processInfo.environment["PARLEY_CONFIG"], !path.isEmpty else {
            return SettingSources(reader: ConfigReader(providers: [environment]), file: nil, fileKeys: [])
        }
        let isYAML = path.hasSuffix(".yaml") || path.hasSuffix(".yml")
        let keys: [String]
        let fileProvider: any ConfigProvider
        do {
            keys = try topLevelKeys(of: path, yaml: isYAML)
            fileProvider =
                isYAML
                ? try await FileProvider<YAMLSnapshot>(filePath: FilePath(path))
                : try await FileProvider<JSONSnapshot>(filePath: FilePath(path))
        } catch let error as ValidationError {
            throw error
        } catch {
            throw ValidationError("The config file \(path) cannot be read: \(oneLine("\(error)"))")
        }
        return SettingSources(reader: ConfigReader(providers: [environment, fileProvider]), file: path, fileKeys: keys)
    }

    /// A parser's error on one line, control characters escaped: YAML's errors quote the line they stopped at, with
    /// whatever bytes the file had there (found by the config-file fuzz target, docs/RELIABILITY.md).
    static func oneLine(_ text: String) -> String {
        var result = ""
        for scalar in text.unicodeScalars {
            if scalar == "\n" {
                result += " | "
            } else if scalar.properties.generalCategory == .control {
                result += scalar.escaped(asASCII: true)
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// The keys at the top of the file: every option is one key there (no nesting).
    private static func topLevelKeys(of path: String, yaml: Bool) throws -> [String] {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let object: Any? =
            yaml
            ? try Yams.load(yaml: String(decoding: data, as: UTF8.self))
            : try JSONSerialization.jsonObject(with: data)
        guard let dictionary = object as? [String: Any] else {
            throw ValidationError("The config file \(path) must hold one object of options (\"port\": 8080, ...).")
        }
        return dictionary.keys.sorted()
    }

    /// Refuses a config file with keys that no option read.
    package func checkEveryFileKeyIsKnown() throws {
        guard let file else { return }
        let known = used.withLockedValue { $0 }
        let unknown = fileKeys.filter { !known.contains($0) }
        guard unknown.isEmpty else {
            throw ValidationError(
                "The config file \(file) has unknown keys: \(Self.oneLine(unknown.joined(separator: ", "))) (the keys are the long option names; see `parley-server serve --help`)."
            )
        }
    }

    private func origin(_ name: String) -> String {
        "PARLEY_\(name.uppercased().replacingOccurrences(of: "-", with: "_"))"
            + (file.map { " or `\(name)` in \($0)" } ?? "")
    }

    private func fetch<T>(_ name: String, _ read: (ConfigKey) async throws -> T?) async throws -> T? {
        do {
            return try await read(ConfigKey([name]))
        } catch {
            throw ValidationError("\(origin(name)): \(Self.oneLine("\(error)"))")
        }
    }

    /// Notes that an option exists (its key may be in the file) whether or not its flag was given.
    private func known(_ name: String) { used.withLockedValue { _ = $0.insert(name) } }

    package func string(_ flag: String?, _ name: String, secret: Bool = false) async throws -> String? {
        known(name)
        if let flag { return flag }
        return try await fetch(name) { try await reader.fetchString(forKey: $0, isSecret: secret) }
    }

    package func string(_ flag: String?, _ name: String, default value: String) async throws -> String {
        try await string(flag, name) ?? value
    }

    package func int(_ flag: Int?, _ name: String, default value: Int) async throws -> Int {
        known(name)
        var result = value
        if let flag {
            result = flag
        } else if let read = try await fetch(name, { try await reader.fetchInt(forKey: $0) }) {
            result = read
        }
        // A number of seconds becomes nanoseconds somewhere: past this it would overflow.
        guard !name.hasSuffix("-seconds") || (0...1_000_000_000).contains(result) else {
            throw ValidationError("--\(name) must be between 0 and 1000000000.")
        }
        return result
    }

    package func double(_ flag: Double?, _ name: String, default value: Double) async throws -> Double {
        known(name)
        let result: Double
        if let flag {
            result = flag
        } else if let double = try? await reader.fetchDouble(forKey: ConfigKey([name])) {
            result = double
        } else {
            // An integer in a file (`30`) is a number of seconds too.
            result = try await fetch(name) { try await reader.fetchInt(forKey: $0) }.map(Double.init) ?? value
        }
        // Seconds and rates: a number past this would overflow when it becomes milliseconds.
        guard result.isFinite, abs(result) <= 1e9 else {
            throw ValidationError("--\(name) must be a number of at most 1000000000.")
        }
        return result
    }

    /// A list: repeated flags, a comma-separated variable, or an array in the file.
    package func strings(_ flag: [String]?, _ name: String) async throws -> [String] {
        known(name)
        if let flag { return flag }
        return try await fetch(name) { try await reader.fetchStringArray(forKey: $0) } ?? []
    }

    package func bool(_ flag: Bool?, _ name: String, default value: Bool) async throws -> Bool {
        known(name)
        if let flag { return flag }
        return try await fetch(name) { try await reader.fetchBool(forKey: $0) } ?? value
    }
}
