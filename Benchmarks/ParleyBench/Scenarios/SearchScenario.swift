import ArgumentParser
import Foundation
import Logging
import ParleyProtocol
import ParleyStore
import ParleyStorePostgres
import ParleyStoreSQLite

/// `search`: message search over a large store, at the store (what the engine and Parley's query cost; a REST request
/// adds its usual fraction of a millisecond). Fills a store with `--messages` messages in `--rooms` groups of `--size`
/// members, words drawn from a Zipf distribution over a 50,000-word vocabulary (8-16 words a message), files them in
/// the search index (timed: the indexer's CPU per message), then times searches for a common word, a rare word and a
/// three-word phrase taken from a stored message, each as a user (their conversations), in one conversation, and as
/// the app's server (the whole app).
struct SearchScenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "search",
        abstract: "Search times over a store of many messages (SQLite, or PostgreSQL with --database-url)."
    )

    @Option(help: "Messages stored.") var messages: Int = 1_000_000
    @Option(help: "Groups.") var rooms: Int = 2000
    @Option(help: "Members of each group (drawn from --users).") var size: Int = 5
    @Option(help: "Users.") var users: Int = 2000
    @Option(help: "Searches of each kind and scope.") var queries: Int = 100
    @Option(help: "Results asked per search.") var limit: Int = 20
    @Option(help: "An empty PostgreSQL database to fill (default: SQLite in a temporary directory).")
    var databaseURL: String?
    @Option(help: "A JSON report to write.") var json: String?

    struct Figures: Codable, Sendable {
        var messages: Int
        var fillSeconds: Double
        var filingMicrosecondsPerMessage: Double
        /// Per kind and scope: p50, p99 and the mean number of results, in milliseconds.
        var searches: [String: [Double]]
    }

    func run() async throws {
        let rng = SeededDraws(seed: 42)
        let vocabulary = Vocabulary(size: 50_000)
        let bench = try await BenchStore.open(databaseURL: databaseURL, name: "search")
        let store = bench.store
        let app = BenchStore.app
        for uid in 0..<users {
            try await store.insertUser(appId: app, User(uid: "u\(uid)", name: "u\(uid)", createdAt: 1, updatedAt: 1))
        }
        var members: [[String]] = []
        for room in 0..<rooms {
            var group = Set<String>()
            while group.count < size { group.insert("u\(rng.next(below: users))") }
            members.append(Array(group).sorted())
            _ = try await store.apply([
                .createConversation(
                    .init(
                        appId: app, newId: "c\(room)", type: .group, creator: members[room][0],
                        participants: Array(members[room].dropFirst()), now: 1
                    )
                )
            ])[0].get()
        }

        note("filling \(messages) messages")
        let fillStart = Date()
        var phrases: [String] = []
        var batch: [Command] = []
        for index in 0..<messages {
            let room = rng.next(below: rooms)
            let words = (0..<(8 + rng.next(below: 9))).map { _ in vocabulary.word(rng) }
            if index % max(messages / 1000, 1) == 0 { phrases.append(words[2...4].joined(separator: " ")) }
            batch.append(
                .sendMessage(
                    .init(
                        appId: app, conversationId: "c\(room)", sender: members[room][rng.next(below: size)],
                        messageId: "m\(index)", clientMessageId: nil, parts: [.text(words.joined(separator: " "))],
                        metadata: nil, alert: nil, now: 1_000 + Int64(index)
                    )
                )
            )
            if batch.count == 512 || index == messages - 1 {
                for result in try await store.apply(batch) { _ = try result.get() }
                batch.removeAll(keepingCapacity: true)
                if (index + 1) % 100_000 < 512 { note("\(index + 1) stored") }
            }
        }
        let fillSeconds = Date().timeIntervalSince(fillStart)

        note("filing")
        let cpuBefore = ProcessCPU.seconds()
        var filed = 0
        while true {
            let count = try await store.fileSearchIndex(limit: 1000)
            filed += count
            if count < 1000 { break }
        }
        let filing = (ProcessCPU.seconds() - cpuBefore) * 1_000_000 / Double(max(messages, 1))
        note("filed \(filed) (\(Format.fixed(filing, 1)) µs of CPU a message; 0 filed: written with each message)")

        let kinds: [(String, () -> String)] = [
            ("common", { vocabulary.words[0] }),
            ("rare", { vocabulary.words[20_000] }),
            ("phrase", { "\"\(phrases[Int.random(in: 0..<phrases.count)])\"" }),
        ]
        var searches: [String: [Double]] = [:]
        var line: [String] = []
        for (kind, text) in kinds {
            for scope in ["user", "conversation", "app"] {
                var times: [Double] = []
                var found = 0
                for _ in 0..<queries {
                    let room = rng.next(below: rooms)
                    let request = MessageSearchRequest(
                        appId: app, viewer: scope == "app" ? nil : members[room][0],
                        query: try SearchQuery.parse(text() + " "),
                        conversationId: scope == "conversation" ? "c\(room)" : nil, limit: limit
                    )
                    let start = Date()
                    found += try await store.searchMessages(request).messages.count
                    times.append(Date().timeIntervalSince(start) * 1000)
                }
                times.sort()
                let p50 = times[times.count / 2]
                let p99 = times[min(times.count - 1, times.count * 99 / 100)]
                let mean = Double(found) / Double(queries)
                searches["\(kind)/\(scope)"] = [p50, p99, mean]
                line.append(
                    "\(kind)/\(scope) p50=\(Format.ms(p50)) p99=\(Format.ms(p99)) found=\(Format.fixed(mean, 1))")
            }
        }
        try await bench.remove()
        print(
            "search: messages=\(messages) store=\(databaseURL == nil ? "sqlite" : "postgres") "
                + "fill=\(Format.fixed(fillSeconds, 0))s filing=\(Format.fixed(filing, 1))us/msg "
                + line.joined(separator: " ")
        )
        if let json {
            let figures = Figures(
                messages: messages, fillSeconds: fillSeconds, filingMicrosecondsPerMessage: filing, searches: searches
            )
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try encoder.encode(figures).write(to: URL(fileURLWithPath: json))
        }
    }

    private func note(_ text: String) { FileHandle.standardError.write(Data("[search] \(text)\n".utf8)) }
}

