import ArgumentParser

/// The load of `rooms` and `relay-floor`: many small groups, all talking at once.
struct RoomsLoad: ParsableArguments {
    @Option(help: "Groups.")
    var rooms: Int = 2000

    @Option(help: "Members per group (each one socket).")
    var size: Int = 5

    @Option(name: [.short, .customLong("rate")], help: "Messages per second, all groups together.")
    var rate: Double = 2000

    @Option(help: "Seconds of sending.")
    var duration: Double = 10

    @Option(help: "Seconds at the start whose messages do not count in the latency (they do count as deliveries).")
    var warmup: Double = 2
}
