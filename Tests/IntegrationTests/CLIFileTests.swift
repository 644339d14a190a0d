import Foundation
import Parley
import ParleyTesting
import Testing

/// The `parley` binary next to the running test bundle (`swift build --build-tests` builds it).
enum CLIBinary {
    static var executable: URL { ServerProcess.executable.deletingLastPathComponent().appendingPathComponent("parley") }
    static var isAvailable: Bool { FileManager.default.isExecutableFile(atPath: executable.path) }
}

/// The `parley` binary sends a file and downloads it (README, "CLI"): the built executable against a live server.
@Suite(
    .enabled(if: CLIBinary.isAvailable, "CLI tests SKIPPED: they need the parley binary (swift build --build-tests)."),
    .timeLimit(.minutes(2))
)
struct CLIFileTests {

    struct Outcome {
        var status: Int32
        var output: String
        var errors: String
    }

    /// Runs `parley` with `arguments` against `server`, with its profiles in `home`; kills it after 60 s.
    static func parley(_ arguments: [String], input: URL? = nil, server: TestServer, home: TemporaryDirectory)
        async throws -> Outcome
    {
        var environment = ProcessInfo.processInfo.environment
        environment["PARLEY_HOME"] = home.path
        environment["PARLEY_SERVER"] = server.baseURL.absoluteString
        environment["PARLEY_APP_ID"] = server.app.appId
        environment["PARLEY_AUTH_KEY"] = server.app.authKey
        let outcome = try await ProgramRun.run(
            CLIBinary.executable.path, arguments: arguments, environment: environment, input: input
        )
        return Outcome(status: outcome.status, output: outcome.output, errors: outcome.errors)
    }

    @Test func sendAFileThenDownloadItWithTheSameBytes() async throws {
        let server = try await TestServer.start()
        let home = try TemporaryDirectory(prefix: "parley-cli-home")
        for uid in ["alice", "bob"] {
            let login = try await Self.parley(["login", uid, "--profile", uid], server: server, home: home)
            #expect(login.status == 0, "\(login.errors)")
        }
        let folder = try TemporaryDirectory(prefix: "parley-cli-files")
        let bytes = (0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let source = folder.url.appendingPathComponent("data.bin")
        try Data(bytes).write(to: source)

        let sent = try await Self.parley(
            ["send", "bob", "--file", source.path, "--text", "the data", "--profile", "alice"], server: server,
            home: home
        )
        #expect(sent.status == 0, "\(sent.errors)")
        // "Sent #1 to c_...", then "  [file data.bin, application/octet-stream, 20.0 KB, f_...]".
        let words = sent.output.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "]" || $0 == "." })
        let conversationId = try #require(words.first { $0.hasPrefix("c_") }.map(String.init))
        let fileId = try #require(words.first { $0.hasPrefix("f_") }.map(String.init))
        #expect(sent.output.contains("[file data.bin, application/octet-stream, 20.0 KB, \(fileId)]"))

