import Foundation
import Parley
import ParleyServer
import ParleyTesting
import Testing

/// The `parley` and `parley-server` binaries as the README's quick start has a newcomer use them (issue 25): exit
/// codes, the profile's server, a stopped server, `listen`'s lines, `chat` from a file, a taken port.
@Suite(
    .enabled(if: CLIBinary.isAvailable, "CLI tests SKIPPED: they need the parley binary (swift build --build-tests)."),
    .timeLimit(.minutes(2)), .serialized
)
struct CLINewcomerTests {
    typealias Outcome = ProgramOutcome

    /// Runs `parley` with its profiles in `home` and `environment` (nil removes a variable): no `PARLEY_*` variable
    /// of the test process leaks in.
    static func parley(
        _ arguments: [String], home: TemporaryDirectory, environment: [String: String?] = [:], input: URL? = nil,
        timeout: Duration = .seconds(60), stopWhen: (@Sendable (String) -> Bool)? = nil
    ) async throws -> Outcome {
        var variables = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PARLEY_") }
        variables["PARLEY_HOME"] = home.path
        variables["NO_COLOR"] = nil
        for (name, value) in environment { variables[name] = value }
        return try await ProgramRun.run(
            CLIBinary.executable.path, arguments: arguments, environment: variables, input: input, timeout: timeout,
            stopWhen: stopWhen
        )
    }

    /// The variables a newcomer exports: the server, the App ID and the Auth Key.
    static func exports(_ server: URL, _ app: ProvisionedApp) -> [String: String?] {
        ["PARLEY_SERVER": server.absoluteString, "PARLEY_APP_ID": app.appId, "PARLEY_AUTH_KEY": app.authKey]
    }

    static func login(_ uids: [String], server: URL, app: ProvisionedApp, home: TemporaryDirectory) async throws {
        for uid in uids {
            let login = try await parley(
                ["login", uid, "--profile", uid], home: home, environment: exports(server, app))
            #expect(login.status == 0, "\(login.errors)")
        }
    }

    static func file(_ text: String, in folder: TemporaryDirectory, named name: String = "input.txt") throws -> URL {
        let url = folder.url.appendingPathComponent(name)
        try Data(text.utf8).write(to: url)
        return url
    }

    @Test func usageErrorsExitTwoAsTheREADMESays() async throws {
        let home = try TemporaryDirectory(prefix: "parley-cli-home")
        for arguments in [["frobnicate"], ["send"], ["send", "bob", "hi", "--wait", "soon"], ["whoami", "--nope"]] {
            let run = try await Self.parley(arguments, home: home)
            #expect(run.status == 2, "parley \(arguments.joined(separator: " ")): \(run.status) \(run.errors)")
            #expect(run.errors.contains("Usage:") || run.errors.contains("Error:"), "\(run.errors)")
        }
        let help = try await Self.parley(["--help"], home: home)
        #expect(help.status == 0 && help.output.contains("Exit codes: 0 ok"))
        // `--manual` is a flag: a value after it is an argument too many (before, `--manual` alone was refused).
        let manual = try await Self.parley(["whoami", "--manual", "true"], home: home)
        #expect(manual.status == 2 && manual.errors.contains("true"), "\(manual.errors)")
    }

