import NIOConcurrencyHelpers
import NIOCore

/// Sends a scenario's messages at their due times, each from the event loop of the socket that sends it.
///
/// Message `n` is due at `start + n * interval`. The schedule is split by event loop; each loop sends its own messages
/// from a scheduled task that re-arms itself for the next due time, so no thread wakes up for the load tool's pacing
/// but the loops that own the sockets, and no write crosses threads. (The tool shares the machine with the server:
/// a pacing task that slept 500 µs at a time kept libdispatch's timer thread and a thread of the concurrency runtime
/// waking 2,000 times a second in `rooms`, about a quarter of the tool's CPU, and handed every write to the socket's
/// loop.)
enum PacedSender {
    /// Sends messages `0..<count`: `send(n, socket)` runs on `socket`'s event loop at message n's due time, for the
    /// messages whose `sender(n)` is not nil (the others are skipped). Returns the start, in ``Monotonic`` nanoseconds,
    /// once every message was sent.
    static func run(
        count: Int, interval nanoseconds: Double, sender: (Int) -> BenchSocket?,
        send: @escaping @Sendable (_ number: Int, _ socket: BenchSocket) -> Void
    ) async -> UInt64 {
        await run(count: count, offset: { Double($0) * nanoseconds }, sender: sender, send: send)
    }

    /// The same with message n due `offset(n)` nanoseconds after the start (non-decreasing in n).
    static func run(
        count: Int, offset: @escaping @Sendable (Int) -> Double, sender: (Int) -> BenchSocket?,
        send: @escaping @Sendable (_ number: Int, _ socket: BenchSocket) -> Void
    ) async -> UInt64 {
        var byLoop: [ObjectIdentifier: (loop: any EventLoop, messages: [(Int, BenchSocket)])] = [:]
        for number in 0..<count {
            guard let socket = sender(number) else { continue }
            byLoop[ObjectIdentifier(socket.channel.eventLoop), default: (socket.channel.eventLoop, [])].messages
                .append((number, socket))
        }
        // A common start a little ahead, so that every loop has its first task armed before it.
        let start = Monotonic.nanoseconds() + 2_000_000
        let due: @Sendable (Int) -> UInt64 = { start + UInt64(offset($0)) }
        await withTaskGroup(of: Void.self) { group in
            for (loop, messages) in byLoop.values {
                let messages = messages
                group.addTask {
                    let finished = loop.makePromise(of: Void.self)
                    loop.execute {
                        LoopSchedule(loop: loop, messages: messages, due: due, send: send, finished: finished).arm()
                    }
                    try? await finished.futureResult.get()
                }
            }
        }
        return start
    }
}

/// One event loop's share of the schedule. Lives on that loop only.
private final class LoopSchedule {
    private let loop: any EventLoop
    private let messages: [(Int, BenchSocket)]
    private let due: @Sendable (Int) -> UInt64
    private let send: @Sendable (Int, BenchSocket) -> Void
    private let finished: EventLoopPromise<Void>
    private var next = 0

    init(
        loop: any EventLoop, messages: [(Int, BenchSocket)], due: @escaping @Sendable (Int) -> UInt64,
        send: @escaping @Sendable (Int, BenchSocket) -> Void, finished: EventLoopPromise<Void>
    ) {
        self.loop = loop
        self.messages = messages
        self.due = due
        self.send = send
        self.finished = finished
    }

    /// Sends what is due, then waits for the next due time (or ends).
    func arm() {
        let now = Monotonic.nanoseconds()
        while next < messages.count, due(messages[next].0) <= now {
            let (number, socket) = messages[next]
            send(number, socket)
            next += 1
        }
        guard next < messages.count else {
            finished.succeed()
            return
        }
        let wait = Int64(due(messages[next].0) - now)
        let bound = NIOLoopBound(self, eventLoop: loop)
        loop.scheduleTask(in: .nanoseconds(wait)) { bound.value.arm() }
    }
}
