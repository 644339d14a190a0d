import ArgumentParser
import Foundation
import NIOConcurrencyHelpers
import Parley

struct Login: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Log in as a user (with the app's Auth Key, or an auth token) and save the session."
    )
    @OptionGroup var options: ClientOptions
    @Argument(help: "The uid to log in as (with the Auth Key).") var uid: String?
    @Option(name: .customLong("auth-key"), help: "The app's development Auth Key (env PARLEY_AUTH_KEY).")
    var authKey: String?
    @Option(help: "An auth token issued by your server, instead of uid and Auth Key.") var token: String?

    func run() async throws {
        try await reportingFailures {
            let client = try await options.makeClient()
            let user: User
            if let token {
                user = try await client.login(authToken: token)
            } else {
                guard let uid else { throw CLIFailure.usage("Give a uid (with --auth-key) or --token.") }
                guard let key = authKey ?? ProcessInfo.processInfo.environment["PARLEY_AUTH_KEY"] else {
                    throw CLIFailure.usage("Give the Auth Key with --auth-key or PARLEY_AUTH_KEY.")
                }
                user = try await client.login(uid: uid, authKey: key)
            }
            try options.rememberLogin()
            say("Logged in as \(user.uid) (\(user.name)) on profile \(options.profile) at \(try options.serverURL).")
            await client.shutdown()
        }
    }
}

struct Logout: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Log out: revoke the token and forget the session.")
    @OptionGroup var options: ClientOptions

    func run() async throws {
        try await reportingFailures {
            let client = try await options.makeClient()
            do {
                try await client.logout()
            } catch let error as ParleyError where error.code == .notLoggedIn {
                await client.shutdown()
                throw try options.notLoggedIn()
            }
            say("Logged out.")
            await client.shutdown()
        }
    }
}

struct WhoAmI: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "whoami", abstract: "Show the logged-in user.")
    @OptionGroup var options: ClientOptions

    func run() async throws {
        try await reportingFailures {
            let (client, user) = try await options.loggedInClient()
            say("\(user.uid) (\(user.name))")
            await client.shutdown()
        }
    }
}

struct Conversations: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List your conversations, most recent first, with their unread counts (one request a page)."
    )
    @OptionGroup var options: ClientOptions
    @Option(help: "How many.") var limit = 50
    @Flag(help: "Only those with unread messages.") var unread = false
    @Flag(help: "Only those with unread messages that mention you.") var mentions = false
    @Flag(help: "The conversations you archived instead of the others.") var archived = false
    @Option(help: "Only this kind: direct or group.") var type: ConversationType?

    func run() async throws {
        try await reportingFailures {
            let (client, _) = try await options.loggedInClient()
            let page = try await client.inboxPage(
                filter: InboxFilter(unreadOnly: unread, type: type, mentionsOnly: mentions, archived: archived),
                limit: limit
            )
            for entry in page.entries {
                let conversation = entry.conversation
                let title = entry.otherMember.map { "with \($0.uid)" } ?? conversation.name ?? ""
                var line =
                    "\(conversation.id)\t\(conversation.type.rawValue)\t\(title)\t"
                    + "\(conversation.participantCount) participants\t\(entry.unread) unread"
                if entry.unreadMentions > 0 { line += " (\(entry.unreadMentions) mentioning you)" }
                say(line)
            }
            if page.entries.isEmpty { say(archived ? "No archived conversations." : "No conversations yet.") }
            await client.shutdown()
        }
    }
}

struct Archive: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Archive a conversation: it leaves `parley conversations` until its next message."
    )
    @OptionGroup var options: ClientOptions
    @Argument(help: "The conversation's id.") var conversation: String
    @Flag(help: "Bring it back instead.") var undo = false

    func run() async throws {
        try await reportingFailures {
            let (client, _) = try await options.loggedInClient()
            if undo {
                try await client.unarchiveConversation(id: conversation)
                say("\(conversation) is back in your conversations.")
            } else {
                try await client.archiveConversation(id: conversation)
                say("\(conversation) archived until its next message (`parley conversations --archived` lists it).")
            }
            await client.shutdown()
        }
    }
}

struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send a text message, or a file with --file.",
        discussion: """
            The message goes through the outbox, which keeps it on disk until the server has it. When the server \
            cannot be reached (or does not answer within --wait seconds), the message stays queued, parley says so \
            and exits 5: the next parley command that reaches the server sends it (`parley outbox` sends and lists \
            what is queued). A file is copied into the profile's storage when it is queued, uploaded (with its \
            progress on a terminal), then sent with the text as its caption; --wait counts from the last progress.
            """
    )
    @OptionGroup var options: ClientOptions
    @OptionGroup var receiver: ReceiverOptions
    @Option(help: "Seconds to wait for the server before leaving the message queued.") var wait = 10
    @Option(help: "A file to send (its type is guessed from its extension).") var file: String?
    @Option(name: .customLong("text"), help: "The caption of --file (or give it as the text).") var caption: String?
    @Flag(help: "Send it silently: nobody's unread count, mention or push moves (a text message).") var silent = false
    @Argument(help: ArgumentHelp("The text.", valueName: "text")) var words: [String] = []

    func validate() throws {
        if file == nil && words.isEmpty { throw ValidationError("Give the text to send, or a file with --file.") }
        if file == nil && caption != nil { throw ValidationError("--text is the caption of a --file.") }
        if caption != nil && !words.isEmpty { throw ValidationError("Give the caption once: --text or the text.") }
        if silent && file != nil { throw ValidationError("--silent sends a text message, not a --file.") }
    }

    /// How waiting for the queued message ended.
    enum Outcome: Sendable {
        case settled(OutgoingMessage.State)
        /// The outbox tried and retried while the socket could not connect either.
        case unreachable(ParleyError)
        case timedOut
    }

    func run() async throws {
        try await reportingFailures {
            let (client, _) = try await options.loggedInClient()
            let updates = client.outboxUpdates()
            let text = caption ?? words.joined(separator: " ")
            let queued =
                if let file {
                    try client.queueFile(
                        at: URL(fileURLWithPath: file), to: receiver.receiver, caption: text,
                        mentions: mentionedUIDs(in: text)
                    )
                } else {
                    try client.queueMessage(
                        parts: [.text(text)], to: receiver.receiver, mentions: mentionedUIDs(in: text), silent: silent
                    )
                }
            let meter = ProgressLine(label: queued.file.map { "Uploading \($0.name)" })
            // --wait seconds after the last sign of life: the queueing, or the upload's progress.
            let lastActivity = NIOLockedValueBox(ContinuousClock.now)
            let outcome = await withTaskGroup(of: Outcome?.self) { group in
                group.addTask {
                    for await update in updates where update.clientMessageId == queued.clientMessageId {
                        if let progress = update.uploadProgress {
                            lastActivity.withLockedValue { $0 = .now }
                            meter.show(progress)
                        }
                        if update.state != .pending { return .settled(update.state) }
                    }
                    return nil
                }
                group.addTask { await serverUnreachable(client, baseline: [:]).map(Outcome.unreachable) }
                group.addTask { [wait] in
                    while true {
                        let deadline = lastActivity.withLockedValue { $0 } + .seconds(wait)
                        guard ContinuousClock.now < deadline else { return .timedOut }
                        do { try await Task.sleep(until: deadline) } catch { return nil }
                    }
                }
                defer { group.cancelAll() }
                while let result = await group.next() { if let result { return result } }
                return Outcome.timedOut
            }
            meter.end()
            let server = try options.serverURL.absoluteString
            switch outcome {
            case .settled(.sent(let message)):
                say("Sent #\(message.seq) to \(message.conversationId).")
                for file in message.files { say("  " + describe(file)) }
            case .settled(.failed(let code, let message)):
                try? client.cancelMessage(clientMessageId: queued.clientMessageId)
                await client.shutdown()
                throw ParleyError(code, message)
            case .settled(.cancelled), .settled(.pending), .settled(.reacted), .timedOut:
                await client.shutdown()
                throw ParleyError(
                    .timeout,
                    "Queued as \(queued.clientMessageId), not sent: the server at \(server) did not answer within "
                        + "\(wait) s; it goes with the next parley command that reaches it (`parley outbox` lists it)."
                )
            case .unreachable(let error):
                await client.shutdown()
                throw ParleyError(
                    error.code,
                    "Queued as \(queued.clientMessageId), not sent: the server at \(server) cannot be reached; it goes "
                        + "with the next parley command that reaches it (`parley outbox` lists it)."
                )
            }
            await client.shutdown()
        }
    }
}

