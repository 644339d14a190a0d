import Foundation
import NIOConcurrencyHelpers
import NIOCore

/// The server's `/metrics` (docs/PROTOCOL.md, "Metrics"), read on its main port with the metrics token, over one
/// keep-alive connection that is opened again after a failure.
actor MetricsScraper {
    /// One scrape: every sample's value summed over its labels, and the WebSocket closes by code.
    struct Scrape: Sendable {
        var values: [String: Double]
        var closesByCode: [String: Double]

        func value(_ name: String) -> Double? { values[name] }
        var closes4008: Double { closesByCode["4008"] ?? 0 }
    }

    private let target: SocketAddress
    private let host: String
    private let token: String
    private let group: any EventLoopGroup
    private var connection: HTTPConnection?

    init(server: ServerUnderTest, token: String, group: any EventLoopGroup) throws {
        target = try SocketAddress(ipAddress: server.host, port: server.port)
        host = "\(server.host):\(server.port)"
        self.token = token
        self.group = group
    }

    /// Nil when the server did not answer 200 (twice: the second time on a new connection).
    func scrape() async -> Scrape? {
        for _ in 0..<2 {
            do {
                let http: HTTPConnection
                if let connection {
                    http = connection
                } else {
                    http = try await HTTPConnection.connect(to: target, host: host, group: group)
                    connection = http
                }
                let answer = try await http.request(.GET, "/metrics", headers: [("Authorization", "Bearer \(token)")])
                guard answer.status == 200 else { return nil }
                return Self.parse(answer.text)
            } catch {
                if let broken = connection {
                    connection = nil
                    await broken.close()
                }
            }
        }
        return nil
    }

    func close() async {
        if let connection { await connection.close() }
        connection = nil
    }

    /// The Prometheus text format: `name{labels} value` lines, `#` comments.
    static func parse(_ text: String) -> Scrape {
        var values: [String: Double] = [:]
        var closes: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                continue
            }
            let series = line[..<space]
            let name = series.firstIndex(of: "{").map { String(series[..<$0]) } ?? String(series)
            values[name, default: 0] += value
            if name == "parley_websocket_closes_total", let range = series.range(of: #"code=""#) {
                let code = series[range.upperBound...].prefix { $0 != "\"" }
                closes[String(code), default: 0] += value
            }
        }
        return Scrape(values: values, closesByCode: closes)
    }
}

/// One line of the soak's samples.
struct SoakSample: Codable, Sendable {
    /// Seconds since the load started.
    var elapsed: Double
    /// Within `--warmup`.
    var warmup: Bool
    var rssMiB: Double?
    var descriptors: Int?
    /// The server's CPU (user + system) since the previous sample, in percent of one core.
    var cpuPercent: Double?
    var threads: Int?
    /// The database's WAL file (`parley.sqlite-wal`).
    var walMiB: Double?
    /// The search index's WAL file (`parley-search.sqlite-wal`).
    var searchWALMiB: Double?
    /// The database file (`parley.sqlite`).
    var databaseMiB: Double?
    var queuedBytes: Double?
    var connections: Double?
    var messagesStored: Double?
    var closes4008: Double?
    var sent: Int
    var acked: Int
    var delivered: Int
    var errors: Int
    /// Connections after the first ones (every resume).
    var reconnects: Int
    var benchRSSMiB: Double?
    var benchCPUPercent: Double?
    /// Since the previous sample.
    var ackP99ms: Double
    var deliveryP99ms: Double

    static let header =
        "elapsed_s,warmup,rss_mib,fds,cpu_pct,threads,wal_mib,search_wal_mib,db_mib,queued_bytes,connections,"
        + "messages_stored,closes_4008,sent,acked,delivered,errors,reconnects,bench_rss_mib,bench_cpu_pct,"
        + "ack_p99_ms,delivery_p99_ms"

    var csv: String {
        func number(_ value: Double?, _ digits: Int) -> String { value.map { Format.fixed($0, digits) } ?? "" }
        let fields: [String] = [
            Format.fixed(elapsed, 1), warmup ? "1" : "0", number(rssMiB, 2), descriptors.map(String.init) ?? "",
            number(cpuPercent, 1), threads.map(String.init) ?? "", number(walMiB, 3), number(searchWALMiB, 3),
            number(databaseMiB, 2), number(queuedBytes, 0), number(connections, 0), number(messagesStored, 0),
            number(closes4008, 0), String(sent), String(acked), String(delivered), String(errors),
            String(reconnects), number(benchRSSMiB, 2), number(benchCPUPercent, 1), Format.fixed(ackP99ms, 2),
            Format.fixed(deliveryP99ms, 2),
        ]
        return fields.joined(separator: ",")
    }
}

