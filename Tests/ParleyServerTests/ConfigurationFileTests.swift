import Foundation
import ParleyServer
import ParleyTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `parley-server` options from the command line, the environment and the config file (README, "Configuration"),
/// through the real executable.
@Suite(.enabled(if: ServerProcess.isAvailable, "needs the parley-server binary (scripts/test builds it)"), .serialized)
struct ConfigurationFileTests {
    /// A login body of `size` bytes: over the body limit it is 413 before anything reads it, under it 401 (the key).
    static func login(_ node: ServerProcess, size: Int) async throws -> Int {
        let padding = String(repeating: "x", count: max(0, size - 80))
        let body = #"{"appId":"\#(node.app.appId)","uid":"\#(padding)","authKey":"ak_x"}"#
        var request = URLRequest(url: node.baseURL.appendingPathComponent("v1/login"))
        request.httpMethod = "POST"
        request.httpBody = Data(body.utf8)
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        let (_, response) = try await URLSession.shared.data(for: request)
        return (response as? HTTPURLResponse)?.statusCode ?? 0
    }

    static func provisioned() async throws -> (TemporaryDirectory, ProvisionedApp) {
        let directory = try TemporaryDirectory(prefix: "parley-config")
        let store = try openSQLiteStore(in: directory.path + "/data")
        let app = try await AppProvisioning.createApp(in: store, name: "Config")
        try await store.close()
        return (directory, app)
    }

    static func write(_ text: String, to path: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }

    /// The file sets what the command line and the environment do not; the environment wins over the file, the
    /// command line over both.
    @Test(arguments: ["yaml", "json"]) func theFileTheEnvironmentAndTheCommandLineInThatOrder(format: String)
        async throws
    {
        let (directory, app) = try await Self.provisioned()
        let file = directory.path + "/parley.\(format)"
        let token = "a-metrics-token-from-the-file-42"
        if format == "yaml" {
            try Self.write(
                "# Parley\ndata-dir: \(directory.path)/data\nmax-request-body-bytes: 4096\nlog-format: json\nmetrics-token: \(token)\n",
                to: file
            )
        } else {
            try Self.write(
                #"{"data-dir": "\#(directory.path)/data", "max-request-body-bytes": 4096, "log-format": "json", "metrics-token": "\#(token)"}"#,
                to: file
            )
        }
        let fromFile = try await ServerProcess.start(label: "file", app: app, arguments: ["--config", file])
        #expect(try await Self.login(fromFile, size: 5000) == 413)
        #expect(try await Self.login(fromFile, size: 3000) == 401)
        let metrics = try await fromFile.request("GET", "/metrics", headers: ["Authorization": "Bearer \(token)"])
        #expect(metrics.status == 200)
        #expect(await fromFile.terminate(timeout: .seconds(20)) != nil)
        // JSON logs from the file, and the token it holds is not in them.
        let lines = fromFile.log.split(separator: "\n").filter { $0.hasPrefix("{") }
        #expect(lines.count >= 3)
        #expect(lines.allSatisfy { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) != nil })
        #expect(!fromFile.log.contains(token))
        // The file's two formats read alike; the order of the sources is checked once (each check starts a process).
        guard format == "yaml" else { return }

        let fromEnvironment = try await ServerProcess.start(
            label: "env", app: app, arguments: ["--config", file],
            environment: ["PARLEY_MAX_REQUEST_BODY_BYTES": "8192"]
        )
        #expect(try await Self.login(fromEnvironment, size: 5000) == 401)
        #expect(try await Self.login(fromEnvironment, size: 9000) == 413)
        #expect(await fromEnvironment.terminate(timeout: .seconds(20)) != nil)

        let fromFlag = try await ServerProcess.start(
            label: "flag", app: app, arguments: ["--config", file, "--max-request-body-bytes", "2048"],
            environment: ["PARLEY_MAX_REQUEST_BODY_BYTES": "8192"]
        )
        #expect(try await Self.login(fromFlag, size: 3000) == 413)
        #expect(await fromFlag.terminate(timeout: .seconds(20)) != nil)
    }

