import ArgumentParser
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import ParleyProtocol
import ParleyStoreSQLite

/// `soak` (issue 47): a mixed load for a long time, sampled every few seconds, then checked.
///
/// Small groups talk at `--rate`, a large group gets a message every `--fanout-interval` seconds, recently acked
/// messages are edited and reacted to; meanwhile sockets are closed cleanly (`--churn-rate`) and reset
/// (`--cut-rate`) and come back with `resume`, one socket now and then stops reading while its group is flooded
/// until the server closes it with 4008 (`--slow-every`), and files go up and down over REST (`--upload-every`),
/// some of them sent as attachments. Every `--sample-interval` seconds a line goes to `--samples` (CSV): the server's
/// resident memory, descriptors, CPU, threads, WAL and database sizes, its `/metrics` gauges, the load tool's counts.
///
/// At the end the load stops, the last answers and deliveries are waited for, and the stored history (REST, paged)
/// of every conversation is compared with what was acked: each acked message stored exactly once, no client message
/// id twice, the last acked edit and every acked reaction visible; every member's position in every conversation is
/// its end, with no event skipped or repeated on the way (replays after each resume included). Then the flatness of
/// the samples after `--warmup`: resident memory, descriptors less connections, the WAL. The run exits non-zero when
/// a rule fails.
struct SoakScenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak",
        abstract: "Mixed load for --duration seconds, sampled to a CSV; then: acked messages stored once, flat curves.",
        discussion: """
            Plot the samples with: python3 Benchmarks/soak-plot.py samples.csv docs/soak.svg
            --timeout is raised to at least --duration + 900 s (setup, drain and the history reads).
            """
    )

    @Option(help: "Seconds of load.")
    var duration: Double = 3600

    @Option(help: "Seconds at the start that the flatness rules leave out (default: a tenth of --duration).")
    var warmup: Double?

    @Option(help: "Seconds between two samples.")
    var sampleInterval: Double = 5

    @Option(help: "The samples' CSV file (written as the run goes).")
    var samples: String = "samples.csv"

    @Option(help: "Small groups.")
    var rooms: Int = 200

    @Option(help: "Members per small group (each one socket).")
    var size: Int = 5

    @Option(name: [.short, .customLong("rate")], help: "Messages per second in the small groups, all together.")
    var rate: Double = 150

    @Option(help: "Extra bytes of text per small-group and large-group message.")
    var padding: Int = 64

    @Option(help: "Members of the large group (the first users of the small groups; 0: none).")
    var fanoutSize: Int = 200

    @Option(help: "Seconds between two messages in the large group.")
    var fanoutInterval: Double = 5

    @Option(help: "Edits per second of recently acked messages, by their senders.")
    var editRate: Double = 2

    @Option(help: "Reactions per second to recently acked messages, by members of their group.")
    var reactionRate: Double = 3

    @Option(help: "Sockets per second closed cleanly (close frame 1000), each reconnecting with resume.")
    var churnRate: Double = 2

    @Option(help: "Sockets per minute reset (TCP RST, no close handshake), each reconnecting with resume.")
    var cutRate: Double = 6

    @Option(help: "Longest time, in seconds, a closed or reset socket stays away before it reconnects (at least 0.2).")
    var awayMax: Double = 3

    @Option(help: "Seconds between two slow consumers (the first at half of it; 0: none).")
    var slowEvery: Double = 180

    @Option(
        help: """
            Seconds to wait at most for the server to close a slow consumer (4008, or 1001 when its heartbeat \
            notices first).
            """
    )
    var slowTimeout: Double = 90

    @Option(help: "Messages per second flooding a slow consumer's group.")
    var slowRate: Double = 40

    @Option(
        help: """
            Flood messages per slow consumer at most: past the server's queue (4 MiB) and the socket buffers, and \
            below what a replay sends (1,000 events per conversation).
            """
    )
    var slowMaxMessages: Int = 400

    @Option(help: "KiB of text of each of those messages.")
    var slowMessageKib: Int = 48

    @Option(help: "Seconds between two uploads (each downloaded back and compared; 0: none).")
    var uploadEvery: Double = 5

    @Option(help: "Smallest upload, in KiB.")
    var uploadMinKib: Int = 64

    @Option(help: "Largest upload, in KiB.")
    var uploadMaxKib: Int = 2048

    @Option(help: "Every n-th upload is then sent as a message's file part (0: none).")
    var attachEvery: Int = 4

    @Option(help: "Seconds to wait after the load for every socket to be back and every frame answered.")
    var drainTimeout: Double = 60

    @Option(help: "Flatness: resident memory may grow by this percent between the first and last tenth after warm-up.")
    var rssGrowthPercent: Double = 10

    @Option(help: "Flatness: ... or by this many MiB, whichever is more.")
    var rssGrowthMib: Double = 16

    @Option(help: "Flatness: descriptors less connections may grow by this many between those tenths.")
    var fdSlack: Int = 32

    @Option(
        help: """
            Flatness: the largest WAL after warm-up, in MiB (default: the checkpointer's restart threshold, \
            \(SQLiteStore.defaultRestartThreshold) frames of 4 KiB pages).
            """
    )
    var walLimitMib: Double?

    @Option(
        help: """
            The token of the server's /metrics on its main port: given to the server the bench starts (a random one \
            by default), needed for an attached server started with --metrics-token.
            """
    )
    var metricsToken: String?

    @Option(help: "The attached server's data directory (for the WAL and database sizes).")
    var dataDir: String?

    @OptionGroup var server: ServerOptions
    @OptionGroup var client: ClientOptions

    struct Parameters: Codable, Sendable {
        var duration: Double
        var warmup: Double
        var sampleInterval: Double
        var rooms: Int
        var size: Int
        var rate: Double
        var fanoutSize: Int
        var fanoutInterval: Double
        var editRate: Double
        var reactionRate: Double
        var churnRate: Double
        var cutRatePerMinute: Double
        var slowEvery: Double
        var uploadEvery: Double
        var uploadKiB: [Int]
        var attachEvery: Int
        var storage: String
    }

    /// One rule of the verdict.
    struct Rule: Codable, Sendable {
        var name: String
        var passed: Bool
        var detail: String
    }

    /// What the stored history showed.
    struct Stored: Codable, Sendable {
        var conversations = 0
        /// Messages in the histories, all of them (the groups' creation events are not messages).
        var messages = 0
        /// Acked messages found exactly once with their client message id and position.
        var found = 0
        /// Acked messages missing from the history.
        var lost = 0
        /// Acked messages listed more than once, and client message ids stored more than once.
        var duplicated = 0
        /// Acked messages stored with another client message id or position than the ack said.
        var mismatched = 0
        var editsChecked = 0
        var editsWrong = 0
        var reactionsChecked = 0
        var reactionsWrong = 0
        var attachmentsChecked = 0
        var attachmentsWrong = 0
        /// Member positions below their conversation's end after the drain (events never delivered).
        var deliveryTail = 0
    }

    /// Uploads and downloads.
    struct Transfers: Codable, Sendable {
        var uploads = 0
        var mebibytes = 0.0
        /// Downloads whose bytes differed from the upload's.
        var mismatched = 0
        /// Requests that failed (status or connection).
        var failed = 0
        var attached = 0
        var notes: [String] = []
    }

    /// Slow consumers.
    struct Slow: Codable, Sendable {
        var episodes = 0
        /// Episodes that ended with the server's 4008 close.
        var closed = 0
        /// Episodes the server ended otherwise: by close code (1001: its heartbeat).
        var closedOtherwise: [String: Int] = [:]
        /// Episodes the server had not ended within `--slow-timeout`.
        var notClosed = 0
        /// Episodes the end of the load cut short before the server closed the socket (not judged).
        var cutShort = 0
        var floodMessages = 0
        /// Seconds from the first flood message to the close, per episode the server ended.
        var secondsToClose: [Double] = []
    }

    /// A curve's first and last tenth after warm-up (medians) and its largest value there.
    struct Curve: Codable, Sendable {
        var first: Double
        var last: Double
        var max: Double
    }

    struct Figures: Codable, Sendable {
        var passed: Bool
        var rules: [Rule]
        var counts: SoakCounts
        var stored: Stored
        var transfers: Transfers
        var slow: Slow
        var unanswered: Int
        var samples: Int
        var rssMiB: Curve?
        var descriptorsLessConnections: Curve?
        var walMiB: Curve?
        var cpuPercent: Curve?
        var queuedBytesMax: Double?
        var databaseMiB: Curve?
        var closesByCode: [String: Double]
        var ackLatency: LatencySummary
        var deliveryLatency: LatencySummary
        var serverLogWarnings: Int?
        var notes: [String]
    }

    func validate() throws {
        guard duration > 0, rooms > 0, size >= 2, rate >= 0, sampleInterval > 0 else {
            throw ValidationError("--duration, --rooms, --sample-interval > 0; --size >= 2")
        }
        guard uploadMinKib > 0, uploadMaxKib >= uploadMinKib else {
            throw ValidationError("0 < --upload-min-kib <= --upload-max-kib")
        }
        guard slowMessageKib > 0, slowMessageKib < 64 else {
            throw ValidationError("--slow-message-kib: 1-63 (a message holds at most 64 KiB)")
        }
    }

    func run() async throws {
        let warmup = self.warmup ?? duration / 10
        let token = metricsToken ?? (0..<4).map { _ in String(UInt64.random(in: 0...UInt64.max), radix: 16) }.joined()
        var serverOptions = server
        if server.serverURL == nil, !server.serverArguments.contains(where: { $0.hasPrefix("--metrics-token") }) {
            serverOptions.serverArguments += ["--metrics-token", token]
        }
        var options = client
        options.timeout = max(client.timeout, Int(duration.rounded(.up)) + 900)
        try await BenchRun.run(scenario: "soak", server: serverOptions, options: options) { run in
            try await soak(run: run, warmup: warmup, token: token)
        }
    }

    private func soak(run: BenchRun, warmup: Double, token: String) async throws {
        // Users, groups, who is in what.
        let prefix = "k\(run.runID)-"
        let people = rooms * size
        let fanoutMembers = fanoutSize > 1 ? min(fanoutSize, people) : 0
        run.note("creating \(people) users, \(rooms) groups of \(size) and a group of \(fanoutMembers)")
        let tokens = try await run.provisioner.users(prefix: prefix, count: people)
        let size = self.size
        var conversationIds = try await run.provisioner.groups(
            (0..<rooms).map { room in (tokens[room * size], (1..<size).map { "\(prefix)\(room * size + $0)" }) })
        if fanoutMembers > 0 {
            conversationIds += try await run.provisioner.groups(
                [(tokens[0], (1..<fanoutMembers).map { "\(prefix)\($0)" })])
        }
        let fanout = fanoutMembers > 0 ? rooms : nil
        let conversationsOf = (0..<people).map { user in [user / size] + (user < fanoutMembers ? [rooms] : []) }
        var members = (0..<rooms).map { room in Array(room * size..<(room + 1) * size) }
        if fanoutMembers > 0 { members.append(Array(0..<fanoutMembers)) }
        let clients = SoakClients(
            setup: SoakClients.Setup(
                tokens: tokens, conversationIds: conversationIds, conversationsOf: conversationsOf, members: members,
                marker: Marker(runID: run.runID), away: 0.2...max(0.2, awayMax)),
            fleet: run.fleet)

        run.note("connecting \(people) sockets")
        let batch = max(1, min(run.options.concurrency, 256))
        let deadline = Monotonic.nanoseconds() + 180_000_000_000
        for first in stride(from: 0, to: people, by: batch) {
            let last = min(first + batch, people)
            for user in first..<last { clients.connect(user) }
            while clients.settled().live < last, Monotonic.nanoseconds() < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        guard clients.settled().live == people else {
            clients.stop()
            throw BenchError(
                "only \(clients.settled().live) of \(people) sockets connected: \(clients.counts.connectFailureKinds); "
                    + "not live: \(clients.notLive().prefix(10)); \(clients.outcome().notes.prefix(5))")
        }
        // The members' presence events settle.
        try await Task.sleep(for: .seconds(2))

        let scraper = try MetricsScraper(server: run.server, token: token, group: run.group)
        let before = await scraper.scrape()
        if before == nil {
            run.note("no /metrics (pass --metrics-token for an attached server): its columns stay empty")
        }
        let dataDirectory = dataDir ?? run.server.dataDirectories.first
        let sqlite = server.databaseURL == nil && dataDirectory != nil
        let start = Monotonic.nanoseconds()
        let sampler = try SoakSampler(
            path: samples, server: run.server, dataDirectory: sqlite ? dataDirectory : nil,
            scraper: before == nil ? nil : scraper, clients: clients, start: start, warmup: warmup)
        let sampling = Task { await sampler.run(interval: sampleInterval) }
        run.startMeasuring()
        let end = start + UInt64(duration * 1e9)
        run.note(
            "load for \(Int(duration)) s (warm-up \(Int(warmup)) s), samples every \(sampleInterval) s to \(samples)")

        // The load: a pacing loop for the frequent parts, a task each for uploads and slow consumers.
        let numbers = NIOLockedValueBox(0)
        let nextNumber: @Sendable () -> Int = {
            numbers.withLockedValue { value in
                defer { value += 1 }
                return value
            }
        }
        let transfers = NIOLockedValueBox(Transfers())
        let slow = NIOLockedValueBox(Slow())
        await withTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                await drive(clients: clients, fanout: fanout, until: end, nextNumber: nextNumber, run: run)
            }
            if uploadEvery > 0 {
                tasks.addTask {
                    await uploads(
                        clients: clients, run: run, until: end, nextNumber: nextNumber, transfers: transfers)
                }
            }
            if slowEvery > 0 {
                tasks.addTask {
                    await slowConsumers(
                        clients: clients, scraper: before == nil ? nil : scraper, until: end, nextNumber: nextNumber,
                        slow: slow, run: run)
                }
            }
        }

        // Drain: every socket back, every frame answered, deliveries quiet.
        run.note("load over; waiting for the last answers and reconnections")
        let drainDeadline = Monotonic.nanoseconds() + UInt64(drainTimeout * 1e9)
        while Monotonic.nanoseconds() < drainDeadline {
            let settled = clients.settled()
            if settled.live == people && settled.pending == 0 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        _ = await waitUntilQuiet(quietFor: 1, deadlineSeconds: 15) { clients.counts.events }
        sampling.cancel()
        await sampling.value
        await sampler.sample()
        sampler.close()
        let after = await scraper.scrape()
        await scraper.close()

        run.note("reading the stored history of \(conversationIds.count) conversations")
        let outcome = clients.outcome()
        let stored: Stored
        do {
            stored = try await verify(
                run: run, conversationIds: conversationIds, outcome: outcome, conversationsOf: conversationsOf)
        } catch {
            clients.stop()
            throw error
        }
        clients.stop()

        // The verdict.
        let taken = sampler.taken
        let figures = verdict(
            samples: taken, warmup: warmup, outcome: outcome, stored: stored,
            transfers: transfers.withLockedValue { $0 }, slow: slow.withLockedValue { $0 }, before: before,
            after: after, sqlite: sqlite, clients: clients, logs: run.server.logPaths)
        for rule in figures.rules {
            run.note("rule \(rule.name): \(rule.passed ? "pass" : "FAIL") (\(rule.detail))")
        }
        for note in figures.notes.prefix(20) { run.note("note: \(note)") }
        let counts = outcome.counts
        func curve(_ curve: Curve?, _ digits: Int) -> String {
            curve.map { "\(Format.fixed($0.first, digits))->\(Format.fixed($0.last, digits))" } ?? "-"
        }
        let failed = figures.rules.filter { !$0.passed }.map(\.name)
        let errors = counts.errors.values.reduce(0, +)
        try run.report(
            line: "duration=\(Int(duration))s rooms=\(rooms)x\(size) rate=\(Format.fixed(rate, 0))/s "
                + "acked=\(counts.acked)/\(counts.sent) stored=\(stored.found) lost=\(stored.lost) "
                + "dup=\(stored.duplicated) delivered=\(counts.delivered) "
                + "delivery_lost=\(counts.deliveryGaps + stored.deliveryTail) "
                + "delivery_dup=\(counts.deliveryDuplicates) resumes=\(counts.resumesChecked) "
                + "4008=\(figures.slow.closed)/\(figures.slow.episodes) uploads=\(figures.transfers.uploads) "
                + "edits=\(counts.editsAcked) reactions=\(counts.reactionsAcked) errors=\(errors) "
                + "rss=\(curve(figures.rssMiB, 1))MiB fds-conns=\(curve(figures.descriptorsLessConnections, 0)) "
                + "wal_max=\(figures.walMiB.map { Format.fixed($0.max, 1) } ?? "-")MiB "
                + "verdict=\(failed.isEmpty ? "pass" : "FAIL(" + failed.joined(separator: ",") + ")")",
            parameters: Parameters(
                duration: duration, warmup: warmup, sampleInterval: sampleInterval, rooms: rooms, size: size,
                rate: rate, fanoutSize: fanoutMembers, fanoutInterval: fanoutInterval, editRate: editRate,
                reactionRate: reactionRate, churnRate: churnRate, cutRatePerMinute: cutRate, slowEvery: slowEvery,
                uploadEvery: uploadEvery, uploadKiB: [uploadMinKib, uploadMaxKib], attachEvery: attachEvery,
                storage: server.databaseURL == nil ? "sqlite" : "postgres"),
            figures: figures
        )
        guard failed.isEmpty else {
            throw BenchError("soak failed: \(failed.joined(separator: ", ")) (samples in \(samples))")
        }
    }

    // MARK: The load

    /// Small-group and large-group messages, edits, reactions, churn and cuts, each at its rate, from one loop that
    /// wakes every 20 ms and does what is due.
    private func drive(
        clients: SoakClients, fanout: Int?, until end: UInt64, nextNumber: @escaping @Sendable () -> Int, run: BenchRun
    ) async {
        struct Part {
            var perSecond: Double
            var due = 0.0
            let action: () -> Void
        }
        let rooms = self.rooms
        let padding = self.padding
        var parts = [
            Part(perSecond: rate) {
                clients.send(
                    conversation: Int.random(in: 0..<rooms), kind: .room, number: nextNumber(), padding: padding)
            },
            Part(perSecond: editRate) { clients.editOne() },
            Part(perSecond: reactionRate) { clients.reactOne() },
            Part(perSecond: churnRate) { clients.churnOne() },
            Part(perSecond: cutRate / 60) { clients.cutOne() },
        ]
        if let fanout, fanoutInterval > 0 {
            parts.append(
                Part(perSecond: 1 / fanoutInterval) {
                    clients.send(conversation: fanout, kind: .fanout, number: nextNumber(), padding: padding)
                })
        }
        var last = Monotonic.nanoseconds()
        var nextProgress = last + 60_000_000_000
        while true {
            let now = Monotonic.nanoseconds()
            guard now < end else { break }
            let seconds = Double(now - last) / 1e9
            last = now
            for index in parts.indices {
                parts[index].due += parts[index].perSecond * seconds
                while parts[index].due >= 1 {
                    parts[index].due -= 1
                    parts[index].action()
                }
            }
            if now >= nextProgress {
                nextProgress += 60_000_000_000
                let counts = clients.counts
                run.note(
                    "\(Int(Double(now - (end - UInt64(duration * 1e9))) / 1e9)) s: acked \(counts.acked)/\(counts.sent), "
                        + "delivered \(counts.delivered), resumes \(counts.resumesChecked), gaps \(counts.deliveryGaps), "
                        + "duplicates \(counts.deliveryDuplicates), errors \(counts.errors.values.reduce(0, +))")
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Every `--upload-every` seconds a file up to a random member's group, its link, the bytes back, compared; every
    /// `--attach-every`-th one then sent as a message's file part by its uploader.
    private func uploads(
        clients: SoakClients, run: BenchRun, until end: UInt64, nextNumber: @Sendable () -> Int,
        transfers: NIOLockedValueBox<Transfers>
    ) async {
        // Random bytes, sliced at random offsets behind a unique header: no two files alike, nothing compresses.
        var pool = [UInt8](repeating: 0, count: (uploadMaxKib + 64) * 1024)
        var generator = SystemRandomNumberGenerator()
        for index in pool.indices { pool[index] = UInt8.random(in: 0...255, using: &generator) }
        let target = run.provisioner.hostHeader
        var number = 0
        while Monotonic.nanoseconds() + UInt64(uploadEvery * 1e9) < end {
            try? await Task.sleep(for: .nanoseconds(Int64(uploadEvery * 1e9)))
            number += 1
            let room = Int.random(in: 0..<rooms)
            guard let user = clients.liveMember(of: room) else { continue }
            let bytes = Int.random(in: uploadMinKib...uploadMaxKib) * 1024
            var body = ByteBuffer()
            body.reserveCapacity(bytes)
            body.writeInteger(UInt64(number))
            body.writeString(run.runID)
            let offset = Int.random(in: 0...(pool.count - bytes))
            body.writeBytes(pool[offset..<(offset + bytes - body.readableBytes)])
            let conversation = clients.setup.conversationIds[room]
            let headers = [("Authorization", "Bearer \(clients.setup.tokens[user])")]
            var note: String?
            var attachment: String?
            var matched = false
            do {
                let connection = try await HTTPConnection.connect(
                    to: try run.provisioner.target, host: target, group: run.group)
                defer { Task { await connection.close() } }
                let uploaded = try await connection.request(
                    .POST, "/v1/conversations/\(conversation)/attachments?name=soak-\(number).bin", headers: headers,
                    body: body, contentType: "application/octet-stream")
                guard uploaded.status == 201 else {
                    throw HTTPError(description: "upload: \(uploaded.status) \(uploaded.text.prefix(200))")
                }
                let id = try uploaded.decode(Attachment.self).id
                let link = try await connection.request(
                    .GET, "/v1/conversations/\(conversation)/attachments/\(id)", headers: headers)
                guard link.status == 200 else {
                    throw HTTPError(description: "link: \(link.status) \(link.text.prefix(200))")
                }
                let downloaded = try await connection.request(.GET, try link.decode(AttachmentLink.self).url)
                guard downloaded.status == 200 else { throw HTTPError(description: "download: \(downloaded.status)") }
                matched = downloaded.body == body
                if !matched { note = "upload \(number): \(downloaded.body.readableBytes) bytes back of \(bytes)" }
                attachment = id
            } catch {
                note = "upload \(number): \(error)"
            }
            if let attachment, matched, attachEvery > 0, number % attachEvery == 0 {
                clients.send(
                    conversation: room, from: user, kind: .attachment, number: nextNumber(), padding: 0,
                    fileID: attachment, queueIfAway: true)
                transfers.withLockedValue { $0.attached += 1 }
            }
            transfers.withLockedValue { transfers in
                transfers.uploads += 1
                transfers.mebibytes += Double(bytes) / (1024 * 1024)
                if attachment == nil { transfers.failed += 1 } else if !matched { transfers.mismatched += 1 }
                if let note, transfers.notes.count < 10 { transfers.notes.append(note) }
            }
        }
    }

    /// Every `--slow-every` seconds (the first at half of it) a live member of a random small group stops reading
    /// while the others flood the group with large messages (`--slow-max-messages` at most), until the server closes
    /// the connection (seen in `parley_websocket_closes_total`: 4008, or 1001 if its heartbeat noticed first) or
    /// `--slow-timeout`; then the socket is reset and the member reconnects with `resume`.
    private func slowConsumers(
        clients: SoakClients, scraper: MetricsScraper?, until end: UInt64, nextNumber: @Sendable () -> Int,
        slow: NIOLockedValueBox<Slow>, run: BenchRun
    ) async {
        var next = Monotonic.nanoseconds() + UInt64(slowEvery / 2 * 1e9)
        let padding = slowMessageKib * 1024
        while true {
            // An episode longer than --slow-every delays the next one; none starts in the last 15 s.
            next = max(next, Monotonic.nanoseconds())
            guard next + 15_000_000_000 < end else { break }
            try? await Task.sleep(for: .nanoseconds(Int64(next - Monotonic.nanoseconds())))
            next += UInt64(slowEvery * 1e9)
            let room = Int.random(in: 0..<rooms)
            let closesBefore = await scraper?.scrape()?.closesByCode
            guard let user = clients.liveMember(of: room), let socket = clients.makeSlow(user) else { continue }
            let began = Monotonic.nanoseconds()
            let limit = min(end, began + UInt64(slowTimeout * 1e9))
            var flood = 0
            var closedWith: String?
            var nextScrape = began + 500_000_000
            while Monotonic.nanoseconds() < limit, clients.isCurrent(user, socket) {
                if flood < slowMaxMessages,
                    clients.send(conversation: room, kind: .burst, number: nextNumber(), padding: padding)
                {
                    flood += 1
                }
                if Monotonic.nanoseconds() >= nextScrape, let closesBefore {
                    nextScrape += 500_000_000
                    // 4008 is the slow consumer's close; 1001 the heartbeat's (the other sockets close with 1000 or
                    // 1006).
                    if let closes = await scraper?.scrape()?.closesByCode,
                        let code = ["4008", "1001"].first(where: { (closes[$0] ?? 0) > (closesBefore[$0] ?? 0) })
                    {
                        closedWith = code
                        break
                    }
                }
                try? await Task.sleep(for: .nanoseconds(Int64(1e9 / max(slowRate, 1))))
            }
            let seconds = Monotonic.seconds(since: began)
            let cutShort = closedWith == nil && Monotonic.nanoseconds() >= end && seconds < slowTimeout
            clients.endSlow(user, socket)
            run.note(
                "slow consumer \(user): "
                    + (closedWith.map { "closed with \($0)" }
                        ?? (cutShort ? "the load ended first" : "not closed by the server"))
                    + " after \(Format.fixed(seconds, 1)) s, \(flood) messages of \(slowMessageKib) KiB")
            slow.withLockedValue { slow in
                slow.episodes += 1
                slow.floodMessages += flood
                switch closedWith {
                case "4008": slow.closed += 1
                case let code?: slow.closedOtherwise[code, default: 0] += 1
                case nil where cutShort: slow.cutShort += 1
                case nil: slow.notClosed += 1
                }
                if closedWith != nil { slow.secondsToClose.append((seconds * 10).rounded() / 10) }
            }
        }
    }

    // MARK: The checks

    /// One stored message, as much of it as the checks need.
    private struct StoredMessage: Sendable {
        var id: String
        var seq: Int64
        var clientMessageId: String?
        var text: String?
        var fileIDs: [String]
        var reactions: [String: Int]
    }

    /// Reads every conversation's history (REST, pages of 200, with the app's REST API key) and compares it with the
    /// acks, the edits, the reactions and the members' positions.
    private func verify(
        run: BenchRun, conversationIds: [String], outcome: SoakClients.Outcome, conversationsOf: [[Int]]
    ) async throws -> Stored {
        let apiKey = run.server.restAPIKey
        let histories = try await Provisioner(
            server: run.provisioner.server, group: run.provisioner.group, parallelism: 8
        ).parallel(count: conversationIds.count) { connection, index -> (lastSeq: Int64, messages: [StoredMessage]) in
            var messages: [StoredMessage] = []
            var lastSeq: Int64?
            var cursor: String?
            repeat {
                let query = "limit=200" + (cursor.map { "&cursor=\($0)" } ?? "")
                let answer = try await connection.request(
                    .GET, "/v1/conversations/\(conversationIds[index])/messages?\(query)",
                    headers: [("X-Parley-Api-Key", apiKey)])
                guard answer.status == 200 else {
                    throw HTTPError(description: "GET messages: \(answer.status) \(answer.text.prefix(200))")
                }
                let page = try answer.decode(MessagePage.self)
                if lastSeq == nil { lastSeq = page.lastSeq }
                for message in page.messages {
                    let text = message.text
                    messages.append(
                        StoredMessage(
                            id: message.id, seq: message.seq, clientMessageId: message.clientMessageId?.uppercased(),
                            text: text.hasPrefix("soak edit ") ? text : nil, fileIDs: message.files.map(\.id),
                            reactions: Dictionary(
                                (message.reactions ?? []).map { ($0.key, $0.count) }, uniquingKeysWith: +)))
                }
                cursor = page.nextCursor
            } while cursor != nil
            return (lastSeq ?? 0, messages)
        }

        var stored = Stored(conversations: conversationIds.count)
        var acked = Array(repeating: [SoakAckedSend](), count: conversationIds.count)
        for send in outcome.acked { acked[Int(send.conversation)].append(send) }
        var byID: [String: StoredMessage] = [:]
        for (index, history) in histories.enumerated() {
            stored.messages += history.messages.count
            var ids: [String: Int] = [:]
            var clientIds: [String: Int] = [:]
            for message in history.messages {
                ids[message.id, default: 0] += 1
                if let id = message.clientMessageId { clientIds[id, default: 0] += 1 }
                byID[message.id] = message
            }
            stored.duplicated += clientIds.values.reduce(0) { $0 + max(0, $1 - 1) }
            for send in acked[index] {
                switch ids[send.messageId] ?? 0 {
                case 0:
                    stored.lost += 1
                    continue
                case 1:
                    break
                default:
                    stored.duplicated += 1
                }
                guard let message = byID[send.messageId] else { continue }
                if message.clientMessageId == send.clientMessageId.uuidString && message.seq == send.seq {
                    stored.found += 1
                } else {
                    stored.mismatched += 1
                }
                if let file = send.fileID {
                    stored.attachmentsChecked += 1
                    if !message.fileIDs.contains(file) { stored.attachmentsWrong += 1 }
                }
            }
        }
        for (messageId, number) in outcome.lastEdit {
            stored.editsChecked += 1
            if byID[messageId]?.text != SoakClients.editText(number) { stored.editsWrong += 1 }
        }
        for (messageId, keys) in outcome.reactions {
            stored.reactionsChecked += 1
            if byID[messageId]?.reactions != keys { stored.reactionsWrong += 1 }
        }
        for (user, conversations) in conversationsOf.enumerated() {
            for conversation in conversations {
                let end = histories[conversation].lastSeq
                let position = outcome.positions[user][conversation] ?? 0
                if position < end { stored.deliveryTail += Int(end - position) }
            }
        }
        return stored
    }

    /// The rules, from the samples and the checks.
    private func verdict(
        samples: [SoakSample], warmup: Double, outcome: SoakClients.Outcome, stored: Stored, transfers: Transfers,
        slow: Slow, before: MetricsScraper.Scrape?, after: MetricsScraper.Scrape?, sqlite: Bool,
        clients: SoakClients, logs: [String]
    ) -> Figures {
        let counts = outcome.counts
        var rules: [Rule] = []
        func rule(_ name: String, _ passed: Bool, _ detail: String) {
            rules.append(Rule(name: name, passed: passed, detail: detail))
        }
        rule(
            "stored", stored.lost == 0 && stored.duplicated == 0 && stored.mismatched == 0 && counts.acked > 0,
            "\(stored.found) of \(counts.acked) acked messages stored once; lost \(stored.lost), twice "
                + "\(stored.duplicated), other id or position \(stored.mismatched)")
        let errors = counts.errors.values.reduce(0, +)
        rule(
            "answered", outcome.unanswered == 0 && errors == 0,
            "\(outcome.unanswered) frames unanswered after the drain; errors \(counts.errors)")
        let lostDeliveries = counts.deliveryGaps + stored.deliveryTail
        rule(
            "deliveries", lostDeliveries == 0 && counts.deliveryDuplicates == 0 && counts.resyncs == 0,
            "\(counts.events) events to members (\(counts.delivered) messages), \(counts.resumesChecked) resumes "
                + "checked, \(counts.replayed) events replayed; missed \(lostDeliveries), twice "
                + "\(counts.deliveryDuplicates), resyncs \(counts.resyncs), repeats the protocol allows "
                + "\(counts.overlap)")
        rule(
            "edits and reactions", stored.editsWrong == 0 && stored.reactionsWrong == 0 && stored.attachmentsWrong == 0,
            "\(stored.editsChecked) edited messages (\(stored.editsWrong) not as last acked), "
                + "\(stored.reactionsChecked) with reactions (\(stored.reactionsWrong) other counts), "
                + "\(stored.attachmentsChecked) attachments (\(stored.attachmentsWrong) missing)")
        rule(
            "uploads", transfers.failed == 0 && transfers.mismatched == 0,
            "\(transfers.uploads) files (\(Format.fixed(transfers.mebibytes, 1)) MiB) up and back, "
                + "\(transfers.mismatched) differed, \(transfers.failed) failed, \(transfers.attached) attached")
        rule(
            "slow consumers", slow.closed == slow.episodes - slow.cutShort,
            "\(slow.closed) of \(slow.episodes) closed with 4008; otherwise \(slow.closedOtherwise), not closed "
                + "within \(Int(slowTimeout)) s \(slow.notClosed), cut short by the end of the load \(slow.cutShort); "
                + "seconds to the close \(slow.secondsToClose)")

        // Flatness after warm-up: the median of the first tenth against the median of the last.
        let measured = samples.filter { !$0.warmup && $0.elapsed <= duration + 0.5 }
        let span = max(duration - warmup, sampleInterval)
        func curve(_ value: (SoakSample) -> Double?) -> Curve? {
            let points = measured.compactMap { sample in value(sample).map { (sample.elapsed, $0) } }
            guard let firstPoint = points.first, let lastPoint = points.last else { return nil }
            var head = points.filter { $0.0 <= warmup + span / 10 }.map(\.1)
            var tail = points.filter { $0.0 >= duration - span / 10 }.map(\.1)
            if head.isEmpty { head = [firstPoint.1] }
            if tail.isEmpty { tail = [lastPoint.1] }
            return Curve(first: median(head), last: median(tail), max: points.map(\.1).max() ?? 0)
        }
        let rss = curve(\.rssMiB)
        if let rss {
            let allowed = max(rss.first * rssGrowthPercent / 100, rssGrowthMib)
            rule(
                "rss flat", rss.last - rss.first <= allowed,
                "median \(Format.fixed(rss.first, 1)) MiB in the first tenth after warm-up, "
                    + "\(Format.fixed(rss.last, 1)) MiB in the last (at most +\(Format.fixed(allowed, 1)) MiB)")
        } else {
            rule("rss flat", false, "no samples of the server's memory (attached without --server-pid?)")
        }
        let descriptors = curve { sample in
            sample.descriptors.flatMap { fds in sample.connections.map { Double(fds) - $0 } }
        }
        if let descriptors {
            rule(
                "descriptors flat", descriptors.last - descriptors.first <= Double(fdSlack),
                "descriptors less connections: median \(Format.fixed(descriptors.first, 0)) in the first tenth, "
                    + "\(Format.fixed(descriptors.last, 0)) in the last (at most +\(fdSlack)); largest "
                    + "\(Format.fixed(descriptors.max, 0))")
        } else {
            rule("descriptors flat", false, "no samples of descriptors and connections (/proc, /metrics)")
        }
        let wal = curve(\.walMiB)
        if sqlite {
            // A WAL frame is a 4 KiB page and its 24-byte header; the file starts with 32 bytes.
            let limit =
                walLimitMib ?? (Double(SQLiteStore.defaultRestartThreshold) * (4096 + 24) + 32) / (1024 * 1024)
            if let wal {
                rule(
                    "wal bounded", wal.max <= limit,
                    "largest \(Format.fixed(wal.max, 1)) MiB after warm-up (at most \(Format.fixed(limit, 1)) MiB: "
                        + "the checkpointer's restart threshold); median \(Format.fixed(wal.first, 1)) -> "
                        + "\(Format.fixed(wal.last, 1)) MiB")
            } else {
                rule("wal bounded", false, "no samples of the WAL")
            }
        }

        var closes: [String: Double] = [:]
        for (code, value) in after?.closesByCode ?? [:] {
            let delta = value - (before?.closesByCode[code] ?? 0)
            if delta > 0 { closes[code] = delta }
        }
        var notes = outcome.notes + transfers.notes
        let warnings = Self.serverLogWarnings(logs)
        notes += warnings.lines
        return Figures(
            passed: rules.allSatisfy(\.passed), rules: rules, counts: counts, stored: stored, transfers: transfers,
            slow: slow, unanswered: outcome.unanswered, samples: samples.count, rssMiB: rss,
            descriptorsLessConnections: descriptors, walMiB: wal, cpuPercent: curve(\.cpuPercent),
            queuedBytesMax: measured.compactMap(\.queuedBytes).max(), databaseMiB: curve(\.databaseMiB),
            closesByCode: closes, ackLatency: clients.ackLatency.summary,
            deliveryLatency: clients.deliveryLatency.summary, serverLogWarnings: logs.isEmpty ? nil : warnings.count,
            notes: notes)
    }

    private func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    /// Lines of the server's log at warning level or above: how many, and the first few.
    private static func serverLogWarnings(_ logs: [String]) -> (count: Int, lines: [String]) {
        var count = 0
        var lines: [String] = []
        for path in logs {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { continue }
            for line in text.split(separator: "\n")
            where line.contains(" warning ") || line.contains(" error ") || line.contains(" critical ") {
                count += 1
                if lines.count < 5 { lines.append("server log: " + String(line.prefix(300))) }
            }
        }
        return (count, lines)
    }
}
