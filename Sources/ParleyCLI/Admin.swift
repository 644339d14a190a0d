import ArgumentParser
import Foundation
import Parley

/// The REST API key tasks, for an operator: create users, issue and revoke their tokens.
struct Admin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Server-to-server tasks with the app's secret REST API key.",
        subcommands: [
            CreateUser.self, IssueToken.self, ListTokens.self, RevokeTokens.self, Reports.self, ResolveReport.self,
            DeleteMessage.self, WebhookCommands.self, AppInfo.self, Users.self, RotateKeys.self, Deactivate.self,
            Reactivate.self, SystemMessage.self, Export.self, DeleteUser.self,
        ]
    )

    struct SystemMessage: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "say",
            abstract: "Send a system message of the app to a conversation (no participant needed; shown as the app's)."
        )
        @OptionGroup var key: KeyOptions
        @Argument(help: "The conversation's id.") var conversationId: String
        @Argument(help: "The text.") var words: [String]
        @Flag(help: "Send it silently: no unread count and no push for anyone.") var silent = false

        func run() async throws {
            try await reportingFailures {
                let message = try await key.admin().sendSystemMessage(
                    parts: [.text(words.joined(separator: " "))], to: conversationId, silent: silent)
                say("Sent #\(message.seq) as the app\(silent ? ", silently" : "").")
            }
        }
    }

    struct KeyOptions: ParsableArguments {
        @Option(help: "The server's URL (env PARLEY_SERVER).")
        var server: String = ProcessInfo.processInfo.environment["PARLEY_SERVER"] ?? "http://127.0.0.1:8080"
        @Option(name: .customLong("api-key"), help: "The app's REST API key (env PARLEY_API_KEY).")
        var apiKey: String?

        func admin() throws -> ParleyAdmin {
            guard let url = normalizedServerURL(server) else {
                throw CLIFailure.usage("--server must be an http:// or https:// URL, not \(server).")
            }
            guard let key = apiKey ?? ProcessInfo.processInfo.environment["PARLEY_API_KEY"] else {
                throw CLIFailure.usage("Give the REST API key with --api-key or PARLEY_API_KEY.")
            }
            return ParleyAdmin(serverURL: url, restAPIKey: key)
        }
    }

    struct AppInfo: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "app",
            abstract: "Show the app (users, conversations, live connections); change its web origins or user directory."
        )
        @OptionGroup var key: KeyOptions
        @Option(
            name: .customLong("allow-origin"),
            help: "Replace the web origins allowed to call the REST API (repeat it; `*` for any; none: --no-origins)."
        )
        var origins: [String] = []
        @Flag(name: .customLong("no-origins"), help: "Allow no web origin.") var noOrigins = false
        @Option(
            name: .customLong("user-directory"),
            help: "Whom users find by searching for users: everyone, or contacts (who shares a conversation)."
        )
        var userDirectory: UserDirectoryVisibility?
        @Option(
            name: .customLong("deleted-user-messages"),
            help: "What becomes of a deleted user's messages: tombstone (keeps the sender), or erase."
        )
        var deletedUserMessages: DeletedUserMessages?

        func run() async throws {
            try await reportingFailures {
                let admin = try key.admin()
                var app: AppOverview?
                if noOrigins || !origins.isEmpty {
                    app = try await admin.setAllowedOrigins(noOrigins ? [] : origins)
                }
                if let userDirectory { app = try await admin.setUserDirectory(userDirectory) }
                if let deletedUserMessages { app = try await admin.setDeletedUserMessages(deletedUserMessages) }
                if app == nil { app = try await admin.app() }
                if let app { show(app) }
            }
        }

        private func show(_ app: AppOverview) {
            say("\(app.name) (\(app.appId))")
            say("Users: \(app.stats.users)  Conversations: \(app.stats.conversations)")
            say(
                "On this node: \(app.stats.liveConnections) connection(s) of \(app.stats.connectedUsers) user(s), "
                    + "\(app.stats.onlineUsers) online"
            )
            let origins = app.allowedOrigins.isEmpty ? "none" : app.allowedOrigins.joined(separator: " ")
            say("Allowed web origins: \(origins)")
            say("User directory: \(app.userDirectory.rawValue)")
            say("Deleted users' messages: \(app.deletedUserMessages.rawValue)")
        }
    }

    struct Users: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the app's users in uid order, or those a search finds."
        )
        @OptionGroup var key: KeyOptions
        @Option(help: "At most this many (1-200).") var limit = 50
        @Option(help: "The cursor of the next page (shown after a full page).") var after: String?
        @Option(help: "Only the users with words of their name or uid beginning with these.") var search: String?

        func run() async throws {
            try await reportingFailures {
                let admin = try key.admin()
                let page =
                    if let search {
                        try await admin.searchUsers(search, limit: limit, cursor: after)
                    } else {
                        try await admin.users(limit: limit, cursor: after)
                    }
                for user in page.users {
                    say("\(user.uid)\t\(user.name)" + (user.deactivatedAt == nil ? "" : "\t(deactivated)"))
                }
                if let next = page.nextCursor { say("More: --after \(next)") }
            }
        }
    }

    struct Deactivate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Deactivate a user: tokens revoked, connections closed, no login until reactivated."
        )
        @OptionGroup var key: KeyOptions
        @Argument(help: "The user's uid.") var uid: String

        func run() async throws {
            try await reportingFailures {
                let user = try await key.admin().deactivateUser(uid: uid)
                say(
                    "\(user.uid) deactivated (since \(user.deactivatedAt ?? 0)); `parley admin reactivate \(user.uid)` undoes it"
                )
            }
        }
    }

    struct DeleteUser: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "delete-user",
            abstract: "Delete a user and their data (messages as the app's --deleted-user-messages says). Needs --yes."
        )
        @OptionGroup var key: KeyOptions
        @Argument(help: "The user's uid.") var uid: String
        @Flag(help: "Confirm: this cannot be undone.") var yes = false

        func validate() throws {
            guard yes else { throw ValidationError("Deleting a user cannot be undone: add --yes to go on.") }
        }

        func run() async throws {
            try await reportingFailures {
                let deletion = try await key.admin().deleteUser(uid: uid)
                say(
                    "\(deletion.user.uid) deleted: out of \(deletion.conversationsLeft) conversation(s), "
                        + "\(deletion.messagesDeleted) message(s) \(deletion.messages == .erase ? "erased" : "deleted")"
                )
            }
        }
    }

    struct Reactivate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Reactivate a deactivated user.")
        @OptionGroup var key: KeyOptions
        @Argument(help: "The user's uid.") var uid: String

        func run() async throws {
            try await reportingFailures {
                let user = try await key.admin().reactivateUser(uid: uid)
                say("\(user.uid) is active again")
            }
        }
    }

    struct RotateKeys: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-keys",
            abstract: "Replace the app's Auth Key and REST API key; the old ones stop working at once."
        )
        @OptionGroup var key: KeyOptions

        func run() async throws {
            try await reportingFailures {
                let keys = try await key.admin().rotateKeys()
                say("App ID:       \(keys.appId)")
                say("Auth Key:     \(keys.authKey)")
                say("REST API Key: \(keys.restAPIKey)   (shown once: keep it)")
            }
        }
    }

    struct CreateUser: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a user.")
        @OptionGroup var key: KeyOptions
        @Argument(help: "The new uid.") var uid: String
        @Option(help: "Display name.") var name: String?

        func run() async throws {
            try await reportingFailures {
                let user = try await key.admin().createUser(uid: uid, name: name)
                say("Created \(user.uid) (\(user.name)).")
            }
        }
    }

    struct IssueToken: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Issue an auth token for a user and print it (log in with `parley login --token`)."
        )
        @OptionGroup var key: KeyOptions
        @Argument(help: "The uid.") var uid: String
        @Option(help: "Lifetime in seconds (default: until revoked).") var ttl: Int64?

        func run() async throws {
            try await reportingFailures {
                let issued = try await key.admin().issueAuthToken(uid: uid, ttlSeconds: ttl)
                say(issued.authToken)
            }
        }
    }

    struct ListTokens: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List a user's live tokens (ids only).")
        @OptionGroup var key: KeyOptions
        @Argument(help: "The uid.") var uid: String

        func run() async throws {
            try await reportingFailures {
                for token in try await key.admin().authTokens(uid: uid) {
                    say(
                        "\(token.id)\tcreated \(token.createdAt)\texpires \(token.expiresAt.map(String.init) ?? "never")"
                    )
                }
            }
        }
    }

    struct RevokeTokens: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke one token (--token-id) or all of a user's tokens; their sockets close."
        )
        @OptionGroup var key: KeyOptions
        @Argument(help: "The uid.") var uid: String
        @Option(name: .customLong("token-id"), help: "Only this token.") var tokenId: String?

        func run() async throws {
            try await reportingFailures {
                let admin = try key.admin()
                if let tokenId {
                    try await admin.revokeAuthToken(uid: uid, tokenId: tokenId)
                } else {
                    try await admin.revokeAllAuthTokens(uid: uid)
                }
                say("Revoked.")
            }
        }
    }
}
