import ArgumentParser
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import ParleyProtocol

/// `files`: attachments up and down (docs/PROTOCOL.md, "Attachments"). Uploads `--files` files of `--size-mib` each,
/// `--parallel` at a time, then downloads each through its signed link; reports MiB/s and the server's CPU per MiB
/// for each direction, and the server's peak resident memory. The server stores the bytes where it is told: its data
/// directory by default, S3-compatible storage with `--server-arg --s3-endpoint=...` and the other `--s3-*` options.
struct FilesScenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "files",
        abstract: "Attachment upload and download throughput (MiB/s) and server CPU per MiB."
    )

    @Option(help: "Files in all.")
    var files: Int = 16

    @Option(help: "Size of each file, in MiB.")
    var sizeMib: Int = 32

    @Option(help: "Transfers at a time, each on a connection of its own.")
    var parallel: Int = 2

    @OptionGroup var server: ServerOptions
    @OptionGroup var client: ClientOptions

    struct Parameters: Codable, Sendable {
        var files: Int
        var sizeMiB: Int
        var parallel: Int
    }

    struct Direction: Codable, Sendable {
        var mebibytes: Double
        var seconds: Double
        var mebibytesPerSecond: Double
        var serverCPUSeconds: Double?
        /// Server CPU milliseconds per MiB moved.
        var serverCPUMillisecondsPerMiB: Double?
        var failures: Int
    }

    struct Figures: Codable, Sendable {
        var upload: Direction
        var download: Direction
        var serverPeakResidentBytes: Int?
    }

    func run() async throws {
        guard files > 0, sizeMib > 0, parallel > 0 else { throw ValidationError("--files, --size-mib, --parallel > 0") }
        try await BenchRun.run(scenario: "files", server: server, options: client) { run in
            let prefix = "f\(run.runID)-"
            let tokens = try await run.provisioner.users(prefix: prefix, count: 1)
            let conversation = try await run.provisioner.groups([(tokens[0], [])])[0]
            let token = tokens[0]
            // One random MiB, repeated: the server hashes and stores every byte; nothing compresses.
            var mebibyte = [UInt8](repeating: 0, count: 1024 * 1024)
            for index in mebibyte.indices { mebibyte[index] = UInt8.random(in: 0...255) }
            var filled = ByteBuffer()
            filled.reserveCapacity(sizeMib * mebibyte.count)
            for _ in 0..<sizeMib { filled.writeBytes(mebibyte) }
            let body = filled
            let size = body.readableBytes
            let peak = NIOLockedValueBox(run.server.residentBytes() ?? 0)
            let sampling = Task {
                while !Task.isCancelled {
                    let now = run.server.residentBytes() ?? 0
                    peak.withLockedValue { $0 = max($0, now) }
                    try? await Task.sleep(for: .milliseconds(50))
                }
            }
            defer { sampling.cancel() }
            let provisioner = Provisioner(
                server: run.provisioner.server, group: run.provisioner.group, parallelism: parallel
            )
            let headers = [("Authorization", "Bearer \(token)")]
            let total = Double(files * size) / (1024 * 1024)

            run.note("uploading \(files) files of \(sizeMib) MiB, \(parallel) at a time")
            run.startMeasuring()
            var cpu = run.server.cpuSeconds()
            var started = Monotonic.nanoseconds()
            let uploaded = try await provisioner.parallel(count: files) { connection, index -> String? in
                let answer = try await connection.request(
                    .POST, "/v1/conversations/\(conversation)/attachments?name=bench-\(index).bin", headers: headers,
                    body: body, contentType: "application/octet-stream"
                )
                guard answer.status == 201 else { return nil }
                return try answer.decode(Attachment.self).id
            }
            let upload = direction(
                mebibytes: total, from: started, cpuBefore: cpu, cpuAfter: run.server.cpuSeconds(),
                failures: uploaded.filter { $0 == nil }.count
            )
            let ids = uploaded.compactMap { $0 }
            let links = try await provisioner.parallel(count: ids.count) { connection, index -> String in
                let answer = try await connection.request(
                    .GET, "/v1/conversations/\(conversation)/attachments/\(ids[index])", headers: headers
                )
                guard answer.status == 200 else { throw HTTPError(description: "link: \(answer.status)") }
                return try answer.decode(AttachmentLink.self).url
            }

            run.note("downloading \(links.count) files, \(parallel) at a time")
            cpu = run.server.cpuSeconds()
            started = Monotonic.nanoseconds()
            let downloaded = try await provisioner.parallel(count: links.count) { connection, index -> Bool in
                let answer = try await connection.request(.GET, links[index])
                return answer.status == 200 && answer.body.readableBytes == size
            }
            let download = direction(
                mebibytes: Double(links.count * size) / (1024 * 1024), from: started, cpuBefore: cpu,
                cpuAfter: run.server.cpuSeconds(), failures: downloaded.filter { !$0 }.count
            )
            sampling.cancel()
            let figures = Figures(
                upload: upload, download: download, serverPeakResidentBytes: peak.withLockedValue { $0 }
            )
            func line(_ name: String, _ figures: Direction) -> String {
                "\(name) \(Format.fixed(figures.mebibytesPerSecond, 0)) MiB/s"
                    + (figures.serverCPUMillisecondsPerMiB.map { " server_cpu/MiB=\(Format.fixed($0, 2))ms" } ?? "")
                    + (figures.failures > 0 ? " failures=\(figures.failures)" : "")
            }
            try run.report(
                line: "files=\(files)x\(sizeMib)MiB parallel=\(parallel) " + line("upload", upload) + " "
                    + line("download", download)
                    + (figures.serverPeakResidentBytes.map { " server_rss_peak=\(Format.bytes(Double($0)))" } ?? ""),
                parameters: Parameters(files: files, sizeMiB: sizeMib, parallel: parallel),
                figures: figures
            )
        }
    }

    private func direction(
        mebibytes: Double, from started: UInt64, cpuBefore: Double?, cpuAfter: Double?, failures: Int
    )
        -> Direction
    {
        let seconds = Double(Monotonic.nanoseconds() &- started) / 1e9
        let cpu = cpuBefore.flatMap { before in cpuAfter.map { $0 - before } }
        return Direction(
            mebibytes: mebibytes, seconds: seconds, mebibytesPerSecond: mebibytes / max(seconds, 1e-9),
            serverCPUSeconds: cpu, serverCPUMillisecondsPerMiB: cpu.map { $0 * 1000 / max(mebibytes, 1e-9) },
            failures: failures
        )
    }
}
