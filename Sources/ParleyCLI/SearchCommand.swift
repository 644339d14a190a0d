import ArgumentParser
import Foundation
import Parley

struct Search: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Find messages by their words in your conversations, newest first.",
        discussion: """
            Every word must be in a message (case and accents do not matter); "quoted words" must come in that order; \
            the last word is matched as a prefix. The words found are shown between * *.
            """
    )
    @OptionGroup var options: ClientOptions
    @Argument(help: "What to look for.") var words: [String] = []
    @Option(help: "Only in this conversation (its id).") var conversation: String?
    @Option(help: "Only messages this user sent.") var from: String?
    @Flag(help: "Only messages with a file.") var files = false
    @Flag(help: "Best match first instead of newest first.") var relevance = false
    @Option(help: "How many (1-200).") var limit = 20

    func run() async throws {
        try await reportingFailures {
            let (client, _) = try await options.loggedInClient()
            let found = try await client.searchMessages(
                words.joined(separator: " "),
                filter: MessageSearchFilter(conversationId: conversation, sender: from, withFilesOnly: files),
                order: relevance ? .relevance : .newest, limit: limit
            )
            for result in found.results {
                let message = result.message
                let text = result.snippet.map(marked) ?? describe(message)
                say("\(message.conversationId)  #\(message.seq) \(message.sender): \(text)")
            }
            if found.results.isEmpty { say("Nothing found.") }
            await client.shutdown()
        }
    }
}

struct FindUsers: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "users",
        abstract: "Find users by the beginnings of the words of their name or uid.",
        discussion: """
            Every word must begin a word of the user's name or uid (case and accents do not matter). Who can be found \
            is the app's setting: everyone, or only the users you share a conversation with.
            """
    )
    @OptionGroup var options: ClientOptions
    @Argument(help: "What to look for.") var words: [String] = []
    @Option(help: "How many (1-200).") var limit = 20

    func run() async throws {
        try await reportingFailures {
            let (client, _) = try await options.loggedInClient()
            let found = try await client.searchUsers(words.joined(separator: " "), limit: limit)
            for user in found.users { say("\(user.uid)\t\(user.name)") }
            if found.users.isEmpty { say("Nobody found.") }
            await client.shutdown()
        }
    }
}

/// A snippet's text with each match between `*`.
func marked(_ snippet: SearchSnippet) -> String {
    var utf16 = Array(snippet.text.utf16)
    for range in snippet.matches.sorted(by: { $0.start > $1.start })
    where range.start >= 0 && range.start + range.length <= utf16.count {
        utf16.insert(UInt16(UInt8(ascii: "*")), at: range.start + range.length)
        utf16.insert(UInt16(UInt8(ascii: "*")), at: range.start)
    }
    return String(decoding: utf16, as: UTF16.self)
}
