import ArgumentParser
import Foundation
import GRDB
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// `relay-floor`: what `rooms` costs a server that does nothing but the sockets' work, on SwiftNIO as parley-server
/// uses it (issue 43, "the cheapest path"): a relay (`relay-floor-server`, a child process) that reads a frame from a
/// member and writes it to the group's other members, and the frame and an ack back to the sender, on two event loops;
/// no storage, no JSON, no WebSocket framing (4-byte length prefixes), no authentication. The load is `rooms`'s: the
/// same groups, the same schedule (every member periodically from a random phase of its own), frames of the size of
/// Parley's events. The server's CPU per message is the floor under anything built on SwiftNIO's channels for this
/// traffic on this machine.
struct RelayFloorScenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay-floor",
        abstract: "rooms' traffic through a bare SwiftNIO relay (no storage, no protocol): the socket path's floor."
    )

    @OptionGroup var load: RoomsLoad

    @Option(help: "Bytes of each message frame (Parley's event frames in rooms are about 560).")
    var frameBytes: Int = 560

    @Option(help: "Event loops of the relay (parley-server has one per core).")
    var loops: Int = System.coreCount

    @Option(help: "Event loops of the load tool.")
    var threads: Int = System.coreCount

    @Option(help: "Seconds the whole run may take before it is stopped.")
    var timeout: Double = 120

    @Flag(
        help: """
            Hand every message from the loop that read it to one thread of its own, which writes it to the members \
            (parley-server's command writer: a message crosses three threads).
            """)
    var hop = false

    @Flag(
        help: """
            On that thread (implies --hop), append each batch of messages to a SQLite log first, in one transaction \
            (WAL, synchronous=NORMAL; a rowid table and a unique (conversation, seq) index, the position counted in \
            memory): what storing costs at its cheapest in this stack.
            """)
    var store = false

    @Flag(
        help: """
            With --store, never checkpoint the WAL (it grows for the run): storing without the checkpoints' copies \
            and fsyncs, a floor under any way of running them.
            """)
    var noCheckpoints = false

    @Flag(
        help: """
            With --store, checkpoint on a thread of its own (a PASSIVE checkpoint every 250 ms, a RESTART every 2 s; \
            SQLite's automatic ones off), as parley-server's checkpointer does, instead of on the storing thread.
            """)
    var checkpointThread = false

    func run() async throws {
        let (rooms, size, rate, duration, warmup) = (load.rooms, load.size, load.rate, load.duration, load.warmup)
        let people = rooms * size
        let (senders, offsets) = RoomsScenario.schedule(
            phases: .random, people: people, rate: rate, duration: duration)
        let count = senders.count
        let warmupCount = offsets.firstIndex { $0 >= warmup * 1e9 } ?? count

        // The relay, a child process: it prints its port, then relays until its standard input closes.
        let relay = Process()
        relay.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        let database =
            store
            ? FileManager.default.temporaryDirectory.appendingPathComponent(
                "relay-floor-\(UUID().uuidString).sqlite"
            ).path : nil
        defer {
            if let database {
                for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: database + suffix) }
            }
        }
        relay.arguments =
            ["relay-floor-server", "--size", "\(size)", "--loops", "\(loops)"] + (hop || store ? ["--hop"] : [])
            + (database.map { ["--database", $0] } ?? []) + (noCheckpoints ? ["--no-checkpoints"] : [])
            + (checkpointThread ? ["--checkpoint-thread"] : [])
        let output = Pipe()
        let input = Pipe()
        relay.standardOutput = output
        relay.standardInput = input
        try relay.run()
        let watchdog = Task {
            try await Task.sleep(for: .seconds(timeout))
            relay.terminate()
            FileHandle.standardError.write(Data("[relay-floor] timed out\n".utf8))
            Foundation.exit(3)
        }
        defer {
            watchdog.cancel()
            try? input.fileHandleForWriting.close()
            relay.waitUntilExit()
        }
        guard let line = String(data: output.fileHandleForReading.availableData, encoding: .utf8),
            let port = Int(line.trimmingCharacters(in: .whitespacesAndNewlines))
        else { throw ValidationError("relay-floor-server did not print its port") }

        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, threads))
        let deliveries = Counter()
        let acks = Counter()
        let latency = LatencyRecorder()
        let sources = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
        FileHandle.standardError.write(Data("[relay-floor] connecting \(people) sockets\n".utf8))
        var channels: [any Channel] = []
        channels.reserveCapacity(people)
        for member in 0..<people {
            let channel = try await ClientBootstrap(group: group)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(RelayFrameDecoder()))
                        try channel.pipeline.syncOperations.addHandler(
                            RelayClientHandler(
                                member: member, warmupCount: warmupCount, deliveries: deliveries, acks: acks,
                                latency: latency))
                    }
                }
                .bind(to: try SocketAddress(ipAddress: sources[member % sources.count], port: 0))
                .connect(host: "127.0.0.1", port: port).get()
            var hello = channel.allocator.buffer(capacity: 12)
            hello.writeInteger(UInt32(8))
            hello.writeInteger(RelayFrame.hello)
            hello.writeInteger(UInt32(member))
            try await channel.writeAndFlush(hello)
            channels.append(channel)
        }
        // Every hello is in before the first send (the relay answers each with an ack).
        while acks.count < people { try await Task.sleep(for: .milliseconds(20)) }
        FileHandle.standardError.write(Data("[relay-floor] sending \(count) messages at \(rate)/s\n".utf8))

        let start = Monotonic.nanoseconds() + 50_000_000
        let frameBytes = frameBytes
        for number in 0..<count {
            let channel = channels[Int(senders[number])]
            let due = start + UInt64(offsets[number])
            channel.eventLoop.scheduleTask(deadline: .uptimeNanoseconds(due)) {
                var frame = channel.allocator.buffer(capacity: frameBytes)
                frame.writeInteger(UInt32(frameBytes - 4))
                frame.writeInteger(RelayFrame.message)
                frame.writeInteger(UInt32(senders[number]))
                frame.writeInteger(UInt32(number))
                frame.writeInteger(Monotonic.nanoseconds())
                frame.writeRepeatingByte(0x61, count: frameBytes - frame.readableBytes)
                channel.writeAndFlush(frame, promise: nil)
            }
        }
        // CPU from the end of the warm-up to the last delivery.
        let measuredFrom = start + UInt64(warmup * 1e9)
        while Monotonic.nanoseconds() < measuredFrom { try await Task.sleep(for: .milliseconds(5)) }
        let cpuStart = ProcFS.cpuSeconds(pid: relay.processIdentifier) ?? 0
        let deliveriesAtStart = deliveries.count
        let expected = count * (size - 1)
        let deadline = Monotonic.nanoseconds() + UInt64((duration + 30) * 1e9)
        while deliveries.count < expected || acks.count < people + count {
            guard Monotonic.nanoseconds() < deadline else { break }
            try await Task.sleep(for: .milliseconds(2))
        }
        let cpuEnd = ProcFS.cpuSeconds(pid: relay.processIdentifier) ?? 0
        let measuredMessages = Double(deliveries.count - deliveriesAtStart) / Double(size - 1)
        let summary = latency.summary
        let checkpoints = noCheckpoints ? "-no-checkpoints" : checkpointThread ? "-checkpoint-thread" : ""
        let mode = store ? "hop+store" + checkpoints : hop ? "hop" : "direct"
        print(
            "relay-floor: mode=\(mode) rooms=\(rooms)x\(size) messages=\(count) rate=\(Int(rate))/s "
                + "delivered=\(deliveries.count)/\(expected) acked=\(acks.count - people) "
                + String(format: "p50=%.2fms p99=%.2fms ", summary.p50, summary.p99)
                + String(format: "server_cpu/msg=%.0fus", (cpuEnd - cpuStart) / max(measuredMessages, 1) * 1e6)
        )
        for channel in channels { channel.close(promise: nil) }
        try await group.shutdownGracefully()
    }
}