    @Test func aProfileRemembersItsServerAndNamesItWhenAnotherIsGiven() async throws {
        let server = try await TestServer.start()
        let home = try TemporaryDirectory(prefix: "parley-cli-home")
        try await Self.login(["alice"], server: server.baseURL, app: server.app, home: home)
        let base = server.baseURL.absoluteString

        // No PARLEY_SERVER, no PARLEY_APP_ID: the profile's own (in manual mode: `--manual` is a flag).
        let plain = try await Self.parley(["whoami", "--profile", "alice", "--manual"], home: home)
        #expect(plain.status == 0 && plain.output.contains("alice"), "\(plain.errors)")
        // The same server in other spellings.
        for spelling in [base + "/", base.replacingOccurrences(of: "http://", with: "HTTP://") + "//"] {
            let run = try await Self.parley(["whoami", "--profile", "alice", "--server", spelling], home: home)
            #expect(run.status == 0, "\(spelling): \(run.errors)")
        }
        // Another host name: not logged in there, and the message says where the profile is.
        let other = "http://localhost:\(server.port)"
        let elsewhere = try await Self.parley(["whoami", "--profile", "alice", "--server", other], home: home)
        #expect(elsewhere.status == 3)
        #expect(elsewhere.errors.contains("at \(other)") && elsewhere.errors.contains("logged in at \(base)"))
        #expect(elsewhere.errors.contains("--server \(base)"), "\(elsewhere.errors)")
        // A profile never logged in says so, naming the server it tried.
        let fresh = try await Self.parley(
            ["whoami", "--profile", "nobody"], home: home, environment: Self.exports(server.baseURL, server.app))
        #expect(fresh.status == 3 && fresh.errors.contains("Not logged in on profile nobody at \(base)"))
        try await server.stop()
    }

    @Test func sendToAnUnreachableServerExitsFiveAndOutboxSendsItLater() async throws {
        let server = try await TestServer.start()
        let proxy = try await TCPProxy.start(targetPort: server.port)
        let url = URL(string: "http://127.0.0.1:\(proxy.port)")!
        let home = try TemporaryDirectory(prefix: "parley-cli-home")
        try await Self.login(["alice", "bob"], server: url, app: server.app, home: home)

        proxy.refuse(true)
        let start = ContinuousClock.now
        let queued = try await Self.parley(
            ["send", "bob", "while", "down", "--profile", "alice", "--wait", "40"], home: home)
        #expect(queued.status == 5, "\(queued.output) \(queued.errors)")
        #expect(
            queued.errors.contains("Queued as ")
                && queued.errors.contains("not sent: the server at \(url.absoluteString)"))
        // Told as soon as the server is found unreachable, not after --wait.
        #expect(ContinuousClock.now - start < .seconds(30))
        let id = try #require(queued.errors.split(separator: " ").drop { $0 != "as" }.dropFirst().first)
            .trimmingCharacters(in: .punctuationCharacters)