/// Returns once the outbox shows that the server cannot be reached: a pending entry was tried twice more than in
/// `baseline` (its attempts then; so at least one attempt failed and was retried) while the socket is not connected.
/// A server that takes messages over HTTP, or answers slowly, never gets there. Nil when cancelled.
func serverUnreachable(_ client: ParleyClient, baseline: [String: Int]) async -> ParleyError? {
    while true {
        let retried = client.outgoingMessages().contains {
            $0.state == .pending && $0.attempts >= (baseline[$0.clientMessageId] ?? 0) + 2
        }
        if retried && client.connectionStatus != .connected {
            return ParleyError(.serverUnreachable, "The server could not be reached.")
        }
        do { try await Task.sleep(for: .milliseconds(100)) } catch { return nil }
    }
}

struct Download: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Download a file of a message (its id is in `history`: [file NAME, TYPE, SIZE, f_...]).",
        discussion: """
            The file is saved under its own name in the current folder, or at --output (a file, or a folder to \
            save it in). An existing file is never replaced without --force. The bytes are checked against the \
            SHA-256 and size the server recorded at the upload.
            """
    )
    @OptionGroup var options: ClientOptions
    @Argument(help: "The conversation's id.") var conversationId: String
    @Argument(help: "The file's id (f_...).") var fileId: String
    @Option(name: [.short, .long], help: "Where to save it: a file, or a folder.") var output: String?
    @Flag(help: "Replace an existing file.") var force = false

    func run() async throws {
        try await reportingFailures {
            let (client, _) = try await options.loggedInClient()
            let link = try await client.fileLink(fileId, in: conversationId)
            let name = link.attachment.name
            let target = try downloadTarget(name: name, output: output, force: force)
            let meter = ProgressLine(label: "Downloading \(name)")
            let saved = try await client.downloadFile(fileId, in: conversationId, to: target) { meter.show($0) }
            meter.end()
            say("Saved \(name) (\(link.attachment.contentType), \(humanSize(link.attachment.size))) to \(saved.path).")
            await client.shutdown()
        }
    }
}