/// `relay-floor-server`: the relay `relay-floor` starts (not for use on its own).
struct RelayFloorServer: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay-floor-server", abstract: "The bare relay of relay-floor.", shouldDisplay: false)

    @Option var size: Int = 5
    @Option var loops: Int = System.coreCount
    @Flag var hop = false
    @Option var database: String?
    @Flag var noCheckpoints = false
    @Flag var checkpointThread = false

    func run() throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: loops)
        let registry = RelayRegistry()
        let size = size
        let writer =
            hop
            ? try RelayWriter(
                registry: registry, size: size, database: database,
                checkpoints: noCheckpoints ? .none : checkpointThread ? .ownThread : .onWriter) : nil
        let server = try ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 4096)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(RelayFrameDecoder()))
                    try channel.pipeline.syncOperations.addHandler(
                        RelayServerHandler(registry: registry, size: size, writer: writer))
                }
            }
            .bind(host: "127.0.0.1", port: 0).wait()
        FileHandle.standardOutput.write(Data("\(server.localAddress?.port ?? 0)\n".utf8))
        // Until the load tool closes our standard input.
        _ = FileHandle.standardInput.readDataToEndOfFile()
        try? server.close().wait()
    }
}

enum RelayFrame {
    static let hello: UInt32 = 0
    static let message: UInt32 = 1
    static let ack: UInt32 = 2
}