        // `outbox` stops waiting as soon as it finds the server unreachable (two more failed attempts); --wait only
        // bounds a server that takes messages slowly. Two seconds were once not enough for two retries on a machine
        // running the whole suite.
        let listed = try await Self.parley(["outbox", "--profile", "alice", "--wait", "20"], home: home)
        #expect(listed.status == 0)
        #expect(
            listed.output.contains("\(id)  pending") && listed.output.contains("cannot be reached"), "\(listed.output)")

        proxy.refuse(false)
        let sent = try await Self.parley(["outbox", "--profile", "alice", "--wait", "30"], home: home)
        #expect(sent.status == 0, "\(sent.errors)")
        #expect(
            sent.output.contains("sent \(id): #") && sent.output.contains("The outbox is empty."),
            "\(sent.output)")
        let history = try await Self.parley(["history", "alice", "--profile", "bob"], home: home)
        #expect(history.output.contains("alice: while down"))

        let direct = try await Self.parley(["send", "bob", "now", "up", "--profile", "alice"], home: home)
        #expect(direct.status == 0 && direct.output.contains("Sent #"), "\(direct.errors)")
        try await proxy.stop()
        try await server.stop()
    }

    @Test func listenSaysWhoDidWhatWithWhichRole() async throws {
        let server = try await TestServer.start()
        let home = try TemporaryDirectory(prefix: "parley-cli-home")
        try await Self.login(["alice", "bob", "carol"], server: server.baseURL, app: server.app, home: home)
        // `listen` runs until stopped: here until it has shown the role change (the last of alice's acts), at most 60 s.
        async let listening = Self.parley(
            ["listen", "--profile", "bob"], home: home, timeout: .seconds(60),
            stopWhen: { $0.contains("is now admin in") })
        let connected = await server.snapshot { $0.liveConnections >= 1 }
        #expect(connected.liveConnections >= 1)
        let created = try await Self.parley(["group", "create", "Friends", "bob", "--profile", "alice"], home: home)
        let group = created.output.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(group.hasPrefix("c_"), "\(created.errors)")
        for arguments in [["group", "add", group, "carol"], ["group", "role", group, "bob", "admin"]] {
            let run = try await Self.parley(arguments + ["--profile", "alice"], home: home)
            #expect(run.status == 0, "\(run.errors)")
        }
        let output = (try await listening).output
        #expect(output.contains("* caught up ("), "\(output)")
        #expect(output.contains("* alice added carol in \(group) as member"), "\(output)")
        #expect(output.contains("* bob is now admin in \(group) by alice"), "\(output)")
        #expect(!output.contains(" by -") && !output.contains("in -"), "\(output)")
        try await server.stop()
    }

    @Test func chatFromAFileIsPlainAndTheLineEditorEditsKeys() async throws {
        let server = try await TestServer.start()
        let home = try TemporaryDirectory(prefix: "parley-cli-home")
        try await Self.login(["alice", "bob"], server: server.baseURL, app: server.app, home: home)
        let folder = try TemporaryDirectory(prefix: "parley-cli-input")

        // Not a terminal: lines as they come, no prompt, no escape codes (colour or editing).
        let plain = try await Self.parley(
            ["chat", "alice", "--profile", "bob"], home: home, input: try Self.file("plain one\n/quit\n", in: folder)
        )
        #expect(plain.status == 0, "\(plain.errors)")
        #expect(plain.output.contains("(sent #") && !plain.output.contains("\u{1B}"), "\(plain.output)")

        // The line editor (forced on a file): "wrld", Left ×3, "o", Ctrl-A, "hello ", Backspace after a typo, Enter.
        let keys =
            "wrld\u{1B}[D\u{1B}[D\u{1B}[Do\u{01}hellx\u{7F}o \r" + "gone\u{15}kept\u{1B}[H\u{1B}[F!\r"
            + "\u{03}ignored\r"
        let edited = try await Self.parley(
            ["chat", "alice", "--profile", "bob"], home: home, environment: ["PARLEY_LINE_EDITOR": "1"],
            input: try Self.file(keys, in: folder, named: "keys.txt")
        )
        #expect(edited.status == 0, "\(edited.errors)")
        // The prompt is redrawn below each line printed.
        #expect(edited.output.contains("\r\u{1B}[2Kbob> "), "\(edited.output.debugDescription)")
        let history = try await Self.parley(["history", "bob", "--profile", "alice"], home: home)
        #expect(
            history.output.contains("bob: hello world\n") && history.output.contains("bob: kept!\n"),
            "\(history.output)")
        #expect(!history.output.contains("ignored") && !history.output.contains("gone"))
        try await server.stop()
    }

    @Test func aTakenPortStopsTheServerWithOneLineNamingIt() async throws {
        let server = try await TestServer.start()
        let data = try TemporaryDirectory(prefix: "parley-busy-port")
        let second = try await ProgramRun.run(
            ServerProcess.executable.path, arguments: ["--port", "\(server.port)", "--data-dir", data.path],
            environment: ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PARLEY_") }
        )
        #expect(second.status == 1)
        let line =
            "parley-server: port \(server.port) on 127.0.0.1 is in use: stop what uses it or choose another with --port"
        #expect(second.errors.contains(line), "\(second.errors)")
        #expect(!second.errors.contains("Shutting down") && !second.errors.contains("errno"), "\(second.errors)")
        // Nothing was created: the check comes before the database.
        #expect(!FileManager.default.fileExists(atPath: data.path + "/parley.sqlite"))

        let help = try await ProgramRun.run(ServerProcess.executable.path, arguments: ["--help"], environment: [:])
        #expect(help.status == 0)
        for option in [
            "--port", "--data-dir", "--database-url", "--metrics-port", "--webhook-concurrency", "--s3-endpoint",
        ] {
            #expect(help.output.contains(option), "parley-server --help lacks \(option)")
        }
        try await server.stop()
    }
}
