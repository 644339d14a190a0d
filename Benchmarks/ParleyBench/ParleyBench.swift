import ArgumentParser

/// `parley-bench`: load scenarios against a real parley-server over real WebSockets on loopback. Each scenario
/// prints one line of figures (and `--json` writes them to a file). docs/BENCHMARKS.md has the commands and results.
@main
struct ParleyBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "parley-bench",
        abstract: "Load scenarios against a real parley-server (started by the bench, or attached with --server-url).",
        discussion: """
            Build both in release first, one command each (SwiftPM builds only the last of several --product):
            swift build -c release --product parley-server; swift build -c release --product parley-bench
            Every run is bounded (--timeout) and stops the server it started.
            """,
        subcommands: [
            ConnectScenario.self, FanoutScenario.self, RoomsScenario.self, PersistScenario.self, StormScenario.self,
            FilesScenario.self, OfflineStoreScenario.self, MembersScenario.self, SearchScenario.self,
            InboxScenario.self, DirectoryScenario.self, SoakScenario.self, RelayFloorScenario.self,
            RelayFloorServer.self,
            ConnectWorker.self,
        ]
    )
}
