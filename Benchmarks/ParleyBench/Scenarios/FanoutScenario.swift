import ArgumentParser
import Foundation
import NIOCore
import ParleyProtocol

/// `fanout`: M receivers in one group, one sender, K messages at rate R.
struct FanoutScenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fanout",
        abstract:
            "One sender, M receivers in one group, K messages at R/s: end-to-end latency, deliveries/s, lost, duplicated."
    )

    @Option(name: [.short, .customLong("receivers")], help: "Receivers in the group (besides the sender).")
    var receivers: Int = 1000

    @Option(name: [.short, .customLong("messages")], help: "Messages to send.")
    var messages: Int = 200

    @Option(name: [.short, .customLong("rate")], help: "Messages per second.")
    var rate: Double = 50

    @Option(help: "Extra bytes of text per message.")
    var padding: Int = 64

    @Option(help: "Seconds to wait for the last deliveries after the last send.")
    var drainTimeout: Double = 30

    @OptionGroup var server: ServerOptions
    @OptionGroup var client: ClientOptions

    struct Parameters: Codable, Sendable {
        var receivers: Int
        var messages: Int
        var rate: Double
        var padding: Int
    }

    struct Figures: Codable, Sendable {
        var expected: Int
        var delivered: Int
        var lost: Int
        var duplicated: Int
        var acked: Int
        var stored: Int
        var deliveriesPerSecond: Double
        var latency: LatencySummary
        var connectFailures: Int
        var setupSeconds: Double
        /// Server CPU (user + system) from the first send to the last delivery, per delivery.
        var serverCPUMicrosPerDelivery: Double?
        /// The load tool's own CPU over the same span, per delivery (it shares the machine).
        var benchCPUMicrosPerDelivery: Double?
    }

    func run() async throws {
        try await BenchRun.run(scenario: "fanout", server: server, options: client) { run in
            let setupStart = Monotonic.nanoseconds()
            let prefix = "f\(run.runID)-"
            run.note("creating \(receivers + 1) users and the group")
            let tokens = try await run.provisioner.users(prefix: prefix, count: receivers + 1)
            let conversation = try await run.provisioner.groups([
                (tokens[0], (1...max(receivers, 1)).prefix(receivers).map { "\(prefix)\($0)" })
            ])[0]

            let marker = Marker(runID: run.runID)
            let ledger = DeliveryLedger(sockets: receivers + 1)
            let acks = Counter()
            let callbacks = SocketCallbacks(text: { socket, frame, receivedAt in
                if socket.index == 0 {
                    if FrameKind.isAck(frame) { acks.add() }
                    return
                }
                if FrameKind.isEvent(frame), let found = marker.find(in: frame) {
                    ledger.delivered(
                        socket: socket.index, message: found.number, sentAt: found.sentAt, receivedAt: receivedAt)
                } else {
                    ledger.frame()
                }
            })
            run.note("connecting \(receivers + 1) sockets")
            // Members of one group connecting make presence events for each other: an attempt that times out in that
            // flood is tried again once the server is quiet.
            let connected = await run.fleet.connect(tokens: tokens, retries: 2, callbacks: callbacks) {
                _ = await waitUntilQuiet(quietFor: 1, deadlineSeconds: 120) { ledger.frames }
            }
            guard let sender = connected.sockets[0] else {
                throw BenchError("the sender could not connect: \(connected.failures)")
            }
            let receiving = connected.connected - 1
            // Connecting members of one group makes presence events for all of them: let that pass first.
            _ = await waitUntilQuiet(quietFor: 1, deadlineSeconds: 120) { ledger.frames }
            let setupSeconds = Monotonic.seconds(since: setupStart)
            run.note("\(receiving) receivers connected (\(connected.failed) failed); sending \(messages) at \(rate)/s")

            run.startMeasuring()
            let cpuBefore = run.server.cpuSeconds()
            let benchBefore = ProcFS.cpuSeconds(pid: getpid())
            let padding = self.padding
            let firstSend = await PacedSender.run(count: messages, interval: 1e9 / rate, sender: { _ in sender }) {
                number, socket in
                let text = marker.text(number: number, sentAt: Monotonic.nanoseconds(), padding: padding)
                socket.send(
                    text:
                        #"{"type":"send","ref":"\#(number)","conversationId":"\#(conversation)","clientMessageId":"\#(TimeOrderedUUID.make().uuidString)","parts":[{"type":"text","text":"\#(text)"}]}"#
                )
            }
            let expected = receiving * messages
            let drainDeadline = Monotonic.nanoseconds() + UInt64(drainTimeout * 1e9)
            while (ledger.unique < expected || acks.count < messages) && Monotonic.nanoseconds() < drainDeadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            let delivered = ledger.unique
            let cpu = cpuBefore.flatMap { b in
                run.server.cpuSeconds().map { ($0 - b) * 1e6 / Double(max(delivered, 1)) }
            }
            let benchCPU = benchBefore.flatMap { b in
                ProcFS.cpuSeconds(pid: getpid()).map { ($0 - b) * 1e6 / Double(max(delivered, 1)) }
            }
            let span = Double(ledger.lastDelivery &- firstSend) / 1e9
            let stored = try await run.provisioner.messages(conversationId: conversation, token: tokens[0])
                .filter { $0.parts.first?.text?.hasPrefix("pb:\(run.runID):") == true }.count
            let latency = ledger.latency
            let figures = Figures(
                expected: expected, delivered: delivered, lost: expected - delivered, duplicated: ledger.duplicates,
                acked: acks.count, stored: stored, deliveriesPerSecond: Double(delivered) / max(span, 1e-9),
                latency: latency, connectFailures: connected.failed, setupSeconds: setupSeconds,
                serverCPUMicrosPerDelivery: cpu, benchCPUMicrosPerDelivery: benchCPU
            )
            try run.report(
                line:
                    "receivers=\(receiving) messages=\(messages) rate=\(Format.fixed(rate, 0))/s delivered=\(delivered)/\(expected) "
                    + "lost=\(figures.lost) dup=\(figures.duplicated) stored=\(stored)/\(messages) "
                    + "deliveries/s=\(Int(figures.deliveriesPerSecond)) "
                    + latency.line([("p50", \.p50), ("p90", \.p90), ("p99", \.p99), ("max", \.max)])
                    + (cpu.map { " server_cpu/delivery=\(Format.fixed($0, 1))us" } ?? "")
                    + (benchCPU.map { " bench_cpu/delivery=\(Format.fixed($0, 1))us" } ?? ""),
                parameters: Parameters(receivers: receivers, messages: messages, rate: rate, padding: padding),
                figures: figures
            )
            for socket in connected.sockets { socket?.close(abort: true) }
        }
    }
}
