import ArgumentParser
import Foundation
import NIOConcurrencyHelpers
import Parley

/// Interactive chat: incoming messages appear live while you type; lines starting with `/` are commands.
struct Chat: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Chat interactively: type to send; messages, typing, receipts, presence and status appear live.",
        discussion: """
            Type @uid in a message to mention someone. Messages are numbered (#12): /reply 12 text, /edit 12 text, \
            /delete 12, /react 12 👍, /unreact 12 👍, /thread 12, /mentions. /file PATH [caption] sends a file; \
            /download f_... [PATH] saves one (in the current folder by default, never over an existing file). \
            Commands: /history, /typing, /stoptyping, /unread, /status, /background, /foreground, /connect, \
            /disconnect, /ping, /offline, /online, /help, /quit. Messages shown here are marked read. \
            /background and /foreground play the app-lifecycle rules (auto mode drops the socket in the \
            background at once; --manual keeps it 30 s unless /ping).

            On a terminal the line you type stays below what arrives: Left/Right, Ctrl-A/Ctrl-E (start, end), \
            Backspace, Ctrl-U (clear), Enter (send), Ctrl-C or Ctrl-D on an empty line (quit). Colour only on a \
            terminal, never with NO_COLOR set. From a pipe or a file, lines are read as they come, without escape \
            codes, until the end of the input.
            """
    )
    @OptionGroup var options: ClientOptions
    @OptionGroup var receiver: ReceiverOptions

    func run() async throws {
        Console.shared.enableStyle()
        try await reportingFailures {
            let (client, user) = try await options.loggedInClient()
            let conversationId: String
            switch receiver.receiver {
            case .conversation(let id): conversationId = try await client.conversation(id: id).id
            case .user(let uid): conversationId = try await client.directConversation(with: uid).id
            }
            say("Chatting in \(conversationId) as \(user.uid). Type /help for commands.")
            let history = try await client.fetchMessages(conversationId: conversationId, limit: 20).messages
            for message in history where !client.isBlocked(message.sender) { say(describe(message)) }
            if let last = history.last { try? await client.markRead(upTo: last.seq, in: conversationId) }
            for participant in try await client.participants(of: conversationId) where participant.uid != user.uid {
                let presence = try? await client.presence(of: participant.uid)
                say("* \(participant.uid) is \(presence?.online == true ? "online" : "offline")")
            }
            let sentHere = NIOLockedValueBox(Set<String>())
            let statusTask = Task {
                for await status in client.connectionStatusUpdates() { say("* connection: \(status)") }
            }
            let me = user.uid
            let eventTask = Task {
                for await event in client.events() {
                    guard event.conversationId == conversationId || event.conversationId == nil else { continue }
                    if case .messageSent(let message) = event.payload {
                        let mine = message.clientMessageId.map { id in sentHere.withLockedValue { $0.contains(id) } }
                        if mine != true { say(describe(message)) }
                        if message.mentions?.contains(me) == true && message.sender != me {
                            say("  ! \(message.sender) mentioned you")
                        }
                        if message.sender != me { try? await client.markRead(upTo: message.seq, in: conversationId) }
                    } else if let line = describe(event, me: me, in: .chat) {
                        say(line)
                    }
                }
            }
            say("* connection: \(client.connectionStatus)")
            for await line in Console.shared.readLines(prompt: "\(me)> ") {
                let text = line.trimmingCharacters(in: .whitespaces)
                if text.isEmpty { continue }
                if text.hasPrefix("/file ") {
                    let clientMessageId = TimeOrderedUUID.make().uuidString
                    sentHere.withLockedValue { _ = $0.insert(clientMessageId) }
                    await sendFile(text, client: client, conversationId: conversationId, id: clientMessageId)
                    continue
                }
                if text.hasPrefix("/") {
                    if try await command(text, client: client, conversationId: conversationId) == .quit { break }
                    continue
                }
                let clientMessageId = TimeOrderedUUID.make().uuidString
                sentHere.withLockedValue { _ = $0.insert(clientMessageId) }
                do {
                    let message = try await client.sendTextMessage(
                        text, to: .conversation(conversationId), mentions: mentionedUIDs(in: text),
                        clientMessageId: clientMessageId
                    )
                    say("  (sent #\(message.seq))")
                } catch let error as ParleyError {
                    say("! not sent: \(error.message) [\(error.code)]")
                }
            }
            Console.shared.endLines()
            statusTask.cancel()
            eventTask.cancel()
            await client.shutdown()
        }
    }

    enum Outcome { case proceed, quit }

    /// `/file PATH [caption]`: sends the file through the outbox and waits for it.
    private func sendFile(_ text: String, client: ParleyClient, conversationId: String, id: String) async {
        let words = text.split(separator: " ", maxSplits: 2).map(String.init)
        let caption = words.count > 2 ? words[2] : nil
        do {
            let message = try await client.sendFile(
                at: URL(fileURLWithPath: words[1]), to: .conversation(conversationId), caption: caption,
                mentions: caption.flatMap(mentionedUIDs(in:)), clientMessageId: id
            )
            say("  (sent #\(message.seq) \(message.files.map(describe).joined(separator: " ")))")
        } catch let error as ParleyError {
            say("! not sent: \(error.message) [\(error.code)]")
        } catch {
            say("! not sent: \(error)")
        }
    }

    private func command(_ text: String, client: ParleyClient, conversationId: String) async throws -> Outcome {
        do {
            // Commands on one message: `/verb <#n|id> [text]`.
            let words = text.split(separator: " ", maxSplits: 2).map(String.init)
            let verb = words[0].lowercased()
            if ["/edit", "/delete", "/react", "/unreact", "/reply", "/thread"].contains(verb) {
                guard words.count >= 2 else {
                    throw CLIFailure.usage("\(verb) needs a message number, like \(verb) 12.")
                }
                let messageId = try await client.messageId(named: words[1], in: conversationId)
                let rest = words.count > 2 ? words[2] : ""
                try await messageCommand(verb, messageId, rest, client: client, conversationId: conversationId)
                return .proceed
            }
            if verb == "/download" {
                guard words.count >= 2 else { throw CLIFailure.usage("/download needs a file id, like f_...") }
                let link = try await client.fileLink(words[1], in: conversationId)
                let target = try downloadTarget(
                    name: link.attachment.name, output: words.count > 2 ? words[2] : nil, force: false
                )
                let saved = try await client.downloadFile(words[1], in: conversationId, to: target)
                say("* saved \(link.attachment.name) to \(saved.path)")
                return .proceed
            }
            switch text.lowercased() {
            case "/quit", "/exit": return .quit
            case "/help":
                say("/reply n text /edit n text /delete n /react n key /unreact n key /thread n /mentions")
                say("/file path [caption] /download f_... [path]")
                say(
                    "/history /typing /stoptyping /unread /status /background /foreground /connect /disconnect /ping /offline /online /quit"
                )
            case "/mentions":
                let page = try await client.fetchUnreadMentions(limit: 20)
                for message in page.messages { say("\(message.conversationId)  \(describe(message))") }
                if page.messages.isEmpty { say("* no unread mentions") }
            case "/typing":
                _ = await client.startTyping(in: conversationId)
            case "/stoptyping":
                _ = await client.stopTyping(in: conversationId)
            case "/unread":
                let unread = try await client.unreadCounts()
                say(
                    "* \(unread.total) unread in all; here \(unread.conversations.first { $0.conversationId == conversationId }?.unread ?? 0)"
                )
            case "/history":
                for message in try await client.fetchMessages(conversationId: conversationId, limit: 20).messages
                where !client.isBlocked(message.sender) {
                    say(describe(message))
                }
            case "/status": say("* connection: \(client.connectionStatus)")
            case "/background", "/bg":
                await client.appDidEnterBackground()
                say("* app in background")
            case "/foreground", "/fg":
                await client.appWillEnterForeground()
                say("* app in foreground")
            case "/connect":
                try await client.connect()
            case "/disconnect":
                await client.disconnect()
            case "/ping":
                try await client.ping()
                say("* pong")
            case "/offline":
                await client.networkStatusChanged(available: false)
            case "/online":
                await client.networkStatusChanged(available: true)
            default:
                say("Unknown command \(text). /help lists them.")
            }
        } catch let error as ParleyError {
            say("! \(error.message) [\(error.code)]")
        } catch let failure as CLIFailure {
            say("! \(failure.description)")
        }
        return .proceed
    }

    private func messageCommand(
        _ verb: String, _ messageId: String, _ rest: String, client: ParleyClient, conversationId: String
    ) async throws {
        switch verb {
        case "/edit":
            guard !rest.isEmpty else { throw CLIFailure.usage("/edit n needs the new text.") }
            _ = try await client.editMessage(
                .id(messageId), in: conversationId, parts: [.text(rest)], mentions: mentionedUIDs(in: rest)
            )
        case "/delete":
            _ = try await client.deleteMessage(.id(messageId), in: conversationId)
        case "/react", "/unreact":
            guard !rest.isEmpty else { throw CLIFailure.usage("\(verb) n needs a reaction, like 👍.") }
            let reactions =
                verb == "/react"
                ? try await client.addReaction(rest, to: .id(messageId), in: conversationId)
                : try await client.removeReaction(rest, from: .id(messageId), in: conversationId)
            say("  " + (reactions.reactions.isEmpty ? "no reactions" : describe(reactions.reactions)))
        case "/reply":
            guard !rest.isEmpty else { throw CLIFailure.usage("/reply n needs the text.") }
            let message = try await client.sendTextMessage(
                rest, to: .conversation(conversationId), replyTo: messageId, mentions: mentionedUIDs(in: rest)
            )
            say("  (sent #\(message.seq) in the thread)")
        default:
            let page = try await client.fetchReplies(to: messageId, in: conversationId, limit: 20)
            if let parent = page.parent { say(describe(parent)) }
            for reply in page.messages { say("  " + describe(reply)) }
            if page.messages.isEmpty { say("  no replies yet") }
        }
    }
}