/// Samples the server (/proc, its data directory, `/metrics`) and the soak's clients every few seconds, appending
/// each line to the samples file as it is taken (a run that dies keeps what it sampled).
final class SoakSampler: Sendable {
    private let server: ServerUnderTest
    private let dataDirectory: String?
    private let scraper: MetricsScraper?
    private let clients: SoakClients
    private let start: UInt64
    private let warmup: Double
    private let file: FileHandle
    private let samples = NIOLockedValueBox<[SoakSample]>([])
    private let previous = NIOLockedValueBox<(at: UInt64, server: Double?, bench: Double?)?>(nil)

    init(
        path: String, server: ServerUnderTest, dataDirectory: String?, scraper: MetricsScraper?,
        clients: SoakClients, start: UInt64, warmup: Double
    ) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data((SoakSample.header + "\n").utf8)) else {
            throw BenchError("Cannot write the samples to \(path)")
        }
        file = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        file.seekToEndOfFile()
        self.server = server
        self.dataDirectory = dataDirectory
        self.scraper = scraper
        self.clients = clients
        self.start = start
        self.warmup = warmup
    }

    /// Samples every `interval` seconds until cancelled.
    func run(interval: Double) async {
        while !Task.isCancelled {
            await sample()
            let next = start + UInt64(Double(samples.withLockedValue { $0.count }) * interval * 1e9)
            let now = Monotonic.nanoseconds()
            if next > now { try? await Task.sleep(for: .nanoseconds(Int64(next - now))) }
        }
    }

    /// Takes one sample now.
    func sample() async {
        let now = Monotonic.nanoseconds()
        let elapsed = Double(now &- start) / 1e9
        let pid = server.pid
        let serverCPU = server.cpuSeconds()
        let benchCPU = ProcFS.cpuSeconds(pid: getpid())
        let before = previous.withLockedValue { value in
            defer { value = (now, serverCPU, benchCPU) }
            return value
        }
        func percent(_ current: Double?, _ earlier: Double??) -> Double? {
            guard let current, let before, let earlier = earlier ?? nil, now > before.at else { return nil }
            return (current - earlier) * 100 / (Double(now - before.at) / 1e9)
        }
        let metrics = await scraper?.scrape()
        let counts = clients.counts
        let latency = clients.takeIntervalLatency()
        let files = dataDirectory.map { SoakFiles(directory: $0) }
        let mebibyte = 1024.0 * 1024.0
        let sample = SoakSample(
            elapsed: elapsed, warmup: elapsed < warmup, rssMiB: server.residentBytes().map { Double($0) / mebibyte },
            descriptors: pid.flatMap(ProcFS.openDescriptors), cpuPercent: percent(serverCPU, before?.server),
            threads: pid.flatMap(ProcFS.threads), walMiB: files?.size(files?.wal).map { $0 / mebibyte },
            searchWALMiB: files?.size(files?.searchWAL).map { $0 / mebibyte },
            databaseMiB: files?.size(files?.database).map { $0 / mebibyte },
            queuedBytes: metrics?.value("parley_websocket_queued_bytes"),
            connections: metrics?.value("parley_websocket_connections"),
            messagesStored: metrics?.value("parley_messages_stored_total"), closes4008: metrics?.closes4008,
            sent: counts.sent, acked: counts.acked, delivered: counts.delivered,
            errors: counts.errors.values.reduce(0, +), reconnects: max(0, counts.connections - clients.userCount),
            benchRSSMiB: ProcFS.residentBytes(pid: getpid()).map { Double($0) / mebibyte },
            benchCPUPercent: percent(benchCPU, before?.bench), ackP99ms: latency.ack.p99,
            deliveryP99ms: latency.delivery.p99
        )
        samples.withLockedValue { $0.append(sample) }
        file.write(Data((sample.csv + "\n").utf8))
    }

    var taken: [SoakSample] { samples.withLockedValue { $0 } }

    func close() {
        try? file.close()
    }
}

/// The files of a SQLite server's data directory that the soak watches.
struct SoakFiles {
    let database: String
    var wal: String { database + "-wal" }
    var searchWAL: String {
        let url = URL(fileURLWithPath: database)
        return url.deletingLastPathComponent()
            .appendingPathComponent(url.deletingPathExtension().lastPathComponent + "-search.sqlite-wal").path
    }

    init(directory: String) {
        database = directory + "/parley.sqlite"
    }

    /// The size of a file in bytes; nil when it does not exist.
    func size(_ path: String?) -> Double? {
        guard let path, let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let size = attributes[.size] as? NSNumber
        else { return nil }
        return size.doubleValue
    }
}

extension ProcFS {
    /// Open file descriptors of a process (the entries of /proc/<pid>/fd).
    static func openDescriptors(pid: Int32) -> Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd"))?.count
    }

    /// Threads of a process (`Threads:` of /proc/<pid>/status).
    static func threads(pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("Threads:") {
            return line.split(separator: "\t", omittingEmptySubsequences: true).last
                .flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        }
        return nil
    }
}
