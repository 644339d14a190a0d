import ArgumentParser
import Foundation
import Parley

// Edit, delete, react, pin, reply, threads and mentions from the command line. A message is named by its number in the
// conversation (`#12`, or `12`) or by its id (`m_...`).

/// The conversation and message a command acts on.
struct MessageTarget: ParsableArguments {
    @OptionGroup var options: ClientOptions
    @OptionGroup var receiver: ReceiverOptions
    @Argument(help: "The message: its number in the conversation (#12) or its id (m_...).") var message: String

    /// A logged-in client, the conversation's id and the message's id.
    func resolve() async throws -> (ParleyClient, User, conversationId: String, messageId: String) {
        let (client, user) = try await options.loggedInClient()
        let conversationId = try await client.conversationId(of: receiver.receiver)
        let messageId = try await client.messageId(named: message, in: conversationId)
        return (client, user, conversationId, messageId)
    }
}

struct Edit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Edit one of your messages (others' where your role may). @uid mentions someone."
    )
    @OptionGroup var target: MessageTarget
    @Argument(help: "The new text.") var text: [String]

    func run() async throws {
        try await reportingFailures {
            let (client, _, conversationId, messageId) = try await target.resolve()
            let text = text.joined(separator: " ")
            let message = try await client.editMessage(
                .id(messageId), in: conversationId, parts: [.text(text)], mentions: mentionedUIDs(in: text)
            )
            say(describe(message))
            await client.shutdown()
        }
    }
}

struct DeleteMessage: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete", abstract: "Delete one of your messages (others' where your role may)."
    )
    @OptionGroup var target: MessageTarget

    func run() async throws {
        try await reportingFailures {
            let (client, _, conversationId, messageId) = try await target.resolve()
            let message = try await client.deleteMessage(.id(messageId), in: conversationId)
            say(describe(message))
            await client.shutdown()
        }
    }
}

struct React: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Add (or with --remove, take back) a reaction.")
    @OptionGroup var target: MessageTarget
    @Argument(help: "An emoji or a short key, such as 👍 or +1.") var key: String
    @Flag(help: "Remove your reaction instead.") var remove = false

    func run() async throws {
        try await reportingFailures {
            let (client, _, conversationId, messageId) = try await target.resolve()
            let reactions =
                remove
                ? try await client.removeReaction(key, from: .id(messageId), in: conversationId)
                : try await client.addReaction(key, to: .id(messageId), in: conversationId)
            say(reactions.reactions.isEmpty ? "No reactions." : describe(reactions.reactions))
            await client.shutdown()
        }
    }
}

struct Pin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pin a message to its conversation (with --undo, unpin it). In a group, owners and admins may."
    )
    @OptionGroup var target: MessageTarget
    @Flag(help: "Unpin it instead.") var undo = false

    func run() async throws {
        try await reportingFailures {
            let (client, _, conversationId, messageId) = try await target.resolve()
            let seq = try await client.fetchMessage(messageId, in: conversationId).seq
            if undo {
                try await client.unpinMessage(messageId, in: conversationId)
                say("Unpinned #\(seq).")
            } else {
                try await client.pinMessage(messageId, in: conversationId)
                say("Pinned #\(seq).")
            }
            await client.shutdown()
        }
    }
}

struct Pins: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List a conversation's pinned messages, the most recently pinned first."
    )
    @OptionGroup var options: ClientOptions
    @OptionGroup var receiver: ReceiverOptions

    func run() async throws {
        try await reportingFailures {
            let (client, _) = try await options.loggedInClient()
            let conversationId = try await client.conversationId(of: receiver.receiver)
            let page = try await client.fetchPinnedMessages(in: conversationId)
            for message in page.messages {
                let by = message.pin?.pinnedBy ?? "the app"
                say("\(describe(message))  (pinned by \(by))")
            }
            if page.messages.isEmpty { say("No pinned messages.") }
            await client.shutdown()
        }
    }
}

struct Reply: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Reply to a message in its thread. @uid mentions someone (they get a push)."
    )
    @OptionGroup var target: MessageTarget
    @Argument(help: "The text.") var text: [String]

    func run() async throws {
        try await reportingFailures {
            let (client, _, conversationId, messageId) = try await target.resolve()
            let text = text.joined(separator: " ")
            let message = try await client.sendTextMessage(
                text, to: .conversation(conversationId), replyTo: messageId, mentions: mentionedUIDs(in: text)
            )
            say(
                "Sent #\(message.seq) in the thread of #\(try await client.fetchMessage(messageId, in: conversationId).seq)."
            )
            await client.shutdown()
        }
    }
}

struct ThreadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "thread", abstract: "Print a message and the replies in its thread."
    )
    @OptionGroup var target: MessageTarget
    @Option(help: "How many replies.") var limit = 20

    func run() async throws {
        try await reportingFailures {
            let (client, _, conversationId, messageId) = try await target.resolve()
            let page = try await client.fetchReplies(to: messageId, in: conversationId, limit: limit)
            if let parent = page.parent { say(describe(parent)) }
            for reply in page.messages { say("  " + describe(reply)) }
            if page.messages.isEmpty { say("  No replies yet.") }
            await client.shutdown()
        }
    }
}

struct Mentions: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the messages that mention you and that you have not read, newest first."
    )
    @OptionGroup var options: ClientOptions
    @Option(help: "How many.") var limit = 20

    func run() async throws {
        try await reportingFailures {
            let (client, _) = try await options.loggedInClient()
            let page = try await client.fetchUnreadMentions(limit: limit)
            for message in page.messages { say("\(message.conversationId)  \(describe(message))") }
            if page.messages.isEmpty { say("No unread mentions.") }
            await client.shutdown()
        }
    }
}

/// The uids a text mentions: each `@uid` word (trailing punctuation left out), once, in order.
func mentionedUIDs(in text: String) -> [String]? {
    var seen = Set<String>()
    var uids: [String] = []
    for word in text.split(whereSeparator: \.isWhitespace) where word.hasPrefix("@") {
        var uid = String(word.dropFirst())
        while let last = uid.last, ".,:;!?)".contains(last) { uid.removeLast() }
        if User.isValidUID(uid), seen.insert(uid).inserted { uids.append(uid) }
    }
    return uids.isEmpty ? nil : uids
}

extension ParleyClient {
    /// The id of a conversation given on the command line (a direct one is created on first use).
    func conversationId(of receiver: Receiver) async throws -> String {
        switch receiver {
        case .conversation(let id): return try await conversation(id: id).id
        case .user(let uid): return try await directConversation(with: uid).id
        }
    }

    /// The id of the message `name` names: `#12` or `12` (its number), or its id.
    func messageId(named name: String, in conversationId: String) async throws -> String {
        let digits = name.hasPrefix("#") ? String(name.dropFirst()) : name
        guard let seq = Int64(digits) else { return name }
        guard seq > 0 else { throw CLIFailure.usage("Messages are numbered from 1.") }
        // The page before seq + 1 starts with the message numbered seq, if there is one.
        let page = try await fetchMessages(conversationId: conversationId, limit: 1, cursor: String(seq + 1))
        guard let message = page.messages.last, message.seq == seq else {
            throw ParleyError(.messageNotFound, "No message #\(seq) in \(conversationId).")
        }
        return message.id
    }
}
