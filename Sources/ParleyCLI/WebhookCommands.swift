import ArgumentParser
import Foundation
import Parley

extension WebhookDeliveryState: ExpressibleByArgument {}

/// `parley admin webhook ...`: the app's webhook endpoints, with the REST API key.
struct WebhookCommands: AsyncParsableCommand {
    typealias KeyOptions = Admin.KeyOptions

    static let configuration = CommandConfiguration(
        commandName: "webhook",
        abstract: "Register and watch the endpoints of the app's backend (REST API key).",
        subcommands: [
            Add.self, List.self, Enable.self, Disable.self, Remove.self, RotateSecret.self, Deliveries.self,
            Redeliver.self,
        ]
    )

    static func describe(_ endpoint: WebhookEndpoint) -> String {
        var line = "\(endpoint.id) \(endpoint.url) [\(endpoint.events.joined(separator: ","))]"
        line += endpoint.enabled ? " enabled" : " DISABLED (\(endpoint.disabledReason ?? "by the app's server"))"
        if endpoint.consecutiveFailures > 0 { line += ", \(endpoint.consecutiveFailures) failure(s) in a row" }
        if let description = endpoint.description { line += " — \(description)" }
        return line
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register an endpoint and print its signing secret (shown once)."
        )
        @OptionGroup var key: KeyOptions
        @Argument(help: "The endpoint's http:// or https:// URL.") var url: String
        @Option(
            help: "Comma-separated topics (messages, conversations, participants, reports, users) or event names."
        )
        var events: String = "messages,conversations,participants,reports,users"
        @Option(help: "A note for the app's developers.") var note: String?

        func run() async throws {
            try await reportingFailures {
                let created = try await key.admin().createWebhook(
                    url: url,
                    events: events.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) },
                    description: note
                )
                say(WebhookCommands.describe(created.endpoint))
                say("Signing secret (shown once): \(created.secret)")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the app's endpoints.")
        @OptionGroup var key: KeyOptions

        func run() async throws {
            try await reportingFailures {
                let endpoints = try await key.admin().webhooks()
                if endpoints.isEmpty { say("No webhooks.") }
                for endpoint in endpoints { say(WebhookCommands.describe(endpoint)) }
            }
        }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Enable an endpoint again (its failure run starts over; waiting deliveries go out)."
        )
        @OptionGroup var key: KeyOptions
        @Argument(help: "The webhook id.") var id: String

        func run() async throws {
            try await reportingFailures { try await WebhookCommands.set(id, enabled: true, key: key) }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Disable an endpoint (nothing is queued for it).")
        @OptionGroup var key: KeyOptions
        @Argument(help: "The webhook id.") var id: String

        func run() async throws {
            try await reportingFailures { try await WebhookCommands.set(id, enabled: false, key: key) }
        }
    }

    static func set(_ id: String, enabled: Bool, key: KeyOptions) async throws {
        say(describe(try await key.admin().updateWebhook(id, UpdateWebhookRequest(enabled: enabled))))
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove an endpoint and its deliveries.")
        @OptionGroup var key: KeyOptions
        @Argument(help: "The webhook id.") var id: String

        func run() async throws {
            try await reportingFailures {
                try await key.admin().deleteWebhook(id)
                say("Removed \(id).")
            }
        }
    }

    struct RotateSecret: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-secret", abstract: "Replace an endpoint's signing secret and print the new one."
        )
        @OptionGroup var key: KeyOptions
        @Argument(help: "The webhook id.") var id: String

        func run() async throws {
            try await reportingFailures {
                say("Signing secret (shown once): \(try await key.admin().rotateWebhookSecret(id).secret)")
            }
        }
    }

    struct Deliveries: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List an endpoint's waiting and failed deliveries, oldest first."
        )
        @OptionGroup var key: KeyOptions
        @Argument(help: "The webhook id.") var id: String
        @Option(help: "Only deliveries in this state (pending, failed).") var state: WebhookDeliveryState?
        @Option(help: "Page size.") var limit: Int = 50
        @Option(help: "The cursor a previous page printed.") var cursor: String?

        func run() async throws {
            try await reportingFailures {
                let page = try await key.admin().webhookDeliveries(id, state: state, limit: limit, cursor: cursor)
                if page.deliveries.isEmpty { say("No deliveries waiting or failed.") }
                for delivery in page.deliveries {
                    var line = "\(delivery.id) [\(delivery.state.rawValue)] \(delivery.event)"
                    if let conversationId = delivery.conversationId { line += " in \(conversationId)" }
                    line += ", \(delivery.attempts) attempt(s)"
                    if let error = delivery.lastError { line += ", last: \(error)" }
                    say(line)
                }
                if let next = page.nextCursor { say("More: --cursor \(next)") }
            }
        }
    }

    struct Redeliver: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Send a failed delivery again.")
        @OptionGroup var key: KeyOptions
        @Argument(help: "The webhook id.") var id: String
        @Argument(help: "The delivery id.") var delivery: String

        func run() async throws {
            try await reportingFailures {
                let again = try await key.admin().redeliverWebhookDelivery(delivery, of: id)
                say("\(again.id) is pending again.")
            }
        }
    }
}