struct Outbox: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send what is queued, then list the messages not sent yet; retry or cancel one.",
        discussion: """
            Pending messages get up to --wait seconds to go out; each one sent meanwhile is reported \
            (`sent <id>: #12 in c_...`), then what is left is listed. When the server cannot be reached, the last \
            line says so; the messages stay queued.
            """
    )
    @OptionGroup var options: ClientOptions
    @Option(help: "Send this failed message again (its client message id).") var retry: String?
    @Option(help: "Remove this message from the outbox (its client message id).") var cancel: String?
    @Option(help: "Seconds to let pending messages go out before listing.") var wait = 5

    func run() async throws {
        try await reportingFailures {
            let (client, _) = try await options.loggedInClient()
            // Subscribed before anything changes, so that every entry sent during this run is seen.
            let updates = client.outboxUpdates()
            let start = client.outgoingMessages().filter { $0.state == .pending }
            let before = Set(start.map(\.clientMessageId))
            let baseline = Dictionary(start.map { ($0.clientMessageId, $0.attempts) }, uniquingKeysWith: max)
            if let retry { try client.retryMessage(clientMessageId: retry) }
            if let cancel { try client.cancelMessage(clientMessageId: cancel) }
            // Give pending messages up to --wait seconds to go out, as they do whenever parley runs.
            let done = NIOLockedValueBox([OutgoingMessage]())
            func pending() -> Bool { client.outgoingMessages().contains { $0.state == .pending } }
            let unreachableError = NIOLockedValueBox<ParleyError?>(nil)
            if pending() {
                await withTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for await update in updates {
                            switch update.state {
                            case .sent, .reacted: done.withLockedValue { $0.append(update) }
                            case .pending, .failed, .cancelled: break
                            }
                            if !pending() { return }
                        }
                    }
                    group.addTask {
                        let error = await serverUnreachable(client, baseline: baseline)
                        unreachableError.withLockedValue { $0 = error }
                    }
                    group.addTask { [wait] in try? await Task.sleep(for: .seconds(wait)) }
                    await group.next()
                    group.cancelAll()
                }
            }
            let sent = done.withLockedValue { $0 }
            for message in sent {
                let outcome =
                    switch message.state {
                    case .sent(let sent): ": #\(sent.seq) in \(sent.conversationId)"
                    default: ""
                    }
                say("sent \(message.clientMessageId)\(outcome)  \(describeAction(message))")
            }
            // Pending at the start, gone now and not seen going (sent as this command started): sent too.
            let messages = client.outgoingMessages()
            let left = Set(messages.map(\.clientMessageId)).union(sent.map(\.clientMessageId))
            for id in before.subtracting(left).sorted() where id != cancel { say("sent \(id)") }
            for message in messages {
                let state =
                    switch message.state {
                    case .pending: "pending"
                    case .failed(let code, _): "failed \(code.rawValue)"
                    case .sent, .reacted: "done"
                    case .cancelled: "cancelled"
                    }
                say("\(message.clientMessageId)  \(state)  attempts \(message.attempts)  \(describeAction(message))")
            }
            if messages.isEmpty { say("The outbox is empty.") }
            if messages.contains(where: { $0.state == .pending }) {
                let server = try options.serverURL.absoluteString
                if unreachableError.withLockedValue({ $0 }) != nil {
                    say(
                        "Not sent: the server at \(server) cannot be reached; they go with the next command that reaches it."
                    )
                } else {
                    say("Not sent yet: the server at \(server) did not take them within \(wait) s.")
                }
            }
            await client.shutdown()
        }
    }

    /// `reply to m_1: text`, `edit m_2: text`, `react 👍 on m_3`, `[file a.pdf, 1.2 MB, not uploaded] caption`.
    func describeAction(_ message: OutgoingMessage) -> String {
        let action =
            switch message.action {
            case .send: message.replyTo.map { "reply to \($0): " } ?? ""
            case .edit(let target): "edit \(target): "
            case .delete(let target): "delete \(target)"
            case .react(let target, let key, let add): "\(add ? "react" : "unreact") \(key) on \(target)"
            }
        var text = message.parts.compactMap(\.text).joined(separator: " ")
        if let file = message.file {
            let upload = file.attachmentId.map { "uploaded as \($0)" } ?? "not uploaded"
            text = "[file \(file.name), \(humanSize(file.size)), \(upload)] " + text
        }
        return action + text
    }
}

struct History: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the latest messages of a conversation.")
    @OptionGroup var options: ClientOptions
    @OptionGroup var receiver: ReceiverOptions
    @Option(help: "How many.") var limit = 20

    func run() async throws {
        try await reportingFailures {
            let (client, _) = try await options.loggedInClient()
            let page = try await client.fetchMessages(with: receiver.receiver, limit: limit)
            // Users you blocked are left out, as the SDK's message lists leave them out.
            for message in page.messages where !client.isBlocked(message.sender) { say(describe(message)) }
            if page.messages.isEmpty { say("No messages yet.") }
            await client.shutdown()
        }
    }
}

struct Listen: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print every real-time event and connection change until interrupted."
    )
    @OptionGroup var options: ClientOptions

    func run() async throws {
        Console.shared.enableStyle()
        try await reportingFailures {
            let (client, user) = try await options.loggedInClient()
            say("Listening as \(user.uid). Ctrl-C to stop.")
            let statuses = Task {
                for await status in client.connectionStatusUpdates() { say("* connection: \(status)") }
            }
            for await event in client.events() {
                if let line = describe(event, me: user.uid, in: .listen) { say(line) }
            }
            statuses.cancel()
        }
    }
}

