import ArgumentParser
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import ParleyProtocol

/// `persist`: durable messages per second through the send path. A message counts once its `ack` (or its REST
/// `201`) arrived: the server answers only after the transaction that stores it has committed.
struct PersistScenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "persist",
        abstract: "Durable messages/s through the socket (or REST) send path, on SQLite or --database-url."
    )

    enum Path: String, ExpressibleByArgument, Codable, Sendable {
        case socket
        case rest
    }

    @Option(help: "Send path: socket (send frames, acks) or rest (POST /v1/conversations/{id}/messages).")
    var via: Path = .socket

    @Option(help: "Sending users, each in a group of its own (plus --group-size - 1 members who are not connected).")
    var senders: Int = 50

    @Option(help: "Members per sender's group, the sender included.")
    var groupSize: Int = 1

    @Option(help: "Sends each sender keeps in flight (socket path; the REST path has one per connection).")
    var window: Int = 32

    @Option(name: [.short, .customLong("messages")], help: "Messages in all.")
    var messages: Int = 100_000

    @Option(help: "Extra bytes of text per message.")
    var padding: Int = 64

    @OptionGroup var server: ServerOptions
    @OptionGroup var client: ClientOptions

    struct Parameters: Codable, Sendable {
        var via: Path
        var senders: Int
        var groupSize: Int
        var window: Int
        var messages: Int
        var padding: Int
        var storage: String
    }

    struct Figures: Codable, Sendable {
        var durable: Int
        var refused: Int
        var stored: Int
        var seconds: Double
        var durablePerSecond: Double
        var ackLatency: LatencySummary
        var serverCPUSeconds: Double?
    }

    func run() async throws {
        if let url = server.databaseURL, server.serverURL == nil,
            !ManagedServer.supports(option: "--database-url", binary: server.serverBinary)
        {
            print("persist: skipped: this parley-server has no --database-url option (asked for \(Self.redacted(url)))")
            return
        }
        try await BenchRun.run(scenario: "persist", server: server, options: client) { run in
            let prefix = "p\(run.runID)-"
            let extra = max(groupSize - 1, 0)
            run.note("creating \(senders * groupSize) users and \(senders) groups")
            let tokens = try await run.provisioner.users(prefix: prefix, count: senders * groupSize)
            let conversations = try await run.provisioner.groups(
                (0..<senders).map { sender in
                    (tokens[sender], (0..<extra).map { "\(prefix)\(senders + sender * extra + $0)" })
                }
            )
            let marker = Marker(runID: run.runID)
            let latency = LatencyRecorder()
            let state = NIOLockedValueBox(SendState())
            let total = messages
            let padding = self.padding

            @Sendable func frame(_ number: Int, sender: Int) -> String {
                let text = marker.text(number: number, sentAt: Monotonic.nanoseconds(), padding: padding)
                return
                    #"{"type":"send","ref":"\#(number)","conversationId":"\#(conversations[sender])","clientMessageId":"\#(TimeOrderedUUID.make().uuidString)","parts":[{"type":"text","text":"\#(text)"}]}"#
            }

            run.startMeasuring()
            let cpuBefore = run.server.cpuSeconds()
            let started: UInt64
            switch via {
            case .socket:
                let callbacks = SocketCallbacks(text: { socket, buffer, receivedAt in
                    guard !FrameKind.isEvent(buffer) else { return }
                    let acked = FrameKind.isAck(buffer)
                    // `caughtUp` follows `hello` on every connection: not an answer to a send.
                    guard acked || FrameKind.isError(buffer) else { return }
                    if acked, let found = marker.find(in: buffer) {
                        latency.record(from: found.sentAt, to: receivedAt)
                    }
                    let next = state.withLockedValue { state -> Int? in
                        if acked { state.acked += 1 } else { state.refused += 1 }
                        state.lastAnswer = receivedAt
                        guard state.sent < total else { return nil }
                        defer { state.sent += 1 }
                        return state.sent
                    }
                    if let next { socket.send(text: frame(next, sender: socket.index)) }
                })
                let connected = await run.fleet.connect(tokens: Array(tokens.prefix(senders)), callbacks: callbacks)
                guard connected.connected == senders else {
                    throw BenchError("senders failed to connect: \(connected.failures)")
                }
                run.note("\(senders) senders connected; sending \(total) messages, \(window) in flight each")
                started = Monotonic.nanoseconds()
                for socket in connected.sockets.compactMap({ $0 }) {
                    for _ in 0..<window {
                        let number = state.withLockedValue { state -> Int? in
                            guard state.sent < total else { return nil }
                            defer { state.sent += 1 }
                            return state.sent
                        }
                        guard let number else { break }
                        socket.send(text: frame(number, sender: socket.index))
                    }
                }
                let deadline = Monotonic.nanoseconds() + UInt64(client.timeout) * 1_000_000_000
                while state.withLockedValue({ $0.acked + $0.refused }) < total && Monotonic.nanoseconds() < deadline {
                    try await Task.sleep(for: .milliseconds(20))
                }
                for socket in connected.sockets { socket?.close(abort: true) }
            case .rest:
                run.note("sending \(total) messages over \(senders) REST connections")
                started = Monotonic.nanoseconds()
                let provisioner = run.provisioner
                _ = try await Provisioner(server: provisioner.server, group: provisioner.group, parallelism: senders)
                    .parallel(count: senders) { connection, sender in
                        while true {
                            let number = state.withLockedValue { state -> Int? in
                                guard state.sent < total else { return nil }
                                defer { state.sent += 1 }
                                return state.sent
                            }
                            guard let number else { return 0 }
                            let begin = Monotonic.nanoseconds()
                            let body = SendMessageRequest(
                                clientMessageId: TimeOrderedUUID.make().uuidString,
                                parts: [.text(marker.text(number: number, sentAt: begin, padding: padding))]
                            )
                            let answer = try await connection.json(
                                .POST, "/v1/conversations/\(conversations[sender])/messages",
                                headers: [("Authorization", "Bearer \(tokens[sender])")], body: body
                            )
                            let end = Monotonic.nanoseconds()
                            latency.record(from: begin, to: end)
                            state.withLockedValue { state in
                                if answer.status == 201 || answer.status == 200 {
                                    state.acked += 1
                                } else {
                                    state.refused += 1
                                }
                                state.lastAnswer = end
                            }
                        }
                    }
            }
            let cpuAfter = run.server.cpuSeconds()
            let totals = state.withLockedValue { $0 }
            let seconds = Double(totals.lastAnswer &- started) / 1e9
            let stored = try await storedMessages(run: run, conversations: conversations, tokens: tokens)
            let figures = Figures(
                durable: totals.acked, refused: totals.refused, stored: stored, seconds: seconds,
                durablePerSecond: Double(totals.acked) / max(seconds, 1e-9), ackLatency: latency.summary,
                serverCPUSeconds: cpuBefore.flatMap { b in cpuAfter.map { $0 - b } }
            )
            let storage = server.databaseURL == nil ? "sqlite" : "postgres"
            try run.report(
                line: "via=\(via.rawValue) storage=\(storage) senders=\(senders) window=\(via == .socket ? window : 1) "
                    + "durable=\(totals.acked)/\(total) refused=\(totals.refused) stored=\(stored) "
                    + "rate=\(Format.rate(figures.durablePerSecond)) ack "
                    + figures.ackLatency.line([("p50", \.p50), ("p99", \.p99), ("max", \.max)])
                    + (figures.serverCPUSeconds.map {
                        " server_cpu/msg=\(Format.fixed($0 * 1e6 / Double(max(totals.acked, 1)), 0))us"
                    } ?? ""),
                parameters: Parameters(
                    via: via, senders: senders, groupSize: groupSize, window: window, messages: messages,
                    padding: padding, storage: storage
                ),
                figures: figures
            )
        }
    }

    struct SendState {
        var sent = 0
        var acked = 0
        var refused = 0
        var lastAnswer: UInt64 = 0
    }

    /// Messages the server stored in the senders' groups: each group's last sequence number, less the events
    /// that created it.
    private func storedMessages(run: BenchRun, conversations: [String], tokens: [String]) async throws -> Int {
        let counts = try await run.provisioner.parallel(count: conversations.count) { connection, index in
            let answer = try await connection.request(
                .GET, "/v1/conversations/\(conversations[index])",
                headers: [("Authorization", "Bearer \(tokens[index])")]
            )
            guard answer.status == 200 else { throw HTTPError(description: "GET conversation: \(answer.status)") }
            let conversation = try answer.decode(Conversation.self)
            // Creating a group writes conversation.create and one participantAdded per member.
            return Int(conversation.lastSeq) - 1 - conversation.participantCount
        }
        return counts.reduce(0, +)
    }

    static func redacted(_ url: String) -> String {
        guard let at = url.lastIndex(of: "@"), let scheme = url.range(of: "://") else { return url }
        return String(url[..<scheme.upperBound]) + "***" + String(url[at...])
    }
}
