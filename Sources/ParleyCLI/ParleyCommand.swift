import ArgumentParser
import Foundation
import NIOConcurrencyHelpers
import Parley

@main
struct ParleyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "parley",
        abstract: "A terminal chat client for Parley, built on the Parley SDK.",
        discussion: """
            Options can also come from the environment: PARLEY_SERVER, PARLEY_APP_ID, PARLEY_PROFILE, \
            PARLEY_AUTH_KEY and PARLEY_API_KEY. Each profile keeps its own logged-in user, so two terminals with \
            two profiles can chat with each other, and remembers the server and App ID it logged in at, so later \
            commands on it need neither --server nor PARLEY_APP_ID.

            Exit codes: 0 ok, 1 other failure, 2 usage (an invalid argument too), \
            3 authentication (not logged in, bad key or token), 4 unknown app, user, conversation, message, file \
            or ban, 5 server unreachable or not answering (send: the message stays queued, not sent), 6 refused \
            (not allowed, invalid or deleted message, reaction limit, banned, file too large or invalid). A file \
            that cannot be read is a usage error (2).
            """,
        subcommands: [
            Login.self, Logout.self, WhoAmI.self, Profile.self, Conversations.self, Archive.self, Send.self,
            Download.self,
            Reply.self, Edit.self, DeleteMessage.self, React.self, Pin.self, Pins.self, ThreadCommand.self,
            Mentions.self, Search.self,
            FindUsers.self,
            Outbox.self,
            History.self, Chat.self, Listen.self, Group.self, Block.self, Unblock.self, Blocks.self,
            ReportCommand.self, Admin.self,
        ]
    )

    /// Runs the command. ArgumentParser exits 64 (`EX_USAGE`) on an invalid command line; parley exits 2 there, as
    /// its own usage errors do and as the README documents.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asynchronous = command as? any AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try command.run()
            }
        } catch {
            guard exitCode(for: error) == .validationFailure else { exit(withError: error) }
            FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
            exit(withError: ExitCode(usageExitCode))
        }
    }
}

/// The exit code of a usage error (an invalid command line or argument).
let usageExitCode: Int32 = 2

/// Options every command that talks to the server takes.
struct ClientOptions: ParsableArguments {
    @Option(
        help: """
            The server's URL (env PARLEY_SERVER; default: the one the profile logged in at, else \
            http://127.0.0.1:8080).
            """
    )
    var server: String?

    @Option(
        name: .customLong("app-id"),
        help: """
            The App ID the server printed on first start (env PARLEY_APP_ID; default: the one the profile logged \
            in with).
            """
    )
    var appId: String?

    @Option(help: "Keeps this profile's logged-in user apart from others (env PARLEY_PROFILE).")
    var profile: String = ProcessInfo.processInfo.environment["PARLEY_PROFILE"] ?? "default"

    @Flag(
        help: "Manual socket mode: connect only on demand (the reference SDK's autoEstablishSocketConnection(false)).")
    var manual = false

    /// What the profile remembers from its last login (its server and App ID).
    var record: ProfileRecord? { ProfileRecord.load(from: storageDirectory) }

    /// The server given (flag, then environment), else the profile's, else the default; in one spelling.
    var serverURL: URL {
        get throws {
            let given = server ?? ProcessInfo.processInfo.environment["PARLEY_SERVER"].flatMap { $0.isEmpty ? nil : $0 }
            let text = given ?? record?.server ?? "http://127.0.0.1:8080"
            guard let url = normalizedServerURL(text) else {
                throw CLIFailure.usage("--server must be an http:// or https:// URL, not \(text).")
            }
            return url
        }
    }

    var resolvedAppId: String {
        get throws {
            let given = appId ?? ProcessInfo.processInfo.environment["PARLEY_APP_ID"].flatMap { $0.isEmpty ? nil : $0 }
            guard let id = given ?? record?.appId else {
                throw CLIFailure.usage(
                    "Give the App ID with --app-id or PARLEY_APP_ID (parley-server prints it on first start).")
            }
            return id
        }
    }