/// 4-byte big-endian length, then that many bytes.
struct RelayFrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let length = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self),
            buffer.readableBytes >= 4 + Int(length)
        else { return .needMoreData }
        context.fireChannelRead(wrapInboundOut(buffer.readSlice(length: 4 + Int(length))!))
        return .continue
    }
}

/// The relay's members, by index: written once per connection, read by every message.
final class RelayRegistry: Sendable {
    private let channels = NIOLockedValueBox([Int: any Channel]())

    func add(_ member: Int, _ channel: any Channel) { channels.withLockedValue { $0[member] = channel } }
    func channel(_ member: Int) -> (any Channel)? { channels.withLockedValue { $0[member] } }
}

final class RelayServerHandler: ChannelInboundHandler, @unchecked Sendable {
    // @unchecked: used on its channel's event loop only (NIO's handler contract).
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private let registry: RelayRegistry
    private let size: Int
    private let writer: RelayWriter?

    init(registry: RelayRegistry, size: Int, writer: RelayWriter?) {
        self.registry = registry
        self.size = size
        self.writer = writer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard let kind = frame.getInteger(at: frame.readerIndex + 4, as: UInt32.self),
            let member = frame.getInteger(at: frame.readerIndex + 8, as: UInt32.self)
        else { return }
        if kind == RelayFrame.hello {
            registry.add(Int(member), context.channel)
            context.writeAndFlush(wrapOutboundOut(RelayFrame.ack(member)), promise: nil)
            return
        }
        if let writer {
            writer.enqueue(frame, from: Int(member))
            return
        }
        RelayFrame.relay(frame, from: Int(member), sender: context.channel, registry: registry, size: size)
    }
}

extension RelayFrame {
    static func ack(_ member: UInt32) -> ByteBuffer {
        var ack = ByteBuffer()
        ack.reserveCapacity(12)
        ack.writeInteger(UInt32(8))
        ack.writeInteger(RelayFrame.ack)
        ack.writeInteger(member)
        return ack
    }

    /// The message to the group's other members, and to its sender with the ack in one write, as Parley's sender
    /// gets its event and ack.
    static func relay(_ frame: ByteBuffer, from member: Int, sender: any Channel, registry: RelayRegistry, size: Int) {
        let first = member / size * size
        for other in first..<(first + size) where other != member {
            registry.channel(other)?.writeAndFlush(frame, promise: nil)
        }
        sender.write(frame, promise: nil)
        sender.writeAndFlush(ack(UInt32(member)), promise: nil)
    }
}

/// The storing relay's writer: a thread of its own that takes every message queued since it last looked, appends
/// them to the SQLite log in one transaction (when it has a database), then writes them to the members.
final class RelayWriter: @unchecked Sendable {
    // @unchecked: `queue` and `sleeping` only with `condition` held; `database`, `positions` and `insert` only on the
    // writer's thread.
    private let condition = NSCondition()
    private var queue: [(ByteBuffer, Int)] = []
    private var sleeping = false
    private let registry: RelayRegistry
    private let size: Int
    private let database: DatabaseQueue?
    private var positions: [Int: Int64] = [:]

    enum Checkpoints { case onWriter, ownThread, none }