    /// A typo in the file, a value of the wrong type, or a file that is not an object of options stops the start
    /// with one line that names it.
    @Test func mistakesStopTheStartWithTheirName() async throws {
        let (directory, app) = try await Self.provisioned()
        let cases: [(file: String, environment: [String: String], expected: String)] = [
            (
                "data-dir: \(directory.path)/data\nmax-request-body-byte: 4096\n", [:],
                "unknown keys: max-request-body-byte"
            ),
            ("data-dir: \(directory.path)/data\nheartbeat-seconds: soon\n", [:], "heartbeat-seconds"),
            (
                "data-dir: \(directory.path)/data\n", ["PARLEY_IDLE_TIMEOUT_SECONDS": "forever"],
                "PARLEY_IDLE_TIMEOUT_SECONDS"
            ),
            ("- port\n- 8080\n", [:], "must hold one object of options"),
            ("data-dir: \(directory.path)/data\nlog-format: xml\n", [:], "Unknown --log-format xml"),
            // Numbers that would overflow once they are milliseconds or nanoseconds.
            ("data-dir: \(directory.path)/data\nheartbeat-seconds: 99999999999\n", [:], "--heartbeat-seconds must be"),
            (
                "data-dir: \(directory.path)/data\n", ["PARLEY_IDLE_TIMEOUT_SECONDS": "1e300"],
                "--idle-timeout-seconds must be"
            ),
            // Traces: an endpoint that is not http(s), an encoding the exporter does not have, a ratio out of 0...1.
            ("data-dir: \(directory.path)/data\ntrace-endpoint: ftp://127.0.0.1/x\n", [:], "--trace-endpoint must be"),
            (
                "data-dir: \(directory.path)/data\ntrace-endpoint: http://127.0.0.1:4318/v1/traces\n",
                ["PARLEY_TRACE_PROTOCOL": "grpc"], "Unknown --trace-protocol grpc"
            ),
            (
                "data-dir: \(directory.path)/data\ntrace-endpoint: http://127.0.0.1:4318/v1/traces\n"
                    + "trace-sample-ratio: 1.5\n", [:], "--trace-sample-ratio must be"
            ),
        ]
        for (index, entry) in cases.enumerated() {
            let file = directory.path + "/bad\(index).yaml"
            try Self.write(entry.file, to: file)
            do {
                let node = try await ServerProcess.start(
                    label: "bad\(index)", app: app, arguments: ["--config", file], timeout: .seconds(60),
                    environment: entry.environment
                )
                node.kill()
                Issue.record("case \(index) started")
            } catch {
                #expect("\(error)".contains(entry.expected), "case \(index): \(error)")
            }
        }
        // A file that does not exist.
        do {
            _ = try await ServerProcess.start(
                label: "missing", app: app, arguments: ["--config", directory.path + "/nowhere.yaml"]
            )
            Issue.record("started without its config file")
        } catch {
            #expect("\(error)".contains("nowhere.yaml cannot be read"))
        }
    }

    /// `--trace-endpoint` from the environment: the real executable sends its spans to a collector in OTLP's
    /// protobuf encoding (the default), the last ones when it is stopped.
    @Test func tracesGoToTheCollectorTheEnvironmentNames() async throws {
        let (directory, app) = try await Self.provisioned()
        let collector = try await WebhookReceiver.start()
        collector.answerEveryRequest(with: .json(200, "{}"))
        let node = try await ServerProcess.start(
            label: "traces", app: app, arguments: ["--data-dir", directory.path + "/data"],
            environment: ["PARLEY_TRACE_ENDPOINT": collector.url("/v1/traces")]
        )
        #expect(try await Self.login(node, size: 200) == 401)
        #expect(await node.terminate(timeout: .seconds(20)) != nil)
        let exports = collector.requests
        #expect(!exports.isEmpty && exports.allSatisfy { $0.path == "/v1/traces" })
        #expect(exports.allSatisfy { $0.header("Content-Type") == "application/x-protobuf" })
        // Protobuf keeps strings as they are: the span's name and the service's are in the bytes.
        let bytes = exports.flatMap(\.body)
        for text in ["POST /v1/login", "parley-server", "http.response.status_code"] {
            #expect(bytes.firstRange(of: Array(text.utf8)) != nil, "not exported: \(text)")
        }
        try await collector.stop()
    }
}