    var storageDirectory: URL {
        let home =
            ProcessInfo.processInfo.environment["PARLEY_HOME"].map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".parley")
        return home.appendingPathComponent("profiles").appendingPathComponent(profile)
    }

    /// An initialized client; its saved user (if any) is restored.
    func makeClient() async throws -> ParleyClient {
        let settings = AppSettings.Builder()
            .serverURL(try serverURL)
            .storageDirectory(storageDirectory)
            .autoEstablishSocketConnection(!manual)
            // Each profile is a user of its own: its token stays in its folder (the Keychain keeps one per App ID).
            .credentialStore(FileCredentialStore(directory: storageDirectory.appendingPathComponent("credentials")))
            .build()
        return try await ParleyClient.initialize(appId: try resolvedAppId, settings: settings)
    }

    /// Remembers the server and App ID this profile logged in at (after a login).
    func rememberLogin() throws {
        ProfileRecord(server: try serverURL.absoluteString, appId: try resolvedAppId).save(in: storageDirectory)
    }

    /// A client with a logged-in user.
    func loggedInClient() async throws -> (ParleyClient, User) {
        let client = try await makeClient()
        guard let user = client.getLoggedInUser() else {
            await client.shutdown()
            throw try notLoggedIn()
        }
        return (client, user)
    }

    /// Why there is no user: nobody logged in on the profile, or at another server or app than this command's.
    func notLoggedIn() throws -> ParleyError {
        let url = try serverURL.absoluteString
        let app = try resolvedAppId
        if let record, record.server != url || record.appId != app {
            let other = record.server != url ? "at \(record.server)" : "with App ID \(record.appId)"
            let fix = record.server != url ? "--server \(record.server)" : "--app-id \(record.appId)"
            return ParleyError(
                .notLoggedIn,
                "Not logged in on profile \(profile) at \(url) (App ID \(app)): the profile logged in \(other). "
                    + "Give \(fix) (or leave it out), or run `parley login <uid> --profile \(profile)` here."
            )
        }
        return ParleyError(
            .notLoggedIn,
            "Not logged in on profile \(profile) at \(url): run `parley login <uid> --profile \(profile)` first."
        )
    }
}

/// A receiver given on the command line: a uid, or a conversation id with `--conversation`.
struct ReceiverOptions: ParsableArguments {
    @Argument(help: "The user to talk to (uid), or with --conversation a conversation id.")
    var to: String

    @Flag(name: .long, help: "TO is a conversation id (a group, for instance).")
    var conversation = false

    var receiver: Receiver { conversation ? .conversation(to) : .user(to) }
}

/// A failure the CLI reports with its own exit code.
enum CLIFailure: Error, CustomStringConvertible {
    case usage(String)

    var description: String {
        switch self {
        case .usage(let message): return message
        }
    }
}

extension AsyncParsableCommand {
    /// Runs `body`, printing failures plainly and exiting with the documented code.
    func reportingFailures(_ body: () async throws -> Void) async throws {
        try await withFailureReporting(body)
    }
}

/// Runs `body`, printing failures plainly and exiting with the documented code.
func withFailureReporting(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let failure as CLIFailure {
        printError(failure.description)
        throw ExitCode(usageExitCode)
    } catch let error as ParleyError {
        printError("\(error.message) [\(error.code)]")
        throw ExitCode(cliExitCode(for: error.code))
    }
}

func cliExitCode(for code: ErrorCode) -> Int32 {
    switch code {
    case .notLoggedIn, .authRequired, .authTokenInvalid, .authKeyInvalid, .apiKeyInvalid: return 3
    case .invalidAppID, .uidNotFound, .conversationNotFound, .messageNotFound, .tokenNotFound, .reportNotFound,
        .banNotFound, .notFound, .attachmentNotFound:
        return 4
    case .invalidArgument, .fileUnreadable: return 2
    case .serverUnreachable, .timeout: return 5
    case .forbidden, .notAParticipant, .messageEmpty, .messageTooLarge, .invalidUID, .uidAlreadyExists,
        .badRequest, .messageDeleted, .reactionLimit, .blocked, .blockLimit, .muted, .banned, .fileTooLarge,
        .fileInvalid, .lengthRequired, .attachmentInUse, .linkInvalid:
        return 6
    default: return 1
    }
}