        let history = try await Self.parley(["history", "alice", "--profile", "bob"], server: server, home: home)
        #expect(
            history.output.contains("alice: the data [file data.bin, application/octet-stream, 20.0 KB, \(fileId)]"))

        let downloads = try TemporaryDirectory(prefix: "parley-cli-downloads")
        let download = try await Self.parley(
            ["download", conversationId, fileId, "--output", downloads.path, "--profile", "bob"], server: server,
            home: home
        )
        #expect(download.status == 0, "\(download.errors)")
        #expect(try [UInt8](Data(contentsOf: downloads.url.appendingPathComponent("data.bin"))) == bytes)

        // An existing file is not replaced without --force; a missing file to send is a usage error.
        let again = try await Self.parley(
            ["download", conversationId, fileId, "--output", downloads.path, "--profile", "bob"], server: server,
            home: home
        )
        #expect(again.status == 2 && again.errors.contains("--force"))
        let missing = try await Self.parley(
            ["send", "bob", "--file", folder.path + "/none.bin", "--profile", "alice"], server: server, home: home
        )
        #expect(missing.status == 2 && missing.errors.contains("ERR_FILE_UNREADABLE"))

        // In `chat`: /file sends one, /download saves one, and the messages show their files.
        let script = folder.url.appendingPathComponent("chat.txt")
        let copy = downloads.url.appendingPathComponent("copy.bin")
        try "/file \(source.path) back to you\n/download \(fileId) \(copy.path)\n/quit\n".write(
            to: script, atomically: true, encoding: .utf8
        )
        let chat = try await Self.parley(
            ["chat", "alice", "--profile", "bob"], input: script, server: server, home: home)
        #expect(chat.status == 0, "\(chat.errors)")
        #expect(chat.output.contains("alice: the data [file data.bin, application/octet-stream, 20.0 KB, \(fileId)]"))
        #expect(chat.output.contains("(sent #") && chat.output.contains("* saved data.bin to \(copy.path)"))
        #expect(try [UInt8](Data(contentsOf: copy)) == bytes)
        let after = try await Self.parley(["history", "bob", "--profile", "alice"], server: server, home: home)
        #expect(after.output.contains("bob: back to you [file data.bin, application/octet-stream, 20.0 KB, f_"))
        try await server.stop()
    }

    /// `parley admin export`: export.json with the user's profile, memberships and messages (not others'), and each
    /// file of their messages saved and equal to what was sent.
    @Test func anExportHoldsTheUsersDataAndTheirFiles() async throws {
        let server = try await TestServer.start()
        let home = try TemporaryDirectory(prefix: "parley-cli-home")
        for uid in ["alice", "bob"] {
            #expect(try await Self.parley(["login", uid, "--profile", uid], server: server, home: home).status == 0)
        }
        let folder = try TemporaryDirectory(prefix: "parley-cli-files")
        let bytes = (0..<5_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let source = folder.url.appendingPathComponent("notes.txt")
        try Data(bytes).write(to: source)
        for arguments in [
            ["send", "bob", "hello bob", "--profile", "alice"], ["send", "alice", "hi alice", "--profile", "bob"],
            ["send", "bob", "--file", source.path, "--text", "my notes", "--profile", "alice"],
        ] {
            let sent = try await Self.parley(arguments, server: server, home: home)
            #expect(sent.status == 0, "\(sent.errors)")
        }
        let output = folder.url.appendingPathComponent("alice-export")
        var environment = ["export", "alice", "--output", output.path, "--api-key", server.app.restAPIKey]
        let exported = try await Self.parley(["admin"] + environment, server: server, home: home)
        #expect(exported.status == 0, "\(exported.errors)")
        #expect(exported.output.contains("Exported alice: 1 conversations, 2 messages, 1 files"), "\(exported.output)")
        let document =
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: output.appendingPathComponent("export.json"))) as? [String: Any]
        let messages = try #require(document?["messages"] as? [[String: Any]])
        #expect(messages.map { $0["sender"] as? String } == ["alice", "alice"])
        #expect((document?["user"] as? [String: Any])?["uid"] as? String == "alice")
        #expect((document?["memberships"] as? [Any])?.count == 1)
        let files = try #require(document?["files"] as? [[String: Any]])
        let path = try #require(files.first?["path"] as? String)
        #expect(try [UInt8](Data(contentsOf: output.appendingPathComponent(path))) == bytes)
        // A folder that is not empty is refused; an unknown user is an error.
        let again = try await Self.parley(["admin"] + environment, server: server, home: home)
        #expect(again.status == 2 && again.errors.contains("not an empty folder"), "\(again.errors)")
        environment = [
            "export", "nobody", "--output", folder.url.appendingPathComponent("x").path, "--api-key",
            server.app.restAPIKey,
        ]
        let unknown = try await Self.parley(["admin"] + environment, server: server, home: home)
        #expect(unknown.status != 0 && unknown.errors.contains("ERR_UID_NOT_FOUND"), "\(unknown.errors)")
        try await server.stop()
    }

    /// `parley send --silent`: the message arrives marked silent and raises nobody's unread count.
    @Test func aSilentMessageFromTheCLIIsMarkedAndCountsForNobody() async throws {
        let server = try await TestServer.start()
        let home = try TemporaryDirectory(prefix: "parley-cli-home")
        for uid in ["alice", "bob"] {
            #expect(try await Self.parley(["login", uid, "--profile", uid], server: server, home: home).status == 0)
        }
        let sent = try await Self.parley(
            ["send", "bob", "deploy done", "--silent", "--profile", "alice"], server: server, home: home)
        #expect(sent.status == 0, "\(sent.errors)")
        let history = try await Self.parley(["history", "alice", "--profile", "bob"], server: server, home: home)
        #expect(history.output.contains("alice: deploy done (silent)"), "\(history.output)")
        let bob = try await server.login("bob")
        let unread = try await server.request("GET", "/v1/me/unread", token: bob).decode(UnreadSummary.self)
        #expect(unread.total == 0)
        let refused = try await Self.parley(
            ["send", "bob", "--file", "/dev/null", "--silent", "--profile", "alice"], server: server, home: home)
        #expect(refused.status == 2 && refused.errors.contains("--silent"), "\(refused.errors)")
        try await server.stop()
    }
}
