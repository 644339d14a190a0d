import ArgumentParser
import Foundation
import ParleyProtocol
import ParleyStore

/// `directory`: user searches over an app of many users, at the store (a REST request adds its usual fraction of a
/// millisecond, and the choice of the leading word its counting, timed here as the server does it). Users are named
/// "<first> <last>" from 200 first names and 1,000 last names; times one prefix (common, rare), two words (a common one
/// with one nobody has, two common ones, a full name), as a user of the app and with the directory limited to contacts
/// (each user in a few groups).
struct DirectoryScenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "directory",
        abstract: "User search times over an app of many users (SQLite, or PostgreSQL with --database-url)."
    )

    @Option(help: "Users.") var users: Int = 300_000
    @Option(help: "Searches of each kind.") var queries: Int = 200
    @Option(help: "Results asked per search.") var limit: Int = 20
    @Option(help: "An empty PostgreSQL database to fill (default: SQLite in a temporary directory).")
    var databaseURL: String?

    func run() async throws {
        let rng = SeededDraws(seed: 11)
        let bench = try await BenchStore.open(databaseURL: databaseURL, name: "directory")
        let store = bench.store
        let app = BenchStore.app
        let firsts = (0..<200).map { "first\(Self.letters($0))" }
        let lasts = (0..<1000).map { "last\(Self.letters($0))" }
        note("filling \(users) users")
        for index in 0..<users {
            let name = "\(firsts[rng.next(below: firsts.count)]) \(lasts[rng.next(below: lasts.count)])"
            try await store.insertUser(appId: app, User(uid: "u\(index)", name: name, createdAt: 1, updatedAt: 1))
            if (index + 1) % 100_000 == 0 { note("\(index + 1) users") }
        }
        // The searcher is in 10 groups of 5.
        for group in 0..<10 {
            let members = (0..<4).map { _ in "u\(1 + rng.next(below: users - 1))" }
            _ = try await store.apply([
                .createConversation(
                    .init(
                        appId: app, newId: "g\(group)", type: .group, creator: "u0", participants: members, now: 1))
            ])[0].get()
        }
        let kinds: [(String, String, UserDirectoryVisibility)] = [
            ("commonPrefix", "first", .everyone),
            ("rareWord", lasts[777], .everyone),
            ("commonAndNobody", "first zzz", .everyone),
            ("twoCommon", "first last", .everyone),
            ("fullName", "\(firsts[3]) \(lasts[5])", .everyone),
            ("contacts", "first", .contacts),
        ]
        var line: [String] = []
        for (kind, query, visibility) in kinds {
            var times: [Double] = []
            var found = 0
            let prefixes = try UserDirectory.prefixes(of: query)
            for _ in 0..<queries {
                let start = Date()
                var lead = 0
                if prefixes.count > 1 {
                    lead = UserDirectory.lead(
                        counts: try await store.userWordCounts(
                            appId: app, prefixes: prefixes, cap: UserDirectory.leadProbe))
                }
                let page = try await store.searchUsers(
                    UserSearchRequest(
                        appId: app, prefixes: prefixes, lead: lead, viewer: "u0", visibility: visibility,
                        limit: limit))
                times.append(Date().timeIntervalSince(start) * 1000)
                found = page.users.count
            }
            times.sort()
            line.append(
                "\(kind) p50=\(Format.ms(times[times.count / 2])) "
                    + "p99=\(Format.ms(times[min(times.count - 1, times.count * 99 / 100)])) found=\(found)"
            )
        }
        try await bench.remove()
        print(
            "directory: users=\(users) store=\(databaseURL == nil ? "sqlite" : "postgres") "
                + line.joined(separator: " ")
        )
    }

    /// `index` in letters (`a`, `b`, ..., `ba`, ...): names without digits, as people's are.
    static func letters(_ index: Int) -> String {
        var value = index
        var text = ""
        repeat {
            text = String(UnicodeScalar(UInt8(97 + value % 26))) + text
            value /= 26
        } while value > 0
        return text
    }

    private func note(_ text: String) { FileHandle.standardError.write(Data("[directory] \(text)\n".utf8)) }
}
