import ArgumentParser
import Foundation
import Parley

// Block and report from the command line; the app's moderators list and resolve reports with `parley admin`.

struct Block: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Block a user: neither of you can write to the other directly; their typing, presence and group messages are hidden."
    )
    @OptionGroup var options: ClientOptions
    @Argument(help: "The user to block.") var uid: String

    func run() async throws {
        try await reportingFailures {
            let (client, _) = try await options.loggedInClient()
            try await client.blockUser(uid)
            say("Blocked \(uid).")
            await client.shutdown()
        }
    }
}

struct Unblock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Lift a block.")
    @OptionGroup var options: ClientOptions
    @Argument(help: "The user to unblock.") var uid: String

    func run() async throws {
        try await reportingFailures {
            let (client, _) = try await options.loggedInClient()
            try await client.unblockUser(uid)
            say("Unblocked \(uid).")
            await client.shutdown()
        }
    }
}

struct Blocks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The users you blocked.")
    @OptionGroup var options: ClientOptions

    func run() async throws {
        try await reportingFailures {
            let (client, _) = try await options.loggedInClient()
            let blocks = try await client.fetchBlockedUsers()
            if blocks.isEmpty { say("You blocked nobody.") }
            for block in blocks {
                say("\(block.uid) (since \(Date(timeIntervalSince1970: Double(block.blockedAt) / 1000).formatted()))")
            }
            await client.shutdown()
        }
    }
}

extension ReportReason: ExpressibleByArgument {}
extension ReportState: ExpressibleByArgument {}
extension UserDirectoryVisibility: ExpressibleByArgument {}
extension DeletedUserMessages: ExpressibleByArgument {}
extension ConversationType: ExpressibleByArgument {}

struct ReportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report", abstract: "Report a message or a user to the app's moderators.",
        subcommands: [MessageReport.self, UserReport.self]
    )

    struct MessageReport: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "message", abstract: "Report a message.")
        @OptionGroup var target: MessageTarget
        @Option(help: "Why: \(ReportReason.allCases.map(\.rawValue).joined(separator: ", ")).") var reason: ReportReason
        @Option(help: "What you add (at most 1 KiB).") var details: String?

        func run() async throws {
            try await reportingFailures {
                let (client, _, conversationId, messageId) = try await target.resolve()
                let report = try await client.reportMessage(
                    messageId, in: conversationId, reason: reason, details: details
                )
                say("Reported (\(report.id), \(report.state.rawValue)).")
                await client.shutdown()
            }
        }
    }

    struct UserReport: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "user", abstract: "Report a user.")
        @OptionGroup var options: ClientOptions
        @Argument(help: "The user.") var uid: String
        @Option(help: "Why: \(ReportReason.allCases.map(\.rawValue).joined(separator: ", ")).") var reason: ReportReason
        @Option(help: "What you add (at most 1 KiB).") var details: String?

        func run() async throws {
            try await reportingFailures {
                let (client, _) = try await options.loggedInClient()
                let report = try await client.reportUser(uid, reason: reason, details: details)
                say("Reported (\(report.id), \(report.state.rawValue)).")
                await client.shutdown()
            }
        }
    }
}

extension Admin {
    struct Reports: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the app's reports, oldest first.")
        @OptionGroup var key: KeyOptions
        @Option(help: "Only reports in this state (open, resolved).") var state: ReportState?
        @Option(help: "Page size.") var limit: Int = 50
        @Option(help: "The cursor a previous page printed.") var cursor: String?

        func run() async throws {
            try await reportingFailures {
                let page = try await key.admin().reports(state: state, limit: limit, cursor: cursor)
                if page.reports.isEmpty { say("No reports.") }
                for report in page.reports {
                    var line = "\(report.id) [\(report.state.rawValue)] \(report.reporter) reported \(report.uid)"
                    line += " for \(report.reason.rawValue)"
                    if let message = report.message { line += ": \(describe(message))" }
                    if let conversationId = report.conversationId, let messageId = report.messageId {
                        line += " [\(conversationId) \(messageId)]"
                    }
                    if let details = report.details { line += " (\(details))" }
                    say(line)
                }
                if let next = page.nextCursor { say("More: --cursor \(next)") }
            }
        }
    }

    struct DeleteMessage: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "delete-message", abstract: "Delete any message of the app (moderation)."
        )
        @OptionGroup var key: KeyOptions
        @Argument(help: "The conversation's id.") var conversationId: String
        @Argument(help: "The message's id (m_...), as a report names it.") var messageId: String

        func run() async throws {
            try await reportingFailures {
                let message = try await key.admin().deleteMessage(messageId, in: conversationId)
                say(describe(message))
            }
        }
    }

    struct ResolveReport: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Resolve a report (or reopen it with --reopen).")
        @OptionGroup var key: KeyOptions
        @Argument(help: "The report's id.") var id: String
        @Option(help: "What was done.") var resolution: String?
        @Flag(help: "Reopen it instead.") var reopen = false

        func run() async throws {
            try await reportingFailures {
                let report = try await key.admin().updateReport(
                    id, state: reopen ? .open : .resolved, resolution: resolution
                )
                say("\(report.id): \(report.state.rawValue).")
            }
        }
    }
}
