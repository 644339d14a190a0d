import ArgumentParser
import Foundation
import Parley

/// The REST API key tasks, for an operator: create users, issue and revoke their tokens.
struct Admin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Server-to-server tasks with the app's secret REST API key.",
        subcommands: [
            CreateUser.self, IssueToken.self, ListTokens.self, RevokeTokens.self, Reports.self, ResolveReport.self,
            DeleteMessage.self, WebhookCommands.self,
        ]
    )

    struct KeyOptions: ParsableArguments {
        @Option(help: "The server's URL (env PARLEY_SERVER).")
        var server: String = ProcessInfo.processInfo.environment["PARLEY_SERVER"] ?? "http://127.0.0.1:8080"
        @Option(name: .customLong("api-key"), help: "The app's REST API key (env PARLEY_API_KEY).")
        var apiKey: String?

        func admin() throws -> ParleyAdmin {
            guard let url = URL(string: server), url.scheme == "http" || url.scheme == "https" else {
                throw CLIFailure.usage("--server must be an http:// or https:// URL.")
            }
            guard let key = apiKey ?? ProcessInfo.processInfo.environment["PARLEY_API_KEY"] else {
                throw CLIFailure.usage("Give the REST API key with --api-key or PARLEY_API_KEY.")
            }
            return ParleyAdmin(serverURL: url, restAPIKey: key)
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
                    say("\(token.id)\tcreated \(token.createdAt)\texpires \(token.expiresAt.map(String.init) ?? "never")")
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
