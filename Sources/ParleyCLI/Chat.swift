import ArgumentParser
import Foundation
import NIOConcurrencyHelpers
import Parley

/// Interactive chat: incoming messages appear live while you type; lines starting with `/` are commands.
struct Chat: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Chat interactively: type to send; messages, typing, receipts, presence and status appear live.",
        discussion: """
            Commands: /history, /typing, /stoptyping, /unread, /status, /background, /foreground, /connect,
            /disconnect, /ping, /offline, /online, /help, /quit. Messages shown here are marked read.
            /background and /foreground play the app-lifecycle rules (auto mode drops the socket in the
            background at once; --manual keeps it 30 s unless /ping).
            """
    )
    @OptionGroup var options: ClientOptions
    @OptionGroup var receiver: ReceiverOptions

    func run() async throws {
        try await reportingFailures {
            let (client, user) = try await options.loggedInClient()
            let conversationId: String
            switch receiver.receiver {
            case .conversation(let id): conversationId = try await client.conversation(id: id).id
            case .user(let uid): conversationId = try await client.directConversation(with: uid).id
            }
            say("Chatting in \(conversationId) as \(user.uid). Type /help for commands.")
            let history = try await client.fetchMessages(conversationId: conversationId, limit: 20).messages
            for message in history { say(describe(message)) }
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
                    switch event.payload {
                    case .messageSent(let message):
                        let mine = message.clientMessageId.map { id in sentHere.withLockedValue { $0.contains(id) } }
                        if mine != true { say(describe(message)) }
                        if message.sender != me { try? await client.markRead(upTo: message.seq, in: conversationId) }
                    case .participantAdded(let participant): say("* \(participant.uid) joined")
                    case .participantRemoved(let participant): say("* \(participant.uid) left")
                    case .participantUpdated(let participant): say("* \(participant.uid) is now \(participant.role.rawValue)")
                    case .participantTyping(let typing): say("* \(typing.uid) is typing…")
                    case .participantTypingOff(let typing): say("* \(typing.uid) stopped typing")
                    case .messageDelivered(let receipt) where receipt.uid != me: say("  ✓ delivered to \(receipt.uid) up to #\(receipt.seq)")
                    case .messageRead(let receipt) where receipt.uid != me: say("  ✓✓ read by \(receipt.uid) up to #\(receipt.seq)")
                    case .presenceUpdated(let presence) where presence.uid != me:
                        say("* \(presence.uid) is \(presence.online ? "online" : "offline")")
                    case .conversationUpdated(let conversation): say("* renamed \(conversation.name ?? "")")
                    case .conversationDeleted: say("* the conversation was deleted")
                    case .conversationUndeleted: say("* the conversation was restored")
                    case .profileUpdated(let profile) where profile.uid != me: say("* \(profile.uid) is now called \(profile.name)")
                    default: break
                    }
                }
            }
            say("* connection: \(client.connectionStatus)")
            for await line in StandardInput.lines() {
                let text = line.trimmingCharacters(in: .whitespaces)
                if text.isEmpty { continue }
                if text.hasPrefix("/") {
                    if try await command(text, client: client, conversationId: conversationId) == .quit { break }
                    continue
                }
                let clientMessageId = UUID().uuidString
                sentHere.withLockedValue { _ = $0.insert(clientMessageId) }
                do {
                    let message = try await client.sendTextMessage(
                        text, to: .conversation(conversationId), clientMessageId: clientMessageId
                    )
                    say("  (sent #\(message.seq))")
                } catch let error as ParleyError {
                    say("! not sent: \(error.message) [\(error.code)]")
                }
            }
            statusTask.cancel()
            eventTask.cancel()
            await client.shutdown()
        }
    }

    enum Outcome { case proceed, quit }

    private func command(_ text: String, client: ParleyClient, conversationId: String) async throws -> Outcome {
        do {
            switch text.lowercased() {
            case "/quit", "/exit": return .quit
            case "/help":
                say("/history /typing /stoptyping /unread /status /background /foreground /connect /disconnect /ping /offline /online /quit")
            case "/typing":
                _ = await client.startTyping(in: conversationId)
            case "/stoptyping":
                _ = await client.stopTyping(in: conversationId)
            case "/unread":
                let unread = try await client.unreadCounts()
                say("* \(unread.total) unread in all; here \(unread.conversations.first { $0.conversationId == conversationId }?.unread ?? 0)")
            case "/history":
                for message in try await client.fetchMessages(conversationId: conversationId, limit: 20).messages {
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
        }
        return .proceed
    }
}

/// Lines typed on standard input, read on a thread of their own so that the async world never blocks on them.
enum StandardInput {
    static func lines() -> AsyncStream<String> {
        AsyncStream { continuation in
            let thread = Thread {
                while let line = readLine(strippingNewline: true) { continuation.yield(line) }
                continuation.finish()
            }
            thread.start()
        }
    }
}