/// Made-up words ranked by frequency, drawn with a Zipf distribution (exponent 1): the first is in about one message in
/// two, the 20,000th in one in a few thousand.
struct Vocabulary {
    let words: [String]
    private let cumulative: [Double]

    init(size: Int) {
        let syllables = [
            "ka", "lo", "mi", "ru", "te", "sa", "no", "vi", "de", "po", "lu", "ze", "ta", "ri", "mo", "en",
        ]
        words = (0..<size).map { rank in
            var value = rank
            var word = ""
            repeat {
                word += syllables[value % syllables.count]
                value /= syllables.count
            } while value > 0
            return word + (rank < 16 ? "" : "x")
        }
        var total = 0.0
        cumulative = (1...size).map { rank in
            total += 1 / Double(rank)
            return total
        }
    }

    func word(_ rng: SeededDraws) -> String {
        let target = rng.unit() * cumulative[cumulative.count - 1]
        var low = 0
        var high = cumulative.count - 1
        while low < high {
            let middle = (low + high) / 2
            if cumulative[middle] < target { low = middle + 1 } else { high = middle }
        }
        return words[low]
    }
}

/// libc's seeded generator (`drand48`), so that every run stores the same messages.
struct SeededDraws {
    init(seed: Int) { srand48(seed) }
    func next(below bound: Int) -> Int { min(Int(drand48() * Double(bound)), bound - 1) }
    func unit() -> Double { drand48() }
}

/// The process's CPU time (user and system), in seconds.
enum ProcessCPU {
    static func seconds() -> Double {
        var usage = rusage()
        getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1_000_000
    }
}