func printError(_ message: String) {
    FileHandle.standardError.write(Data("parley: \(message)\n".utf8))
}

/// Writes a line to standard output at once (stdout may be a pipe), above the line being typed in `chat`.
func say(_ line: String) {
    Console.shared.write(line: line)
}

/// One line for a message: `[12:00:01] #12 alice: text (edited) [👍 2] (3 replies)`; a reply names its thread.
func describe(_ message: Message) -> String {
    let time = Date(timeIntervalSince1970: Double(message.sentAt) / 1000)
        .formatted(.dateTime.hour(.twoDigits(amPM: .omitted)).minute(.twoDigits).second(.twoDigits))
    var content = message.text
    for part in message.parts where part.type == .data {
        content += (content.isEmpty ? "" : " ") + "[\(part.name ?? "data")]"
    }
    for file in message.files { content += (content.isEmpty ? "" : " ") + describe(file) }
    if message.isDeleted {
        content =
            "(message deleted\(message.deletedBy.map { $0 == message.sender ? "" : " by \($0)" } ?? " by the app"))"
    } else if message.editedAt != nil {
        content += " (edited)"
    }
    if let reactions = message.reactions, !reactions.isEmpty { content += " " + describe(reactions) }
    if let replies = message.replyCount { content += " (\(replies) \(replies == 1 ? "reply" : "replies"))" }
    if message.silent == true { content += " (silent)" }
    if message.pin != nil { content += " (pinned)" }
    let thread = message.replyTo != nil ? "↳ " : ""
    // A system message is the app's: no sender.
    let sender = message.system == true ? "[the app]" : message.sender
    return "[\(time)] \(thread)#\(message.seq) \(sender): \(content)"
}

/// `[👍 2*, ❤️ 1]`: each key with its count, `*` where you are among them.
func describe(_ reactions: [ReactionSummary]) -> String {
    "[" + reactions.map { "\($0.key) \($0.count)\($0.reacted ? "*" : "")" }.joined(separator: ", ") + "]"
}

/// `[file report.pdf, application/pdf, 1.2 MB, f_...]`; an image with its size in pixels.
func describe(_ file: FileInfo) -> String {
    let pixels = file.width.flatMap { width in file.height.map { ", \(width)x\($0)" } } ?? ""
    return "[file \(file.name), \(file.contentType)\(pixels), \(humanSize(file.size)), \(file.id)]"
}

/// Bytes for people: `512 B`, `1.2 KB`, `3.4 MB`, `1.0 GB` (powers of 1000, as file managers show them).
func humanSize(_ bytes: Int64) -> String {
    guard bytes >= 1000 else { return "\(bytes) B" }
    var value = Double(bytes)
    for unit in ["KB", "MB", "GB", "TB"] {
        value /= 1000
        if value < 999.95 || unit == "TB" { return String(format: "%.1f", value) + " " + unit }
    }
    return "\(bytes) B"
}

/// A transfer's progress on one line of standard error, redrawn in place, when standard error is a terminal;
/// nothing otherwise (scripts read the outcome from standard output and the exit code).
final class ProgressLine: Sendable {
    private let label: String?
    private let shown = NIOLockedValueBox(false)

    init(label: String?) {
        self.label = isatty(STDERR_FILENO) == 1 ? label : nil
    }

    func show(_ progress: FileTransferProgress) {
        guard let label else { return }
        shown.withLockedValue { $0 = true }
        let line =
            "\r\(label): \(Int(progress.fraction * 100)) % "
            + "(\(humanSize(progress.completedBytes)) of \(humanSize(progress.totalBytes)))\u{1B}[K"
        FileHandle.standardError.write(Data(line.utf8))
    }

    func end() {
        if shown.withLockedValue({ $0 }) { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}