    init(registry: RelayRegistry, size: Int, database path: String?, checkpoints: Checkpoints) throws {
        self.registry = registry
        self.size = size
        if let path {
            var configuration = Configuration()
            configuration.prepareDatabase { db in
                try db.execute(sql: "PRAGMA journal_mode = WAL")
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
                if checkpoints != .onWriter { try db.execute(sql: "PRAGMA wal_autocheckpoint = 0") }
            }
            let database = try DatabaseQueue(path: path, configuration: configuration)
            try database.inDatabase { db in
                try db.execute(
                    sql: """
                        CREATE TABLE log (conversation INTEGER NOT NULL, seq INTEGER NOT NULL, sender INTEGER NOT NULL,
                            body BLOB NOT NULL);
                        CREATE UNIQUE INDEX log_position ON log (conversation, seq);
                        """)
            }
            self.database = database
            if checkpoints == .ownThread {
                let checkpointer = try DatabaseQueue(path: path)
                let thread = Thread {
                    var round = 0
                    while true {
                        Thread.sleep(forTimeInterval: 0.25)
                        round += 1
                        let mode = round % 8 == 0 ? "RESTART" : "PASSIVE"
                        _ = try? checkpointer.inDatabase { try $0.execute(sql: "PRAGMA wal_checkpoint(\(mode))") }
                    }
                }
                thread.start()
            }
        } else {
            self.database = nil
        }
        let thread = Thread { [self] in run() }
        thread.name = "relay-writer"
        thread.start()
    }

    func enqueue(_ frame: ByteBuffer, from member: Int) {
        condition.lock()
        queue.append((frame, member))
        if sleeping {
            sleeping = false
            condition.signal()
        }
        condition.unlock()
    }

    private func run() {
        var batch: [(ByteBuffer, Int)] = []
        while true {
            condition.lock()
            while queue.isEmpty {
                sleeping = true
                condition.wait()
            }
            swap(&batch, &queue)
            condition.unlock()
            if let database {
                do {
                    try database.inDatabase { db in
                        try db.cachedStatement(sql: "BEGIN IMMEDIATE").execute()
                        let insert = try db.cachedStatement(
                            sql: "INSERT INTO log (conversation, seq, sender, body) VALUES (?, ?, ?, ?)")
                        for (frame, member) in batch {
                            let conversation = member / size
                            let seq = (positions[conversation] ?? 0) + 1
                            positions[conversation] = seq
                            try insert.execute(
                                arguments: [conversation, seq, member, Data(frame.readableBytesView)])
                        }
                        try db.cachedStatement(sql: "COMMIT").execute()
                    }
                } catch {
                    FileHandle.standardError.write(Data("relay-writer: \(error)\n".utf8))
                }
            }
            for (frame, member) in batch {
                guard let sender = registry.channel(member) else { continue }
                RelayFrame.relay(frame, from: member, sender: sender, registry: registry, size: size)
            }
            batch.removeAll(keepingCapacity: true)
        }
    }
}

final class RelayClientHandler: ChannelInboundHandler, @unchecked Sendable {
    // @unchecked: used on its channel's event loop only (NIO's handler contract); the counters are atomic.
    typealias InboundIn = ByteBuffer
    private let member: Int
    private let warmupCount: Int
    private let deliveries: Counter
    private let acks: Counter
    private let latency: LatencyRecorder

    init(
        member: Int, warmupCount: Int, deliveries: Counter, acks: Counter,
        latency: LatencyRecorder
    ) {
        self.member = member
        self.warmupCount = warmupCount
        self.deliveries = deliveries
        self.acks = acks
        self.latency = latency
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let at = frame.readerIndex
        guard let kind = frame.getInteger(at: at + 4, as: UInt32.self) else { return }
        if kind == RelayFrame.ack {
            acks.add()
            return
        }
        guard let sender = frame.getInteger(at: at + 8, as: UInt32.self), Int(sender) != member,
            let number = frame.getInteger(at: at + 12, as: UInt32.self),
            let sentAt = frame.getInteger(at: at + 16, as: UInt64.self)
        else { return }
        deliveries.add()
        if Int(number) >= warmupCount { latency.record(from: sentAt, to: Monotonic.nanoseconds()) }
    }
}