struct Profile: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Change your name or avatar (others see profile.update).")
    @OptionGroup var options: ClientOptions
    @Option(help: "Display name.") var name: String?
    @Option(help: "Avatar URL.") var avatar: String?

    func run() async throws {
        try await reportingFailures {
            let (client, _) = try await options.loggedInClient()
            let user = try await client.updateProfile(name: name, avatarURL: avatar)
            say("\(user.uid): \(user.name)\(user.avatarURL.map { " (\($0))" } ?? "")")
            await client.shutdown()
        }
    }
}

struct Group: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage groups.",
        subcommands: [
            Create.self, Add.self, Members.self, Rename.self, Join.self, Leave.self, Remove.self, Role.self,
            Mute.self, Unmute.self, Ban.self, Unban.self, Bans.self, Delete.self, Undelete.self,
        ]
    )

    /// A one-line group action: `parley group <verb> <group> [uid]`.
    struct Target: ParsableArguments {
        @OptionGroup var options: ClientOptions
        @Argument(help: "The group's id.") var group: String
    }

    struct Rename: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Rename a group (owner or admin).")
        @OptionGroup var target: Target
        @Argument(help: "The new name.") var name: String
        func run() async throws {
            try await target.run { try await $0.updateConversation(target.group, name: name) }
        }
    }

    struct Join: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Join a public group.")
        @OptionGroup var target: Target
        func run() async throws { try await target.run { try await $0.joinConversation(target.group) } }
    }

    struct Leave: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Leave a group.")
        @OptionGroup var target: Target
        func run() async throws { try await target.run { try await $0.leaveConversation(target.group) } }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a participant (owner; admin for members).")
        @OptionGroup var target: Target
        @Argument(help: "The uid to remove.") var uid: String
        func run() async throws { try await target.run { try await $0.removeParticipant(uid, from: target.group) } }
    }

    struct Role: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Make a participant admin or member (owner).")
        @OptionGroup var target: Target
        @Argument(help: "The uid.") var uid: String
        @Argument(help: "admin or member.") var role: String
        func run() async throws {
            guard let role = ParticipantRole(rawValue: role), role != .owner else {
                throw CLIFailure.usage("The role is admin or member.")
            }
            try await target.run { try await $0.setRole(role, of: uid, in: target.group) }
        }
    }

    struct Mute: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Mute a participant: they read but cannot send, edit, react or type (owner or admin)."
        )
        @OptionGroup var target: Target
        @Argument(help: "The uid.") var uid: String
        @Option(help: "For this many minutes (default: until unmuted).") var minutes: Int?
        func run() async throws {
            let until = minutes.map { Int64(Date().timeIntervalSince1970 * 1000) + Int64($0) * 60_000 }
            try await target.run { try await $0.muteParticipant(uid, in: target.group, until: until) }
        }
    }

    struct Unmute: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Lift a participant's mute.")
        @OptionGroup var target: Target
        @Argument(help: "The uid.") var uid: String
        func run() async throws { try await target.run { try await $0.unmuteParticipant(uid, in: target.group) } }
    }

    struct Ban: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Ban a user: removed, and kept out until unbanned or --minutes / --until (owner or admin)."
        )
        @OptionGroup var target: Target
        @Argument(help: "The uid.") var uid: String
        @Option(help: "For this many minutes (default: until unbanned).") var minutes: Int?
        @Option(help: "Until this time, ISO 8601 (2026-12-31T18:00:00Z).") var until: String?
        @Option(help: "Why (at most 1 KiB).") var reason: String?
        func run() async throws {
            let end: Date?
            switch (minutes, until) {
            case (let minutes?, nil): end = Date().addingTimeInterval(Double(minutes) * 60)
            case (nil, let until?):
                guard let date = ISO8601DateFormatter().date(from: until) else {
                    throw CLIFailure.usage("--until is an ISO 8601 time, such as 2026-12-31T18:00:00Z.")
                }
                end = date
            case (nil, nil): end = nil
            case (_?, _?): throw CLIFailure.usage("Give --minutes or --until, not both.")
            }
            try await target.run { try await $0.ban(uid, in: target.group, until: end, reason: reason) }
        }
    }

    struct Unban: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Lift a ban: the user may join or be added again.")
        @OptionGroup var target: Target
        @Argument(help: "The uid.") var uid: String
        func run() async throws { try await target.run { try await $0.unban(uid, in: target.group) } }
    }

    struct Bans: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List a group's bans in force (owner or admin).")
        @OptionGroup var options: ClientOptions
        @Argument(help: "The group's id.") var group: String

        func run() async throws {
            try await reportingFailures {
                let (client, _) = try await options.loggedInClient()
                let bans = try await client.bans(in: group)
                if bans.isEmpty { say("Nobody is banned.") }
                for ban in bans {
                    let time = { (epoch: Int64) in Date(timeIntervalSince1970: Double(epoch) / 1000).formatted() }
                    var line = "\(ban.uid)\tsince \(time(ban.createdAt))\t"
                    line += ban.until.map { "until \(time($0))" } ?? "until unbanned"
                    line += "\tby \(ban.bannedBy ?? "the app's server")"
                    if let reason = ban.reason { line += "\t\(reason)" }
                    say(line)
                }
                await client.shutdown()
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a group (owner); undelete restores it.")
        @OptionGroup var target: Target
        func run() async throws { try await target.run { try await $0.deleteConversation(target.group) } }
    }

    struct Undelete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Restore a deleted group (owner).")
        @OptionGroup var target: Target
        func run() async throws { try await target.run { try await $0.undeleteConversation(target.group) } }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a group and print its id.")
        @OptionGroup var options: ClientOptions
        @Argument(help: "The group's name.") var name: String
        @Argument(help: "uids of the other members.") var members: [String] = []
        @Flag(help: "Anyone in the app may join.") var `public` = false

        func run() async throws {
            try await reportingFailures {
                let (client, _) = try await options.loggedInClient()
                let group = try await client.createGroup(name: name, participants: members, isPublic: `public`)
                say(group.id)
                await client.shutdown()
            }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add members to a group (owner or admin).")
        @OptionGroup var options: ClientOptions
        @Argument(help: "The group's id.") var group: String
        @Argument(help: "uids to add.") var members: [String]

        func run() async throws {
            try await reportingFailures {
                let (client, _) = try await options.loggedInClient()
                let participants = try await client.addParticipants(members, to: group)
                say("\(participants.count) participants.")
                await client.shutdown()
            }
        }
    }

    struct Members: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List a group's participants.")
        @OptionGroup var options: ClientOptions
        @Argument(help: "The group's id.") var group: String

        func run() async throws {
            try await reportingFailures {
                let (client, _) = try await options.loggedInClient()
                for participant in try await client.participants(of: group) {
                    say("\(participant.uid)\t\(participant.role.rawValue)")
                }
                await client.shutdown()
            }
        }
    }
}

extension Group.Target {
    /// Runs one action with a logged-in client and reports "Done." or the failure.
    func run<T>(_ action: (ParleyClient) async throws -> T) async throws {
        try await withFailureReporting {
            let (client, _) = try await options.loggedInClient()
            _ = try await action(client)
            say("Done.")
            await client.shutdown()
        }
    }
}

/// Where a download goes: `output` (a file, or a folder to put it in under `name`), or `name` in the current folder.
/// The name comes from the uploader: it must name a file in that folder, nothing else; an existing file is replaced
/// only with `force`.
func downloadTarget(name: String, output: String?, force: Bool) throws -> URL {
    var target = URL(fileURLWithPath: output ?? FileManager.default.currentDirectoryPath)
    var isDirectory: ObjCBool = false
    if FileManager.default.fileExists(atPath: target.path, isDirectory: &isDirectory), isDirectory.boolValue {
        guard !name.contains("/"), !name.contains("\\"), name != ".", name != "..", !name.isEmpty else {
            throw CLIFailure.usage("The file's name \(name.debugDescription) is not safe here: give --output.")
        }
        target.appendPathComponent(name)
    }
    if FileManager.default.fileExists(atPath: target.path) && !force {
        throw CLIFailure.usage("\(target.path) exists: choose another path, or --force to replace it.")
    }
    return target
}
